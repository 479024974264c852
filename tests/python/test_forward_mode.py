"""Forward mode and Hessians derived from grad_fn, on every backend, eager and compiled.

J v is the VJP of grad_fn (linear in its upstream) applied to v. For log1pexp at x = 100 the JVP
is grad_fn's 1.0 (f's own derivative is NaN there); the Hessian of sum(log1pexp) is diagonal with
s (1 - s), s = sigmoid(x). On jax forward mode needs `forward_mode=True`.
"""

import re

import keras
import numpy as np
import pytest
from helpers import BACKEND, log1pexp, npy, t
from keras import ops

import customgrad
from customgrad import ops as cops
from customgrad._forward import nonlinear

pytestmark = pytest.mark.autodiff

NOT_LINEAR = "is not linear in its upstream gradient"


def _log1pexp(x):
    e = ops.exp(x)
    return ops.log(1.0 + e), lambda upstream: upstream * (1.0 - 1.0 / (1.0 + e))


fwd_log1pexp = customgrad.custom_gradient(_log1pexp, forward_mode=True)


@customgrad.custom_gradient(forward_mode=True)
def product_and_sum(x, y):
    """Two inputs, two outputs: (x * y, x + y)."""
    return (x * y, x + y), lambda a, b: (a * y + b, a * x + b)


def sigmoid_prime(x):
    s = 1 / (1 + np.exp(-np.asarray(x, dtype=np.float64)))
    return s * (1 - s)


X100 = [0.0, 100.0]
X2 = [0.0, 2.0]


def total(fn):
    return lambda v: ops.sum(fn(v))


# --- the backend-agnostic API --------------------------------------------------------------------
def test_customgrad_jvp_is_grad_fns_derivative_at_100():
    x = t(X100)
    y, dy = customgrad.jvp(fwd_log1pexp, (x,), (ops.ones_like(x),))
    np.testing.assert_allclose(npy(dy), [0.5, 1.0])
    np.testing.assert_allclose(npy(y)[0], np.log(2.0), rtol=1e-6)


def test_keras_ops_jvp_uses_grad_fn():
    x = t(X100)
    _, dy = keras.ops.jvp(fwd_log1pexp, (x,), (ops.ones_like(x),))
    np.testing.assert_allclose(npy(dy), [0.5, 1.0])


def test_jvp_with_several_inputs_and_outputs():
    x, y = t([1.0, 2.0]), t([3.0, 5.0])
    (p, _), (dp, ds) = customgrad.jvp(product_and_sum, (x, y), (t([1.0, 0.0]), t([0.0, 1.0])))
    np.testing.assert_allclose(npy(p), [3.0, 10.0])
    # d(x y) = y dx + x dy; d(x + y) = dx + dy
    np.testing.assert_allclose(npy(dp), [3.0, 2.0])
    np.testing.assert_allclose(npy(ds), [1.0, 1.0])


def test_jvp_structures_none_tangents_integer_outputs_and_aux():
    x = t(X2)  # (not 100: log1pexp(100) is inf, and inf times the zero tangent of scale is NaN)

    def f(d, scale):
        return {"y": fwd_log1pexp(d["x"]) * scale, "n": ops.argmax(d["x"])}, "aux"

    out, tangents, aux = customgrad.jvp(f, ({"x": x}, 2.0), ({"x": ops.ones_like(x)}, None),
                                        has_aux=True)
    np.testing.assert_allclose(npy(tangents["y"]), 2.0 / (1.0 + np.exp(-np.array(X2))),
                               rtol=1e-6)
    assert tangents["n"] is None and int(npy(out["n"])) == 1 and aux == "aux"


def test_jvp_refuses_bad_tangents_and_primals():
    x = t(X100)
    with pytest.raises(ValueError, match=re.escape(
            "customgrad.jvp: the tangent of primals[0] has shape (3,), but the primal has "
            "shape (2,)")):
        customgrad.jvp(fwd_log1pexp, (x,), (t([1.0, 1.0, 1.0]),))
    with pytest.raises(ValueError, match=r"customgrad.jvp: tangents must have the structure"):
        customgrad.jvp(product_and_sum, (x, x), (x,))
    with pytest.raises(TypeError, match=r"customgrad.jvp: primals must be a tuple"):
        customgrad.jvp(fwd_log1pexp, x, (x,))
    with pytest.raises(TypeError, match=r"customgrad.hvp: primals must be a non-empty tuple"):
        customgrad.hvp(total(fwd_log1pexp), x, (x,))


