"""What users of tf.custom_gradient and jax.custom_gradient expect when they switch to customgrad,
on every backend: Python and numpy scalars, numpy arrays given to grad/value_and_grad/vjp, tensors
of a framework other than the active backend's, and error messages that read well."""

import re

import numpy as np
import pytest
from helpers import BACKEND, native_grad, npy, require, t
from keras import ops

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.autodiff


# --- Python and numpy scalars --------------------------------------------------------------------
def _jax_docs_square(x):
    """The first example of jax.custom_gradient's documentation."""
    return x ** 2, lambda g: (g * x,)


@pytest.mark.parametrize("x", [3.0, np.float32(3.0)], ids=["python_float", "numpy_float32"])
def test_scalar_argument_is_differentiated_with_the_custom_gradient(x):
    f = customgrad.custom_gradient(_jax_docs_square)
    np.testing.assert_allclose(npy(customgrad.grad(f)(x)), 3.0)


@pytest.mark.parametrize("x", [3.0, np.float32(3.0)], ids=["python_float", "numpy_float32"])
def test_scalar_argument_reaches_f_as_a_tensor_of_the_backend(x):
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        seen["is_tensor"] = ops.is_tensor(x)
        return x * 2.0, lambda g: g * 2.0

    np.testing.assert_allclose(npy(customgrad.grad(f)(x)), 2.0)
    assert seen["is_tensor"]


@pytest.mark.parametrize("constant", [-1.1, np.float32(-1.1)], ids=["python_float", "numpy_float32"])
def test_scalar_part_of_the_output_becomes_a_tensor_and_gets_its_upstream(constant):
    received = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy_tensor, dy_constant):
            received["dy_constant"] = dy_constant
            return dy_tensor * 2.0 + dy_constant * 5.0

        return (x * 2.0, constant), grad

    x = t(1.0)
    out = f(x)
    assert ops.is_tensor(out[1]), f"the constant output stayed a {type(out[1]).__name__}"
    np.testing.assert_allclose(npy(out[1]), -1.1, rtol=1e-6)

    def loss(x):
        a, b = f(x)
        return a + 3.0 * b

    g = customgrad.grad(loss)(x)
    assert received["dy_constant"] is not None
    np.testing.assert_allclose(npy(received["dy_constant"]), 3.0)
    np.testing.assert_allclose(npy(g), 2.0 + 15.0)


@pytest.mark.parametrize("constant", [-1.1, np.float32(-1.1)], ids=["python_float", "numpy_float32"])
def test_scalar_whole_output_gets_its_upstream_through_native_autodiff(constant):
    received = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy):
            received["dy"] = dy
            return dy * 7.0

        return constant, grad

    (g,) = native_grad(f, t(1.0))
    assert received["dy"] is not None
    np.testing.assert_allclose(npy(received["dy"]), 1.0)
    np.testing.assert_allclose(npy(g), 7.0)


# --- numpy arrays to grad / value_and_grad / vjp -------------------------------------------------
def _sum_of_squares(a):
    return ops.sum(a * a)


def test_grad_of_a_numpy_array_is_the_gradient_not_none():
    g = customgrad.grad(_sum_of_squares)(np.array([1.0, 2.0]))
    assert g is not None
    np.testing.assert_allclose(npy(g), [2.0, 4.0])


def test_value_and_grad_of_a_numpy_array():
    value, g = customgrad.value_and_grad(_sum_of_squares)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(npy(value), 5.0)
    assert g is not None
    np.testing.assert_allclose(npy(g), [2.0, 4.0])


def test_vjp_of_a_numpy_array():
    y, vjp_fn = customgrad.vjp(lambda a: a * a, np.array([1.0, 2.0], dtype="float32"))
    np.testing.assert_allclose(npy(y), [1.0, 4.0])
    (g,) = vjp_fn(ops.ones((2,)))
    assert g is not None
    np.testing.assert_allclose(npy(g), [2.0, 4.0])


def test_grad_of_a_numpy_float32_scalar():
    np.testing.assert_allclose(npy(customgrad.grad(lambda a: a * a)(np.float32(3.0))), 6.0)


@pytest.mark.parametrize("x", [3, np.int32(3)], ids=["python_int", "numpy_int32"])
def test_grad_of_an_integer_input_blames_the_input_not_the_output(x):
    with pytest.raises((TypeError, ValueError)) as info:
        customgrad.grad(lambda a: a * a)(x)
    message = str(info.value)
    assert "customgrad.grad" in message
    assert re.search(r"\b(input|argument)", message), message
    assert "must return" not in message, message
    assert "int" in message


# --- tensors of another framework ----------------------------------------------------------------
def _foreign():
    """(framework name, to_tensor, exp, log) of a framework other than the active backend's."""
    if BACKEND == "tensorflow":
        require("jax")
        import jax.numpy as jnp

        return "jax", jnp.asarray, jnp.exp, jnp.log
    require("tensorflow")
    import tensorflow as tf

    return "tensorflow", tf.constant, tf.exp, tf.math.log


