"""customgrad.grad / value_and_grad / vjp agree with the backends' own tools, and
check_gradients catches planted bugs while passing correct custom gradients."""

import re

import keras
import numpy as np
import pytest
from helpers import BACKEND, float64_enabled, log1pexp, native_grad, npy, t
from keras import ops

import customgrad
from customgrad import GradientCheckError

pytestmark = pytest.mark.autodiff


def random_tree(rng):
    return {
        "w": t(rng.normal(size=(3, 2))),
        "pair": (t(rng.normal(size=(2,))), t(rng.normal(size=()))),
        "list": [t(rng.normal(size=(4,)))],
    }


def nested_loss(tree, x):
    h = ops.tanh(ops.matmul(x, tree["w"]) + tree["pair"][0]) * tree["pair"][1]
    return ops.sum(h ** 2) + ops.sum(ops.sin(tree["list"][0]) * ops.sum(x))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grad_equals_the_native_tool_on_random_nested_inputs(seed):
    rng = np.random.default_rng(seed)
    tree, x = random_tree(rng), t(rng.normal(size=(5, 3)))
    g_tree, g_x = customgrad.grad(nested_loss, argnums=(0, 1))(tree, x)
    leaves = [tree["w"], tree["pair"][0], tree["pair"][1], tree["list"][0], x]

    def flat_loss(w, b, s, item, x):
        return nested_loss({"w": w, "pair": (b, s), "list": [item]}, x)

    expected = native_grad(flat_loss, *leaves)
    got = [g_tree["w"], g_tree["pair"][0], g_tree["pair"][1], g_tree["list"][0], g_x]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(npy(a), npy(b), rtol=1e-5, atol=1e-6)


def test_value_and_grad_and_has_aux():
    def f(x, k):
        return ops.sum(x ** 2) * k, {"norm": ops.sqrt(ops.sum(x ** 2))}

    (value, aux), g = customgrad.value_and_grad(f, has_aux=True)(t([3.0, 4.0]), 2.0)
    assert float(npy(value)) == 50.0 and float(npy(aux["norm"])) == 5.0
    np.testing.assert_array_equal(npy(g), [12.0, 16.0])
    g2, _ = customgrad.grad(f, has_aux=True)(t([3.0, 4.0]), 2.0)
    np.testing.assert_array_equal(npy(g2), [12.0, 16.0])


def test_aux_may_hold_what_is_not_a_tensor():
    """As jax.grad's and jax.vjp's: aux's names, counts and None come back as they are, its
    tensors as values, on every backend."""
    def f(x):
        return ops.sum(x ** 2), {"name": "loss", "steps": 3, "none": None, "norm": ops.sum(x)}

    g, aux = customgrad.grad(f, has_aux=True)(t([3.0, 4.0]))
    np.testing.assert_array_equal(npy(g), [6.0, 8.0])
    assert (aux["name"], aux["steps"], aux["none"]) == ("loss", 3, None)
    assert float(npy(aux["norm"])) == 7.0
    _, vjp_fn, aux = customgrad.vjp(f, t([1.0, 2.0]), has_aux=True)
    assert aux["name"] == "loss" and float(npy(aux["norm"])) == 3.0
    np.testing.assert_array_equal(npy(vjp_fn(t(1.0))[0]), [2.0, 4.0])


def test_vjp_with_nested_outputs_and_keyword_arguments():
    def f(x, *, scale):
        return {"a": x * scale, "b": (ops.sum(x), x ** 2)}

    out, vjp_fn = customgrad.vjp(lambda x: f(x, scale=3.0), t([1.0, 2.0]))
    (g,) = vjp_fn({"a": t([1.0, 1.0]), "b": (t(1.0), t([1.0, 0.0]))})
    np.testing.assert_array_equal(npy(g), [3.0 + 1.0 + 2.0, 3.0 + 1.0])
    assert float(npy(out["b"][0])) == 3.0