@pytest.mark.parametrize("fn", [fwd_log1pexp, log1pexp], ids=["forward_mode", "default"])
def test_hvp_is_the_derivative_of_grad_fn(fn):
    # forward over reverse: works without forward_mode=True too (it differentiates grad_fn)
    x = t(X2)
    (hv,) = customgrad.hvp(total(fn), (x,), (t([1.0, 0.0]),))
    np.testing.assert_allclose(npy(hv), [sigmoid_prime(0.0), 0.0], rtol=1e-5)
    (hv,) = customgrad.hvp(total(fn), (x,), (ops.ones_like(x),))
    np.testing.assert_allclose(npy(hv), sigmoid_prime(X2), rtol=1e-5)


def test_reverse_mode_of_a_forward_mode_function_is_unchanged():
    x = t([-3.0, 0.0, 2.0, 100.0])
    g_fwd = customgrad.grad(total(fwd_log1pexp))(x)
    g_rev = customgrad.grad(total(log1pexp))(x)
    np.testing.assert_array_equal(npy(g_fwd), npy(g_rev))
    gx, gy = customgrad.grad(lambda a, b: ops.sum(product_and_sum(a, b)[0]) + ops.sum(
        product_and_sum(a, b)[1]), argnums=(0, 1))(t([1.0, 2.0]), t([3.0, 5.0]))
    np.testing.assert_allclose(npy(gx), [4.0, 6.0])
    np.testing.assert_allclose(npy(gy), [2.0, 3.0])


def test_forward_mode_option_is_checked():
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.custom_gradient: forward_mode must be True or False; received 'yes'")):
        customgrad.custom_gradient(_log1pexp, forward_mode="yes")
    with pytest.raises(TypeError, match="expected a callable"):
        customgrad.custom_gradient(None)


# --- grad_fns that are not linear in their upstream ----------------------------------------------
@customgrad.custom_gradient(forward_mode=True)
def rescaled_by_norm(x):
    """An unmarked rule that rescales the upstream by its norm: found by the probe."""
    return x, lambda u: u / ops.maximum(ops.sqrt(ops.sum(u * u)), 1.0)


@customgrad.custom_gradient(forward_mode=True)
def marked_clip(x):
    return x, nonlinear(lambda u: ops.clip(u, -1.0, 1.0), "it clips the upstream")


def _eager_jvp(fn, x):
    """The JVP on concrete values, where the probe runs (on torch customgrad.jvp is
    torch.func.jvp, whose wrapped tensors the probe does not read: a dual tensor here)."""
    if BACKEND != "torch":
        return customgrad.jvp(fn, (x,), (ops.ones_like(x),))[1]
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        return fwAD.unpack_dual(fn(fwAD.make_dual(x, ops.ones_like(x)))).tangent


def test_a_rule_rescaling_by_the_upstream_norm_is_found_by_the_probe():
    x = t([1.0, 2.0, 3.0])
    with pytest.raises(customgrad.CustomGradientError, match=re.escape(
            "`rescaled_by_norm` is not linear in its upstream gradient (grad_fn(u * 1000) != "
            "grad_fn(u) * 1000 at a random u), so it defines no forward-mode derivative")):
        _eager_jvp(rescaled_by_norm, x)
    reverse = customgrad.grad(total(rescaled_by_norm))
    if BACKEND == "jax":
        # jax takes reverse mode by transposing the derived JVP: refused as well
        with pytest.raises(customgrad.CustomGradientError, match=NOT_LINEAR):
            reverse(x)
    else:  # reverse mode of the same function is not affected
        np.testing.assert_allclose(npy(reverse(x)), np.ones(3) / np.sqrt(3.0), rtol=1e-6)


