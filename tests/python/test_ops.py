"""customgrad.ops: values and gradients at the numerical extremes, checked against analytic
values and with check_gradients, on every backend (forward also on numpy)."""

import re

import keras
import numpy as np
import pytest
from helpers import float64_enabled, npy, t
from keras import ops as kops

import customgrad
from customgrad import ops

autodiff = pytest.mark.autodiff


def grad_sum(fn, x, weights=None):
    """Gradient of sum(fn(x) * weights)."""
    w = 1.0 if weights is None else weights
    return npy(customgrad.grad(lambda x: kops.sum(fn(x) * w))(x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


# --- log1pexp ---------------------------------------------------------------------------------
def test_log1pexp_value_is_finite_at_the_extremes():
    np.testing.assert_allclose(npy(ops.log1pexp(t([1e4, 100.0, 0.0, -100.0]))),
                               [1e4, 100.0, np.log(2.0), np.exp(-100.0)], rtol=1e-6,
                               atol=1e-37)  # e^-100 is a float32 denormal (or flushed to 0)


@autodiff
def test_log1pexp_gradient_is_exactly_one_at_100_and_correct_at_minus_100():
    g = grad_sum(ops.log1pexp, t([100.0, 1e4, -100.0, 0.0, 3.0]))
    assert g[0] == 1.0 and g[1] == 1.0
    np.testing.assert_allclose(g[2:], sigmoid([-100.0, 0.0, 3.0]), rtol=1e-6, atol=1e-37)
    customgrad.check_gradients(ops.log1pexp, t([-100.0, -3.0, 0.0, 3.0, 100.0]), jacobian=True)


@autodiff
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_log1pexp_is_safe_in_half_precision(dtype):
    x = kops.cast(t([-20.0, 0.0, 20.0, 60000.0 if dtype == "float16" else 1e30]), dtype)
    y = npy(kops.cast(ops.log1pexp(x), "float32"))
    g = grad_sum(ops.log1pexp, x)
    assert np.isfinite(y).all() and np.isfinite(g.astype("float32")).all()
    assert keras.backend.standardize_dtype(ops.log1pexp(x).dtype) == dtype
    np.testing.assert_allclose(g.astype("float32"), sigmoid([-20.0, 0.0, 20.0, 60000.0]),
                               rtol=1e-2, atol=1e-6)
    customgrad.check_gradients(ops.log1pexp, kops.cast(t([-3.0, 0.5, 4.0]), dtype))


# --- clipping, scaling, reversal ----------------------------------------------------------------
@autodiff
def test_clip_gradient_is_identity_forward_and_clips_backward():
    x = t([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(npy(ops.clip_gradient(x, -0.5, 0.5)), [1.0, 2.0, 3.0])
    g = grad_sum(lambda x: ops.clip_gradient(x, -0.5, 0.5), x, t([-2.0, 0.1, 9.0]))
    np.testing.assert_allclose(g, [-0.5, 0.1, 0.5])


def test_clip_gradient_rejects_min_above_max():
    with pytest.raises(ValueError, match="min_value must be <= max_value; received min_value=2"):
        ops.clip_gradient(t([1.0]), 2, 1)


@autodiff
def test_clip_gradient_norm_rescales_only_large_gradients():
    x = t([0.0, 0.0])
    np.testing.assert_allclose(grad_sum(lambda x: ops.clip_gradient_norm(x, 1.0), x,
                                        t([3.0, 4.0])), [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(grad_sum(lambda x: ops.clip_gradient_norm(x, 10.0), x,
                                        t([3.0, 4.0])), [3.0, 4.0], rtol=1e-6)
    with pytest.raises(ValueError, match="max_norm must be > 0; received 0"):
        ops.clip_gradient_norm(x, 0)


@autodiff
def test_clip_gradient_norm_across_replicas_is_the_local_norm_where_no_engine_runs():
    """The all-reduce across replicas (tests/integration: DDP, FSDP, tf.distribute, jax
    processes, each equal to one device) adds nothing on one device."""
    x = t([0.0, 0.0])
    np.testing.assert_allclose(
        grad_sum(lambda x: ops.clip_gradient_norm(x, 1.0, across_replicas=True), x,
                 t([3.0, 4.0])), [0.6, 0.8], rtol=1e-6)
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.ops.clip_gradient_norm: across_replicas must be True or False; "
            "received 'yes' (str).")):
        ops.clip_gradient_norm(x, 1.0, across_replicas="yes")


@autodiff
def test_scale_and_reverse_gradient():
    x = t([1.0, -2.0])
    np.testing.assert_array_equal(npy(ops.reverse_gradient(x)), [1.0, -2.0])
    np.testing.assert_allclose(grad_sum(lambda x: ops.scale_gradient(x, 0.25), x), [0.25, 0.25])
    np.testing.assert_allclose(grad_sum(lambda x: ops.reverse_gradient(x, 3.0), x), [-3.0, -3.0])
    np.testing.assert_allclose(grad_sum(ops.reverse_gradient, x), [-1.0, -1.0])


# --- straight-through -------------------------------------------------------------------------
@autodiff
def test_straight_through_estimators():
    x = t([0.4, 1.6, -2.5])
    np.testing.assert_array_equal(npy(ops.round_ste(x)), np.round([0.4, 1.6, -2.5]))
    np.testing.assert_array_equal(npy(ops.sign_ste(x)), [1.0, 1.0, -1.0])
    np.testing.assert_array_equal(grad_sum(ops.round_ste, x, t([1.0, 2.0, 3.0])), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(grad_sum(ops.sign_ste, x), [1.0, 1.0, 1.0])
    floor_ste = ops.straight_through(kops.floor)
    np.testing.assert_array_equal(npy(floor_ste(x)), [0.0, 1.0, -3.0])
    np.testing.assert_array_equal(grad_sum(floor_ste, x), [1.0, 1.0, 1.0])


# --- safe sqrt and norm -------------------------------------------------------------------------
@autodiff
def test_safe_sqrt_has_a_finite_gradient_at_zero():
    x = t([0.0, 4.0])
    np.testing.assert_array_equal(npy(ops.safe_sqrt(x)), [0.0, 2.0])
    np.testing.assert_array_equal(grad_sum(ops.safe_sqrt, x), [0.0, 0.25])
    customgrad.check_gradients(ops.safe_sqrt, t([0.5, 2.0, 9.0]), order=2)


@autodiff
def test_safe_norm_is_finite_at_zero_and_right_elsewhere():
    zeros = kops.zeros((2, 3))
    np.testing.assert_array_equal(grad_sum(ops.safe_norm, zeros), np.zeros((2, 3)))
    x = t([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(npy(ops.safe_norm(x, axis=1)), [5.0, 0.0])
    np.testing.assert_allclose(npy(ops.safe_norm(x, axis=-1, keepdims=True)), [[5.0], [0.0]])
    g = grad_sum(lambda x: ops.safe_norm(x, axis=1), x)
    np.testing.assert_allclose(g, [[0.6, 0.8, 0.0], [0.0, 0.0, 0.0]], rtol=1e-6)
    customgrad.check_gradients(lambda x: ops.safe_norm(x, axis=0), t([[1.0, -2.0], [0.5, 3.0]]))


# --- logsumexp ----------------------------------------------------------------------------------
@autodiff
def test_logsumexp_has_no_nan_gradient_for_minus_infinity():
    inf = np.inf
    x = t([[-inf, -inf, -inf], [0.0, -inf, 0.0], [1000.0, 1000.0, -inf]])
    value = npy(ops.logsumexp(x, axis=1))
    np.testing.assert_allclose(value, [-inf, np.log(2.0), 1000.0 + np.log(2.0)])
    g = grad_sum(lambda x: ops.logsumexp(x, axis=1), x)
    np.testing.assert_allclose(g, [[0, 0, 0], [0.5, 0, 0.5], [0.5, 0.5, 0]], atol=1e-7)
    assert float(npy(ops.logsumexp(t([1.0, 2.0])))) == pytest.approx(np.log(np.e + np.e**2))
    customgrad.check_gradients(lambda x: ops.logsumexp(x, axis=0, keepdims=True),
                               t([[0.3, -1.0], [2.0, 0.1]]), against="finite_differences")


# --- swish ----------------------------------------------------------------------------------------
@autodiff
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_swish_matches_plain_autodiff(dtype):
    with float64_enabled():
        x = kops.cast(t([-6.0, -1.0, 0.0, 0.7, 5.0]), dtype)
        custom = grad_sum(ops.swish, x).astype("float64")
        plain = grad_sum(lambda x: x * kops.sigmoid(x), x).astype("float64")
        np.testing.assert_allclose(custom, plain, rtol={"float16": 1e-2, "bfloat16": 4e-2}.get(
            dtype, 1e-6), atol=1e-3 if dtype in ("float16", "bfloat16") else 1e-7)
        customgrad.check_gradients(ops.swish, x, order=2 if dtype == "float64" else 1)


def test_every_op_computes_its_forward():
    x = t([0.25, -1.5])
    for fn in (ops.log1pexp, ops.swish, ops.round_ste, ops.sign_ste, ops.safe_sqrt,
               lambda x: ops.clip_gradient(x, -1, 1), lambda x: ops.clip_gradient_norm(x, 1.0),
               ops.reverse_gradient, lambda x: ops.scale_gradient(x, 2.0)):
        assert npy(fn(kops.abs(x))).shape == (2,)
    assert npy(ops.safe_norm(x)).shape == () and npy(ops.logsumexp(x)).shape == ()