def _assert_names_framework_backend_and_fix(error, f_name):
    message = str(error)
    framework = _foreign()[0]
    assert f_name in message, message
    assert framework in message.lower(), message
    assert BACKEND in message.lower(), message
    assert "keras.ops" in message, message


def _tf1_seed_log1pexp():
    """The TF1 seed example as its users wrote it, with tf.exp and tf.math.log."""
    require("tensorflow")
    import tensorflow as tf

    @customgrad.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))

        return tf.math.log(1 + e), grad

    return log1pexp


@pytest.mark.backends("jax", "torch")
def test_tf1_seed_example_written_with_tf_ops_is_a_clear_error_in_customgrad_grad():
    with pytest.raises(CustomGradientError) as info:
        customgrad.grad(_tf1_seed_log1pexp())(t(100.0))
    _assert_names_framework_backend_and_fix(info.value, "log1pexp")


@pytest.mark.backends("jax", "torch")
def test_tf1_seed_example_written_with_tf_ops_is_a_clear_error_in_native_autodiff_not_nan():
    with pytest.raises(CustomGradientError) as info:
        native_grad(_tf1_seed_log1pexp(), t(100.0))
    _assert_names_framework_backend_and_fix(info.value, "log1pexp")


def _log1pexp_returning_a_foreign_tensor():
    """log1pexp computed with another framework's ops on a numpy copy of x (on the tensorflow
    backend that framework is jax, whose ops refuse TensorFlow tensors themselves)."""
    _, to_tensor, exp, log = _foreign()

    @customgrad.custom_gradient
    def foreign_log1pexp(x):
        e = exp(to_tensor(npy(x)))

        def grad(dy):
            return dy * (1 - 1 / (1 + npy(e)))

        return log(1 + e), grad

    return foreign_log1pexp


def test_f_returning_another_frameworks_tensor_is_a_clear_error_in_customgrad_grad():
    with pytest.raises(CustomGradientError) as info:
        customgrad.grad(_log1pexp_returning_a_foreign_tensor())(t(100.0))
    _assert_names_framework_backend_and_fix(info.value, "foreign_log1pexp")


def test_f_returning_another_frameworks_tensor_is_a_clear_error_in_native_autodiff():
    with pytest.raises(CustomGradientError) as info:
        native_grad(_log1pexp_returning_a_foreign_tensor(), t(100.0))
    _assert_names_framework_backend_and_fix(info.value, "foreign_log1pexp")


def test_grad_fn_returning_another_frameworks_tensor_is_a_clear_error():
    _, to_tensor, _, _ = _foreign()

    @customgrad.custom_gradient
    def foreign_gradient(x):
        def grad(dy):
            return to_tensor(npy(dy) * 2.0)  # a tensor of the other framework

        return x * 2.0, grad

    with pytest.raises(CustomGradientError) as info:
        customgrad.grad(foreign_gradient)(t(1.0))
    _assert_names_framework_backend_and_fix(info.value, "foreign_gradient")


# --- messages ------------------------------------------------------------------------------------
_TENSOR_WORDS = {"jax": r"a jax array", "tensorflow": r"a (tf\.Tensor|tensorflow tensor)",
                 "torch": r"a (torch\.Tensor|torch tensor)", "numpy": r"a numpy array"}


def test_message_about_an_int_says_an_int():
    @customgrad.custom_gradient
    def returns_an_int(x):
        return 3

    with pytest.raises(CustomGradientError) as info:
        returns_an_int(t(1.0))
    message = str(info.value)
    assert "an int" in message and "a int" not in message, message


def test_message_about_a_tensor_names_it_in_the_users_words():
    @customgrad.custom_gradient
    def returns_only_a_tensor(x):
        return x

    with pytest.raises(CustomGradientError) as info:
        returns_only_a_tensor(t([1.0]))
    message = str(info.value)
    assert re.search(_TENSOR_WORDS[BACKEND], message), message
    assert not re.search(r"ArrayImpl|EagerTensor", message), message
    assert not re.search(r"\ba [aeiou]", message, flags=re.IGNORECASE), message


def test_grad_fn_that_cannot_take_the_upstream_is_a_clear_error_naming_its_signature():
    @customgrad.custom_gradient
    def doubled(x):
        def grad_needing_two(dy, extra):
            return dy * 2.0

        return x * 2.0, grad_needing_two

    with pytest.raises(CustomGradientError) as info:
        customgrad.grad(doubled)(t(1.0))
    message = str(info.value)
    assert "grad_needing_two" in message, message
    assert "(dy, extra)" in message, message
    assert re.search(r"called with .*1", message), message


def test_grad_fn_taking_no_argument_is_a_clear_error_through_native_autodiff():
    @customgrad.custom_gradient
    def doubled(x):
        def grad_taking_nothing():
            return 2.0

        return x * 2.0, grad_taking_nothing

    with pytest.raises(CustomGradientError) as info:
        native_grad(doubled, t(1.0))
    message = str(info.value)
    assert "grad_taking_nothing" in message and "()" in message, message
