"""The bad-input table: each row gives a clear error or a correct result, never a silent wrong
gradient, on every backend."""

import re

import keras
import numpy as np
import pytest
from helpers import log1pexp, native_grad, npy, t
from keras import ops

import customgrad
from customgrad import CustomGradientError, GradFnResultError

pytestmark = pytest.mark.autodiff


def cg(fn):
    return customgrad.custom_gradient(fn)


def grad_of(fn, *args):
    """Gradient of sum(fn(*args)) with respect to every positional argument."""
    return customgrad.grad(lambda *a: ops.sum(fn(*a)), argnums=tuple(range(len(args))))(*args)


class Raised(Exception):
    pass


def raising_grad(x):
    def grad(dy):
        raise Raised("inside grad_fn")

    return x * 2.0, grad


# name, function (already decorated), args, expected: (exception type, message) or gradients
ERROR_ROWS = [
    ("f returns a value", cg(lambda x: x * 2.0), (t([1.0]),),
     (CustomGradientError, "must return a pair (output, grad_fn); received a ")),
    ("f returns a 3-tuple", cg(lambda x: (x, lambda dy: dy, None)), (t([1.0]),),
     (CustomGradientError, "received a tuple of length 3")),
    ("grad_fn not callable", cg(lambda x: (x, 1.0)), (t([1.0]),),
     (CustomGradientError, "must be a callable grad_fn; received a float")),
    ("grad_fn raises", cg(raising_grad), (t([1.0]),), (Raised, "inside grad_fn")),
    ("too many gradients", cg(lambda x: (x * 2.0, lambda dy: (dy, dy))), (t([1.0, 2.0]),),
     (GradFnResultError, "received a tuple of length 2")),
    ("too few gradients", cg(lambda x, y: (x * y, lambda dy: (dy * y,))), (t([1.0]), t([2.0])),
     (GradFnResultError, "one gradient per positional argument (2: ")),
    ("wrong structure", cg(lambda d: (d["a"] * 2.0, lambda dy: {"b": dy})), ({"a": t([1.0])},),
     (GradFnResultError, "expected a dict with keys ['a'], received a dict with keys ['b']")),
    ("wrong shape", cg(lambda x: (x * 2.0, lambda dy: ops.ones((2, 2)))), (t([1.0, 2.0]),),
     (GradFnResultError, "returned a gradient of shape (2, 2) for args[0], which has shape "
                         "(2,)")),
    ("scalar gradient for a vector", cg(lambda x: (x * 2.0, lambda dy: 2.0)), (t([1.0, 2.0]),),
     (GradFnResultError, "returned a gradient of shape () for args[0], which has shape (2,)")),
    ("wrong dtype: strings", cg(lambda x: (x * 2.0, lambda dy: np.array(["a", "b"]))),
     (t([1.0, 2.0]),),
     (GradFnResultError, "returned a numpy array of shape (2,) and dtype str32 as the gradient for "
                         "args[0]; a gradient must be a tensor, a number or a numeric numpy value")),
]


@pytest.mark.parametrize("name,fn,args,expected", ERROR_ROWS, ids=[r[0] for r in ERROR_ROWS])
def test_bad_input_gives_a_clear_error(name, fn, args, expected):
    exc_type, message = expected
    with pytest.raises(exc_type, match=re.escape(message)):
        grad_of(fn, *args)


@pytest.mark.parametrize("returned, message", [
    (lambda dy: dy * 2.0, "was given variables= and must return a pair (grad_xs, grad_vars); "
                          "received a "),
    (lambda dy: (dy * 2.0, [dy, dy]), "must return one gradient per variable (1) in grad_vars; "
                                      "received a list of length 2"),
], ids=["not a pair", "one too many"])
def test_gradients_that_do_not_fit_the_variables_are_a_result_error(returned, message):
    v = keras.Variable(np.array([1.0, 2.0], "float32"), name="v")

    def reads_v(x):
        return x * v, lambda dy, variables=None: returned(dy)

    with pytest.raises(GradFnResultError, match=re.escape(message)) as info:
        grad_of(cg(reads_v), t([1.0, 2.0]))
    assert info.value.function_name.endswith("<locals>.reads_v")


def test_f_not_callable():
    with pytest.raises(TypeError, match=re.escape("expected a callable f(*args)")):
        customgrad.custom_gradient("log1pexp")


def test_gradient_of_another_dtype_is_cast_to_the_input_dtype():
    fn = cg(lambda x: (x * 2.0, lambda dy: ops.cast(dy * 2.0, "float16")))
    (g,) = grad_of(fn, t([1.0, 2.0]))
    assert keras.backend.standardize_dtype(g.dtype) == "float32"
    np.testing.assert_array_equal(npy(g), [2.0, 2.0])


def test_nan_from_grad_fn_is_the_defined_gradient_and_check_gradients_flags_it():
    fn = cg(lambda x: (x * 2.0, lambda dy: dy * np.nan))
    (g,) = grad_of(fn, t([1.0]))
    assert np.isnan(npy(g)).all()  # passed through, not hidden or replaced
    with pytest.raises(customgrad.GradientCheckError, match="error inf"):
        customgrad.check_gradients(fn, t([1.0]))


def test_nan_and_inf_inputs():
    (g,) = grad_of(log1pexp, t([np.inf, -np.inf, np.nan, 100.0]))
    g = npy(g)
    assert g[0] == 1.0 and g[1] == 0.0 and np.isnan(g[2]) and g[3] == 1.0


def test_zero_size_tensors():
    (g,) = grad_of(log1pexp, t(np.zeros((0, 3))))
    assert tuple(g.shape) == (0, 3)


def test_zero_dimensional_scalars():
    g = customgrad.grad(log1pexp)(t(0.0))
    assert tuple(g.shape) == () and float(npy(g)) == 0.5


def test_large_float16_tensor():
    x = ops.cast(t(np.linspace(-60000, 60000, 2**20)), "float16")
    (g,) = grad_of(log1pexp, x)
    g = npy(ops.cast(g, "float32"))
    assert keras.backend.standardize_dtype(x.dtype) == "float16" and g.shape == (2**20,)
    assert np.isfinite(g).all()
    assert g[0] == 0.0 and g[-1] == 1.0


@pytest.mark.slow
@pytest.mark.backends("tensorflow")
def test_the_name_of_f_survives_autograph():
    """Inside a tf.function, autograph re-raises the error as a new one of its class, made
    from the message alone: the name is still the one the original error carried."""
    import tensorflow as tf

    @customgrad.custom_gradient
    def misfit(x):
        return x * 2.0, lambda dy: (dy, dy)  # two gradients for one input

    step = tf.function(lambda x: native_grad(lambda v: ops.sum(misfit(v)), x))
    with pytest.raises(GradFnResultError) as caught:
        step(tf.constant([1.0, 2.0]))
    assert caught.value._function_name is None  # autograph's copy, not the original
    assert caught.value.function_name.endswith("misfit"), caught.value.function_name
    # an unrelated error raised while handling a named one is not given its name
    try:
        try:
            named = GradFnResultError("named")
            named.function_name = "misfit"
            raise named
        except GradFnResultError:
            raise GradFnResultError("another") from None
    except GradFnResultError as other:
        assert other.function_name is None