def test_grad_rejects_non_scalar_outputs_like_jax():
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.grad: `<lambda>` must return a float scalar (shape ()) to take its "
            "gradient; received a ")) as info:
        customgrad.grad(lambda x: x * 2.0)(t([1.0, 2.0]))
    assert "shape (2,)" in str(info.value)


def test_grad_rejects_bad_argnums():
    with pytest.raises(ValueError, match=re.escape(
            "customgrad.grad: argnums 3 refers to positional argument 3, but `<lambda>` was "
            "called with 1.")):
        customgrad.grad(lambda x: ops.sum(x), argnums=3)(t([1.0]))


def test_vjp_rejects_cotangents_of_the_wrong_structure():
    _, vjp_fn = customgrad.vjp(lambda x: (x, x), t([1.0]))
    with pytest.raises(ValueError, match=r"customgrad.vjp: the cotangents must have the structure"):
        vjp_fn(t([1.0]))


def test_grad_of_grad_gives_second_derivatives():
    d2 = customgrad.grad(customgrad.grad(lambda x: ops.sin(x) * x ** 2))
    x = 0.7
    expected = -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)
    np.testing.assert_allclose(npy(d2(t(x))), expected, rtol=1e-5)


@pytest.mark.slow
def test_grad_works_under_the_backends_compiler():
    step = customgrad.grad(lambda x: ops.sum(ops.sin(x)))
    if BACKEND == "jax":
        import jax

        step = jax.jit(step)
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        step = tf.function(step, jit_compile=True)
    else:
        import torch

        step = torch.compile(step)
    np.testing.assert_allclose(npy(step(t([0.0, 1.0]))), np.cos([0.0, 1.0]), rtol=1e-6)


# --- check_gradients ---------------------------------------------------------------------------
def test_checker_passes_log1pexp_at_100_against_finite_differences():
    report = customgrad.check_gradients(log1pexp, t([-100.0, 0.0, 10.0, 100.0]), jacobian=True)
    assert report.passed and len(report.checks) == 3


def test_checker_against_autodiff_and_second_order():
    assert customgrad.check_gradients(log1pexp, t([-3.0, 0.5, 4.0]), against="autodiff").passed
    report = customgrad.check_gradients(log1pexp, t([-3.0, 0.5, 4.0]), order=2)
    assert [c.name for c in report.checks].count("VJP of VJP vs finite differences") == 2


def test_checker_catches_a_gradient_off_by_a_factor_of_two():
    @customgrad.custom_gradient
    def doubled(x):
        return ops.sin(x), lambda dy: 2.0 * dy * ops.cos(x)

    with pytest.raises(GradientCheckError, match=re.escape(
            "customgrad.check_gradients: the gradient of `")) as info:
        customgrad.check_gradients(doubled, t([0.1, 0.7, 1.3]))
    assert "VJP vs finite differences failed at args[0]" in str(info.value)
    assert not info.value.report.passed


def test_checker_names_the_leaf_with_a_wrong_sign_in_a_dict_input():
    @customgrad.custom_gradient
    def f(params, k):
        y = params["a"] * k + ops.sin(params["b"])
        return y, lambda dy: ({"a": dy * k, "b": -dy * ops.cos(params["b"])},  # wrong sign
                              ops.sum(dy * params["a"]))

    report = customgrad.check_gradients(f, {"a": t([1.0, 2.0]), "b": t([0.3, 0.4])}, t(2.0),
                                        raise_on_failure=False)
    failed = {c.where for c in report.failures}
    assert failed == {"args[0]['b']"}
    assert {c.where for c in report.checks} == {"args[0]['a']", "args[0]['b']", "args[1]"}


