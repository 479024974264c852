"""Property-based tests: on random nested inputs, an analytic custom gradient equals plain autodiff,
and random wrong gradients are always caught by check_gradients."""

from dataclasses import dataclass

import keras
import numpy as np
import pytest
from helpers import float64_enabled, npy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keras import ops

import customgrad
from customgrad import _tree

pytestmark = pytest.mark.autodiff

@dataclass(frozen=True)
class Shape:  # a leaf for the structure strategies (a plain tuple would be a container)
    dims: tuple


SHAPES = st.sampled_from([Shape(()), Shape((3,)), Shape((2, 3))])
DTYPES = st.sampled_from(["float16", "bfloat16", "float32", "float64"])
TOLERANCE = {"float16": 2e-2, "bfloat16": 6e-2, "float32": 1e-5, "float64": 1e-6}  # compared in float32


def structures(leaf):
    return st.recursive(
        leaf,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3),
            st.lists(children, min_size=1, max_size=2).map(tuple),
            st.dictionaries(st.sampled_from(["a", "b", "c"]), children, min_size=1, max_size=3),
        ),
        max_leaves=4,
    )


def to_tensors(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    return keras.tree.map_structure(
        lambda shape: ops.cast(ops.convert_to_tensor(rng.uniform(-2, 2, size=shape.dims)), dtype),
        shapes,
    )


def forward(tree, scale):
    # sum over leaves of sum(sin(leaf) * leaf * scale), in float32 to compare dtypes evenly
    return sum(ops.sum(ops.cast(ops.sin(x) * x, "float32")) for x in _tree.flatten(tree)) * scale


@customgrad.custom_gradient
def analytic(tree, *, scale):
    def grad(dy):
        return keras.tree.map_structure(
            lambda x: ops.cast(dy * scale, x.dtype) * (ops.cos(x) * x + ops.sin(x)), tree)

    return forward(tree, scale), grad


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=structures(SHAPES), dtype=DTYPES, seed=st.integers(0, 2**16),
       scale=st.floats(0.5, 2.0))
def test_analytic_custom_gradient_equals_plain_autodiff(shapes, dtype, seed, scale):
    with float64_enabled():
        tree = to_tensors(shapes, dtype, seed)
        custom = customgrad.grad(lambda t: analytic(t, scale=scale))(tree)
        plain = customgrad.grad(lambda t: forward(t, scale))(tree)
        for c, p, _ in zip(_tree.flatten(custom), _tree.flatten(plain), _tree.flatten(tree)):
            assert keras.backend.standardize_dtype(c.dtype) == dtype
            np.testing.assert_allclose(npy(ops.cast(c, "float32")), npy(ops.cast(p, "float32")),
                                       rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=structures(SHAPES), seed=st.integers(0, 2**16), data=st.data())
def test_random_wrong_gradients_are_always_caught(shapes, seed, data):
    tree = to_tensors(shapes, "float32", seed)
    n = len(_tree.flatten(tree))
    wrong_leaf = data.draw(st.integers(0, n - 1), label="wrong leaf")
    factor = data.draw(st.sampled_from([-1.0, 0.0, 0.5, 2.0, 3.0]), label="factor")

    @customgrad.custom_gradient
    def wrong(tree):
        def grad(dy):
            leaves = _tree.flatten(tree)
            flat = [dy * (ops.cos(x) * x + ops.sin(x)) for x in leaves]
            # off by (factor - 1) * dy * (1 + x^2), nowhere zero (scaling the right gradient
            # would not be: at x = -2.03 it is about 0, and so is the error)
            x = leaves[wrong_leaf]
            flat[wrong_leaf] = flat[wrong_leaf] + (factor - 1.0) * dy * (1.0 + x * x)
            return _tree.unflatten(tree, flat)

        return forward(tree, 1.0), grad

    report = customgrad.check_gradients(wrong, tree, raise_on_failure=False)
    paths = _tree.leaf_paths(tree, "args[0]")
    assert {c.where for c in report.failures} == {paths[wrong_leaf]}, str(report)