def test_a_marked_rule_is_refused_also_when_compiled():
    x = t([1.0, 2.0])

    def jvp_of_clip(v):
        return customgrad.jvp(marked_clip, (v,), (ops.ones_like(v),))[1]

    with pytest.raises(customgrad.CustomGradientError, match=NOT_LINEAR):
        jvp_of_clip(x)
    if BACKEND == "jax":
        import jax

        compiled = jax.jit(jvp_of_clip)
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(jvp_of_clip, jit_compile=True)
    else:
        import torch

        compiled = torch.compile(jvp_of_clip)
    with pytest.raises(customgrad.CustomGradientError, match=NOT_LINEAR):
        compiled(x)


def test_customgrad_ops_clipping_rules_have_no_forward_mode():
    x = t([3.0, 4.0])
    for fn in (lambda v: cops.clip_gradient_norm(v, 1.0), lambda v: cops.clip_gradient(v, -1, 1)):
        # on jax customgrad.ops are reverse-mode functions (no forward_mode=True): also refused
        with pytest.raises(customgrad.CustomGradientError,
                           match=NOT_LINEAR if BACKEND != "jax" else "forward_mode=True"):
            customgrad.jvp(fn, (x,), (ops.ones_like(x),))


# --- check_gradients(modes=...) ------------------------------------------------------------------
def test_check_gradients_checks_the_derived_jvp():
    report = customgrad.check_gradients(fwd_log1pexp, t([-1.0, 0.5, 3.0]), modes=("rev", "fwd"))
    names = [c.name for c in report.checks]
    assert names.count("JVP vs finite differences") == 2
    assert names.count("VJP vs finite differences") == 2

    @customgrad.custom_gradient(forward_mode=True)
    def wrong(x):
        return ops.sin(x), lambda u: u * ops.cos(x) * 1.5

    report = customgrad.check_gradients(wrong, t([0.3, 1.0]), modes=("fwd",),
                                        raise_on_failure=False)
    assert not report.passed
    assert {c.name for c in report.failures} == {"JVP vs finite differences"}
    with pytest.raises(customgrad.GradientCheckError, match="JVP vs finite differences failed"):
        customgrad.check_gradients(wrong, t([0.3, 1.0]), modes="fwd")
    with pytest.raises(ValueError, match=re.escape(
            "customgrad.check_gradients: modes must be a non-empty tuple of 'rev' and 'fwd'; "
            "received ('forward',)")):
        customgrad.check_gradients(wrong, t([0.3]), modes=("forward",))


# --- torch ---------------------------------------------------------------------------------------
@pytest.mark.backends("torch")
def test_torch_dual_tensors_func_jvp_and_jacfwd():
    import torch
    import torch.autograd.forward_ad as fwAD

    x = t(X100)
    with fwAD.dual_level():
        y = fwd_log1pexp(fwAD.make_dual(x, torch.ones_like(x)))
        np.testing.assert_allclose(npy(fwAD.unpack_dual(y).tangent), [0.5, 1.0])
    _, dy = torch.func.jvp(log1pexp, (x,), (torch.ones_like(x),))
    np.testing.assert_allclose(npy(dy), [0.5, 1.0])
    np.testing.assert_allclose(npy(torch.func.jacfwd(log1pexp)(x)), np.diag([0.5, 1.0]))
    batched = torch.vmap(lambda v: torch.func.jvp(log1pexp, (v,), (torch.ones_like(v),))[1])
    np.testing.assert_allclose(npy(batched(t([[0.0, 100.0], [0.0, 0.0]]))),
                               [[0.5, 1.0], [0.5, 0.5]])