def test_checker_catches_a_wrong_second_derivative():
    # first derivative right at x = 0 ... and everywhere; second derivative wrong:
    # grad_fn computes cos(x) through stop_gradient-free ops but uses x*0 + cos(0)
    @customgrad.custom_gradient
    def frozen(x):
        slope = ops.cos(ops.stop_gradient(x))  # value right, no dependence on x for d2
        return ops.sin(x), lambda dy: dy * slope

    x = t([0.4, 1.1])
    assert customgrad.check_gradients(frozen, x).passed
    with pytest.raises(GradientCheckError, match="VJP of VJP vs finite differences failed"):
        customgrad.check_gradients(frozen, x, order=2)


def test_checker_catches_a_gradient_given_to_the_wrong_argument():
    @customgrad.custom_gradient
    def mul(x, y):
        return x * y, lambda dy: (dy * x, dy * y)  # swapped

    report = customgrad.check_gradients(mul, t([1.0, 2.0]), t([3.0, 5.0]), raise_on_failure=False)
    assert {c.where for c in report.failures} == {"args[0]", "args[1]"}


def test_checker_handles_keywords_integers_and_non_tensors():
    @customgrad.custom_gradient
    def f(x, idx, label, *, scale):
        y = ops.take(x, idx) * scale
        return y, lambda dy: (ops.scatter(ops.expand_dims(idx, 1), dy * scale, (4,)), None, None)

    idx = ops.convert_to_tensor(np.array([0, 3], dtype="int32"))
    report = customgrad.check_gradients(f, t([1.0, 2.0, 3.0, 4.0]), idx, "label", scale=2.5)
    assert [c.where for c in report.checks] == ["args[0]", "args[0]"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_checker_picks_tolerances_by_dtype(dtype):
    with float64_enabled():
        x = ops.cast(t([-2.0, 0.5, 3.0]), dtype)
        assert customgrad.check_gradients(log1pexp, x).passed

        @customgrad.custom_gradient
        def off(x):
            return ops.sin(x), lambda dy: dy * ops.cos(x) * 1.5

        with pytest.raises(GradientCheckError):
            customgrad.check_gradients(off, ops.cast(t([0.2, 0.9]), dtype))


def test_checker_rejects_bad_options():
    with pytest.raises(ValueError, match=re.escape(
            "customgrad.check_gradients: order must be 1 or 2; received 3.")):
        customgrad.check_gradients(log1pexp, t([1.0]), order=3)
    with pytest.raises(ValueError, match="against='autodiff' needs a function decorated"):
        customgrad.check_gradients(ops.sin, t([1.0]), against="autodiff")
    with pytest.raises(ValueError, match="has no floating-point tensor among its positional"):
        customgrad.check_gradients(log1pexp, 3)


def test_checker_full_jacobian_names_the_wrong_element():
    # y_i = sin(x_i) * x_0: grad_fn forgets the x_0 cross term (column 0 of the Jacobian)
    missing_cross_term = customgrad.custom_gradient(
        lambda x: (ops.sin(x) * x[0], lambda dy: dy * ops.cos(x) * x[0]))
    report = customgrad.check_gradients(missing_cross_term, t([1.0, 2.0]), jacobian=True,
                                        raise_on_failure=False)
    jacobian = [c for c in report.checks if c.name == "Jacobian vs finite differences"]
    assert [c.where for c in jacobian] == ["args[0][0] (output element 1)"]
    assert not jacobian[0].passed


def test_checker_finite_differences_really_run_in_float64():
    # Regression: on jax, Keras computed ops.sin of float64 inputs in float32, so finite
    # differences of x * sin(x) carried float32 noise and a correct gradient was rejected.
    f = customgrad.custom_gradient(
        lambda x: (x * ops.sin(x), lambda dy: dy * (ops.sin(x) + x * ops.cos(x))))
    report = customgrad.check_gradients(f, t([0.5, 1.0, 2.0]))
    assert max(c.error for c in report.checks) < 1e-6
    assert keras.backend.standardize_dtype(ops.sin(t([1.0])).dtype) == "float32"  # restored
