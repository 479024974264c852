"""Keras's own custom-gradient test, restated for `customgrad.custom_gradient` on every backend.

Keras checks `keras.ops.custom_gradient` with the backend's native autodiff; these tests do the
same with customgrad's decorator swapped in, through the native tool and through `customgrad.grad`.
"""

import keras
import numpy as np
import pytest
from helpers import BACKEND, native_grad, npy, torch_device
from keras import ops

import customgrad

pytestmark = pytest.mark.autodiff


@customgrad.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

    return ops.log(1 + e), grad


def log1pexp_plain(x):
    return ops.log(1 + ops.exp(x))


class AddsLog1pexpOfAFrozenVariable(keras.layers.Layer):
    """Returns `log1pexp(v) + inputs` for a non-trainable variable `v`: the derivative with
    respect to the inputs is 1, and the custom-gradient function receives a variable."""

    def __init__(self):
        super().__init__()
        self.v = keras.Variable(5.0, trainable=False)

    def call(self, inputs):
        return log1pexp(self.v) + inputs


@pytest.mark.parametrize("use_variable", [False, True], ids=["tensor", "frozen_variable"])
def test_log1pexp_gradient_is_exactly_one_at_100_through_native_autodiff(use_variable):
    """Keras: core_test.py CoreOpsCorrectnessTest.test_custom_gradient (use_variable False/True)."""
    to_derive = AddsLog1pexpOfAFrozenVariable() if use_variable else log1pexp
    x = ops.convert_to_tensor(100.0)
    (dy_dx,) = native_grad(to_derive, x)
    assert float(npy(dy_dx)) == 1.0
    if BACKEND == "jax":
        # Keras's test also shows the plain formula's gradient is NaN there
        (dz_dx,) = native_grad(log1pexp_plain, x)
        assert np.isnan(npy(dz_dx))


@pytest.mark.parametrize("use_variable", [False, True], ids=["tensor", "frozen_variable"])
def test_log1pexp_gradient_is_exactly_one_at_100_through_customgrad_grad(use_variable):
    """Keras: core_test.py CoreOpsCorrectnessTest.test_custom_gradient, with customgrad.grad in
    place of the backend's own gradient tool."""
    to_derive = AddsLog1pexpOfAFrozenVariable() if use_variable else log1pexp
    g = customgrad.grad(to_derive)(ops.convert_to_tensor(100.0))
    assert float(npy(g)) == 1.0


@pytest.mark.backends("torch")
def test_torch_style_leaf_tensor_gets_gradient_one_from_backward():
    """Keras: core_test.py CoreOpsCorrectnessTest.test_custom_gradient (its torch branch: a leaf
    tensor that requires grad, `.sum().backward()`, then `.grad`)."""
    import torch

    x = torch.tensor(100.0, requires_grad=True, device=torch_device())
    log1pexp(x).sum().backward()
    assert float(x.grad) == 1.0


def test_forward_value_matches_the_plain_formula_where_it_is_finite():
    """Keras: core_test.py CoreOpsCorrectnessTest.test_custom_gradient (the decorated function
    is still log(1 + exp(x)) in the forward)."""
    x = ops.convert_to_tensor([0.0, 2.0, 10.0])
    np.testing.assert_allclose(npy(log1pexp(x)), npy(log1pexp_plain(x)), rtol=1e-6)