@pytest.mark.backends("torch")
def test_torch_hessians_forward_over_reverse_and_reverse_over_forward():
    import torch
    import torch.autograd.forward_ad as fwAD

    expected = np.diag(sigmoid_prime(X2))
    f = total(log1pexp)
    np.testing.assert_allclose(npy(torch.func.hessian(f)(t(X2))), expected, rtol=1e-5)
    np.testing.assert_allclose(npy(torch.func.jacrev(torch.func.jacfwd(f))(t(X2))), expected,
                               rtol=1e-5)
    # forward_ad dual tensors over torch.autograd.grad: H v
    with fwAD.dual_level():
        x = fwAD.make_dual(t(X2).requires_grad_(True), t([1.0, 0.0]))
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        np.testing.assert_allclose(npy(fwAD.unpack_dual(g).tangent.detach()),
                                   [sigmoid_prime(0.0), 0.0], rtol=1e-5)
    # the dual tangent is differentiable: reverse over forward
    xr = t(X2).requires_grad_(True)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(log1pexp(fwAD.make_dual(xr, torch.ones_like(xr)))).tangent
    (h,) = torch.autograd.grad(tangent.sum(), xr)
    np.testing.assert_allclose(npy(h), sigmoid_prime(X2), rtol=1e-5)


@pytest.mark.backends("torch")
def test_torch_forward_over_forward_is_an_error_not_a_silent_zero():
    import torch

    # torch does not differentiate an autograd.Function's jvp rule (its own custom Functions get
    # a zero second derivative here): refused
    with pytest.raises(customgrad.CustomGradientError, match="forward over forward"):
        torch.func.jacfwd(torch.func.jacfwd(total(log1pexp)))(t(X2))


@pytest.mark.backends("torch")
def test_torch_compile_forward_mode():
    import torch
    import torch.autograd.forward_ad as fwAD

    x = t(X100)
    compiled_jvp = torch.compile(lambda v: torch.func.jvp(log1pexp, (v,), (torch.ones_like(v),)))
    np.testing.assert_allclose(npy(compiled_jvp(x)[1]), [0.5, 1.0])
    _, dy = torch.func.jvp(torch.compile(log1pexp), (x,), (torch.ones_like(x),))
    np.testing.assert_allclose(npy(dy), [0.5, 1.0])
    compiled_hessian = torch.compile(torch.func.hessian(total(log1pexp)))
    np.testing.assert_allclose(npy(compiled_hessian(t(X2))), np.diag(sigmoid_prime(X2)),
                               rtol=1e-5)
    compiled = torch.compile(log1pexp)
    with fwAD.dual_level():
        y = compiled(fwAD.make_dual(x, torch.ones_like(x)))
        np.testing.assert_allclose(npy(fwAD.unpack_dual(y).tangent), [0.5, 1.0])


# --- jax -----------------------------------------------------------------------------------------
@pytest.mark.backends("jax")
def test_jax_jvp_jacfwd_and_hessian_with_forward_mode_eager_and_jit():
    import jax

    x = t(X100)
    _, dy = jax.jvp(fwd_log1pexp, (x,), (ops.ones_like(x),))
    np.testing.assert_allclose(npy(dy), [0.5, 1.0])
    jitted = jax.jit(lambda v: jax.jvp(fwd_log1pexp, (v,), (ops.ones_like(v),))[1])
    np.testing.assert_allclose(npy(jitted(x)), [0.5, 1.0])
    np.testing.assert_allclose(npy(jax.jacfwd(fwd_log1pexp)(x)), np.diag([0.5, 1.0]))
    expected = np.diag(sigmoid_prime(X2))
    f = total(fwd_log1pexp)
    for hessian in (jax.hessian(f), jax.jit(jax.hessian(f)), jax.jacfwd(jax.jacfwd(f))):
        np.testing.assert_allclose(npy(hessian(t(X2))), expected, rtol=1e-5)
    batched = jax.vmap(lambda v: jax.jvp(fwd_log1pexp, (v,), (ops.ones_like(v),))[1])
    np.testing.assert_allclose(npy(batched(t([[0.0, 100.0], [0.0, 0.0]]))),
                               [[0.5, 1.0], [0.5, 0.5]])


