"""The same value, or the same clear error, on every backend: cases where a differential run of
random custom-gradient programs found jax, tensorflow and torch to differ (a bare framework
error on one, a value on another). Each test states the one expected behaviour and runs on the
backend of its process."""

import re

import keras
import numpy as np
import pytest
from helpers import BACKEND, float64_enabled, native_grad, npy, t
from keras import ops

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.autodiff


def test_a_string_returned_as_a_gradient_is_a_clear_error_naming_it():
    f = customgrad.custom_gradient(lambda x: (x * 2.0, lambda dy: "oops"))
    with pytest.raises(customgrad.GradFnResultError, match=re.escape(
            "returned a str as the gradient for args[0]; a gradient must be a tensor, a number "
            "or a numeric numpy value")):
        customgrad.grad(lambda x: ops.sum(f(x)))(t([1.0, 2.0]))
    with pytest.raises(customgrad.GradFnResultError, match="returned a str as the gradient"):
        native_grad(lambda x: ops.sum(f(x)), t([1.0, 2.0]))


def test_a_numpy_float64_argument_is_float64_where_the_backend_has_float64():
    """np.float64(3.0) reaches f as a float64 tensor, as np.asarray(3.0) does, and its gradient
    is float64 (jax: only in its x64 mode; without it jax has no float64 at all)."""
    @customgrad.custom_gradient
    def double(s):
        return s * 2.0, lambda dy: dy * 2.0

    with float64_enabled():
        y = double(np.float64(3.0))
        g = customgrad.grad(double)(np.float64(3.0))
    assert keras.backend.standardize_dtype(y.dtype) == "float64"
    assert keras.backend.standardize_dtype(g.dtype) == "float64" and float(g) == 2.0


def test_none_among_the_outputs_stays_none_and_gets_no_gradient():
    f = customgrad.custom_gradient(lambda x: ((x * 2.0, None), lambda dys: dys[0] * 3.0))
    x = t([1.0, 2.0])
    out = f(x)
    assert out[1] is None
    np.testing.assert_array_equal(npy(out[0]), [2.0, 4.0])
    np.testing.assert_array_equal(npy(customgrad.grad(lambda x: ops.sum(f(x)[0]))(x)), [3.0, 3.0])
    (g,) = native_grad(lambda x: ops.sum(f(x)[0]), x)
    np.testing.assert_array_equal(npy(g), [3.0, 3.0])


@pytest.mark.parametrize("argument", ["python int", "int32 tensor"])
def test_grad_with_respect_to_an_argument_without_floats_is_refused_naming_it(argument):
    """Also when f reads a variable and returns a float scalar: the message names the argument,
    on every backend (torch's autograd refused it with a bare error, jax and tensorflow gave
    None)."""
    v = keras.Variable(np.array([1.0, 2.0], "float32"))

    @customgrad.custom_gradient
    def reads_a_variable(n):
        return ops.sum(v * 2.0), lambda dy, variables=None: (None, [dy * 2.0])

    n = 3 if argument == "python int" else ops.convert_to_tensor(np.int32(3))
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.grad: argument 0 of `reads_a_variable` must contain a floating-point "
            "value to differentiate with respect to")):
        customgrad.grad(reads_a_variable)(n)


def _compiled(fn):
    """fn under the backend's compiler (jax.jit, tf.function, torch.compile)."""
    if BACKEND == "jax":
        import jax

        return jax.jit(fn)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    import torch

    return torch.compile(fn)


def test_a_custom_gradient_error_raised_while_compiling_keeps_its_type():
    """`except CustomGradientError` catches it under jax.jit, tf.function (whose autograph once
    re-raised it as its own StagingError) and torch.compile alike, with f's name in it."""
    @customgrad.custom_gradient
    def no_grad_fn(x):
        return x * 2.0, 3

    with pytest.raises(CustomGradientError, match="no_grad_fn"):
        _compiled(lambda x: customgrad.grad(lambda v: ops.sum(no_grad_fn(v)))(x))(t([1.0]))


# What the project's own differential test (tests/differential) found first, one test each.

def test_vjp_of_a_function_with_none_among_its_outputs():
    """customgrad.vjp's vjp_fn takes None for a None output (jax raised a bare AttributeError),
    with and without a custom gradient."""
    x = t([1.0, 2.0])
    custom = customgrad.custom_gradient(lambda x: ((x * 2.0, None), lambda dys: dys[0] * 3.0))
    for fn, expected in ((custom, [3.0, 3.0]), (lambda x: (x * 2.0, None), [2.0, 2.0])):
        out, vjp_fn = customgrad.vjp(fn, x)
        assert out[1] is None
        (g,) = vjp_fn((ops.ones((2,)), None))
        np.testing.assert_array_equal(npy(g), expected)


def test_a_python_float_is_floatx_also_where_float64_is_on():
    """A Python float argument, and one f returns, are floatx (float32) on every backend, also
    in jax's x64 mode (where jax made them float64); numpy float64 stays float64."""
    @customgrad.custom_gradient
    def double(s):
        return (s * 2.0, 1.5), lambda dys: dys[0] * 2.0

    with float64_enabled():
        y, constant = double(1.5)
        g = customgrad.grad(lambda s: double(s)[0])(1.5)
        g64 = customgrad.grad(lambda s: double(s)[0])(np.float64(1.5))
    for value in (y, constant, g):
        assert keras.backend.standardize_dtype(value.dtype) == "float32", value
    assert float(g) == 2.0
    assert keras.backend.standardize_dtype(g64.dtype) == "float64"


@pytest.mark.slow
@pytest.mark.parametrize("signature", ["two positional", "a required keyword"])
def test_a_grad_fn_signature_refused_under_the_compiler_is_the_arity_error(signature):
    """Under jax.jit, tf.function and torch.compile (around customgrad.grad), a grad_fn whose
    parameters do not fit the upstream gradients is GradFnArityError, as eager (torch.compile
    raised Python's bare TypeError); a TypeError inside grad_fn stays what it is."""
    def make(grad):
        return customgrad.custom_gradient(lambda x: (x * 2.0, grad))

    if signature == "two positional":
        f = make(lambda a, b: a)
    else:
        def needs_factor(a, *, factor):
            return a * factor

        f = make(needs_factor)
    with pytest.raises(customgrad.GradFnArityError, match="cannot be called with the upstream"):
        _compiled(lambda x: customgrad.grad(lambda v: ops.sum(f(v)))(x))(t([1.0, 2.0]))

    def raises_inside(a):
        raise TypeError("inside grad_fn")

    f = make(raises_inside)
    with pytest.raises(TypeError, match="inside grad_fn"):
        _compiled(lambda x: customgrad.grad(lambda v: ops.sum(f(v)))(x))(t([1.0, 2.0]))