@pytest.mark.backends("jax")
def test_jax_reverse_mode_of_a_forward_mode_function_uses_grad_fn():
    import jax

    x = t([-3.0, 0.0, 2.0, 100.0])
    for grad in (jax.grad(total(fwd_log1pexp)), jax.jit(jax.grad(total(fwd_log1pexp)))):
        np.testing.assert_array_equal(npy(grad(x)), npy(jax.grad(total(log1pexp))(x)))

    # a grad_fn that differs from f's derivative: reverse mode gives grad_fn's value
    @customgrad.custom_gradient(forward_mode=True)
    def hundredfold(v):
        return v * 2.0, lambda u: u * 100.0

    assert float(jax.grad(hundredfold)(t(1.0))) == 100.0
    assert float(jax.jvp(hundredfold, (t(1.0),), (t(1.0),))[1]) == 100.0


@pytest.mark.backends("jax")
def test_jax_without_forward_mode_jvp_is_a_named_error():
    import jax

    x = t(X100)
    from customgrad._messages import JaxForwardModeError

    with pytest.raises(JaxForwardModeError, match=re.escape("needs customgrad.custom_gradient(..., "
                                                            "forward_mode=True)")):
        jax.jvp(log1pexp, (x,), (ops.ones_like(x),))
    with pytest.raises(customgrad.CustomGradientError, match=re.escape(
            "on jax, forward mode needs customgrad.custom_gradient(..., forward_mode=True)")):
        customgrad.jvp(log1pexp, (x,), (ops.ones_like(x),))


# --- tensorflow ----------------------------------------------------------------------------------
def _jvp_with_accumulator(v):
    import tensorflow as tf

    with tf.autodiff.ForwardAccumulator(v, tf.ones_like(v)) as acc:
        out = log1pexp(v)
    return acc.jvp(out)


def _hvp_with_accumulator(v, vector):
    import tensorflow as tf

    with tf.autodiff.ForwardAccumulator(v, vector) as acc:
        with tf.GradientTape() as tape:
            tape.watch(v)
            y = tf.reduce_sum(log1pexp(v))
        g = tape.gradient(y, v)
    return acc.jvp(g)


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function", "jit_compile"])
def test_tf_forward_accumulator_and_hessian_vector_products(mode):
    import tensorflow as tf

    def compiled(fn):
        if mode == "eager":
            return fn
        return tf.function(fn, jit_compile=mode == "jit_compile")

    x = t(X100)
    np.testing.assert_allclose(npy(compiled(_jvp_with_accumulator)(x)), [0.5, 1.0])
    keras_jvp = compiled(lambda v: keras.ops.jvp(log1pexp, (v,), (tf.ones_like(v),))[1])
    np.testing.assert_allclose(npy(keras_jvp(x)), [0.5, 1.0])
    hv = compiled(_hvp_with_accumulator)(t(X2), t([1.0, 1.0]))
    np.testing.assert_allclose(npy(hv), sigmoid_prime(X2), rtol=1e-5)


@pytest.mark.backends("tensorflow")
def test_tf_accumulator_on_a_function_reading_a_variable_derives_the_jvp_from_grad_fn():
    import tensorflow as tf

    scale = keras.Variable(3.0)

    @customgrad.custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return dy * 10.0, [tf.reduce_sum(dy * x)]  # 10: grad_fn's, not f's own 3
        return x * scale, grad

    x = t([1.0, 2.0])
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as acc:
        out = scaled(x)
    np.testing.assert_allclose(npy(out), [3.0, 6.0])
    np.testing.assert_allclose(npy(acc.jvp(out)), [10.0, 10.0])


@pytest.mark.backends("tensorflow")
def test_tf_tape_outside_a_function_with_an_accumulator_inside_uses_grad_fn():
    import tensorflow as tf

    @tf.function
    def value_and_jvp(v):
        with tf.autodiff.ForwardAccumulator(v, tf.ones_like(v)) as acc:
            out = log1pexp(v)
        return out, acc.jvp(out)

    x = t([0.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        out, jvp = value_and_jvp(x)
    # the gradient of `out` only: grad_fn's; (at 100 the zero cotangent of `jvp` would meet
    # grad_fn's own derivative, which overflows there)
    np.testing.assert_allclose(npy(tape.gradient(out, x)), 1 / (1 + np.exp(-np.array(X2))),
                               rtol=1e-6)
    np.testing.assert_allclose(npy(jvp), 1 / (1 + np.exp(-np.array(X2))), rtol=1e-6)
