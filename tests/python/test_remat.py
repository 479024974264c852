"""customgrad.remat: f's forward runs again in the backward, and the gradients are f's own, on
every backend, eager and compiled, with keyword arguments and the keras.Variables f reads."""

import gc
import re
import weakref

import keras
import numpy as np
import pytest
from helpers import BACKEND, npy, t, torch_device
from keras import ops

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.autodiff


def block(x, w, *, scale=1.0, activation="tanh"):
    """Three layers of a small network: enough intermediates to be worth recomputing."""
    act = getattr(ops, activation)
    h = x
    for _ in range(3):
        h = act(ops.matmul(h, w)) * scale
    return ops.sum(h * h)


def inputs():
    rng = np.random.RandomState(0)
    return t(rng.randn(4, 5)), t(rng.randn(5, 5) * 0.5)


def gradients(fn, args, kwargs, mode):
    """The gradient of scalar fn(*args, **kwargs) with respect to every positional argument, by
    the backend's own autodiff, eager or compiled (jax.jit, tf.function(jit_compile=True),
    torch.compile)."""
    compiled = mode == "compiled"
    if BACKEND == "jax":
        import jax

        g = jax.grad(lambda *a: fn(*a, **kwargs), argnums=tuple(range(len(args))))
        return (jax.jit(g) if compiled else g)(*args)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def step(*a):
            with tf.GradientTape() as tape:
                tape.watch(a)
                y = fn(*a, **kwargs)
            return tape.gradient(y, list(a))

        return (tf.function(step, jit_compile=True) if compiled else step)(*args)
    import torch

    forward = lambda *a: fn(*a, **kwargs)  # noqa: E731
    if compiled:
        torch._dynamo.reset()
        forward = torch.compile(forward)
    leaves = [a.detach().requires_grad_(True) for a in args]
    return torch.autograd.grad(forward(*leaves), leaves)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_gradients_are_those_of_f_itself(mode):
    x, w = inputs()
    expected = gradients(block, (x, w), {"scale": 2.0}, mode)
    got = gradients(customgrad.remat(block), (x, w), {"scale": 2.0}, mode)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(npy(g), npy(e), rtol=1e-5, atol=1e-6)
    assert float(np.abs(npy(got[1])).sum()) > 0  # a real gradient was compared


def test_keyword_arguments_reach_the_forward_and_the_recomputation():
    seen = []

    def f(x, *, scale, activation):
        seen.append((scale, activation))
        return block(x, x, scale=scale, activation=activation)

    x = t(np.eye(4) * 0.3 + 0.1)
    (g,) = gradients(customgrad.remat(f), (x,), {"scale": 0.5, "activation": "sin"}, "eager")
    (expected,) = gradients(f, (x,), {"scale": 0.5, "activation": "sin"}, "eager")
    np.testing.assert_allclose(npy(g), npy(expected), rtol=1e-5, atol=1e-6)
    assert seen[-2:] == [(0.5, "sin")] * 2  # the recomputation ran with the same keywords


def test_the_forward_runs_once_and_again_in_the_backward():
    calls = []

    def f(x):
        calls.append("run")
        return ops.sum(ops.tanh(x) ** 2)

    r = customgrad.remat(f)
    x = t([0.5, -1.0])
    if BACKEND == "jax":
        import jax

        y, back = jax.vjp(r, x)
        assert len(calls) == 1
        (g,) = back(ops.ones_like(y))
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(x)
            y = r(x)
        assert len(calls) == 1
        g = tape.gradient(y, x)
    else:
        x = x.detach().requires_grad_(True)
        y = r(x)
        assert len(calls) == 1
        y.backward()
        g = x.grad
    assert len(calls) == 2  # the backward ran f again
    (expected,) = gradients(f, (t([0.5, -1.0]),), {}, "eager")
    np.testing.assert_allclose(npy(g), npy(expected), rtol=1e-6)


def test_without_a_gradient_f_runs_once():
    calls = []

    def f(x):
        calls.append("run")
        return ops.tanh(x)

    np.testing.assert_allclose(npy(customgrad.remat(f)(t([0.5]))), np.tanh([0.5]), rtol=1e-6)
    assert len(calls) == 1


def _layer_weight_gradients(fn, layer, x):
    """Gradients of scalar fn(x) with respect to layer's trainable weights (jax: their values
    bound in a StatelessScope, as model.fit does)."""
    weights = layer.trainable_weights
    if BACKEND == "jax":
        import jax

        def loss(values):
            with keras.StatelessScope(state_mapping=list(zip(weights, values))):
                return fn(x)

        return jax.grad(loss)([w.value for w in weights])
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            y = fn(x)
        return tape.gradient(y, [w.value for w in weights])
    for w in weights:
        w.value.grad = None
    fn(x).backward()
    return [w.value.grad for w in weights]


def test_the_keras_variables_f_reads_get_their_gradients():
    layer = keras.layers.Dense(3, activation="tanh")
    layer.build((2, 4))
    x = t(np.linspace(-1.0, 1.0, 8).reshape(2, 4))

    def f(x):
        return ops.sum(layer(x) ** 2)

    got = _layer_weight_gradients(customgrad.remat(f), layer, x)
    expected = _layer_weight_gradients(f, layer, x)
    assert len(got) == 2
    for g, e in zip(got, expected):
        assert g is not None
        np.testing.assert_allclose(npy(g), npy(e), rtol=1e-5, atol=1e-7)
        assert np.abs(npy(g)).sum() > 0


class RematBlock(keras.layers.Layer):
    """Two dense layers whose forward is recomputed in the backward (or not, for comparison)."""

    def __init__(self, remat, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.Dense(16, activation="tanh")
        self.outer = keras.layers.Dense(16, activation="relu")
        self.body = customgrad.remat(self._body) if remat else self._body

    def _body(self, x, training=None):
        return self.outer(self.inner(x), training=training)

    def call(self, x, training=None):
        return self.body(x, training=training)


def _fit_losses(remat):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((8,)), RematBlock(remat), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    rng = np.random.RandomState(0)
    x, y = rng.randn(64, 8).astype("float32"), rng.randn(64, 1).astype("float32")
    history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    return history.history["loss"]


def test_a_layer_built_on_remat_trains_as_without_it():
    with_remat, without = _fit_losses(remat=True), _fit_losses(remat=False)
    np.testing.assert_allclose(with_remat, without, rtol=1e-5)
    assert without[-1] < without[0]  # it did train


def test_a_remat_function_inside_another_gives_f_own_gradient():
    inner = customgrad.remat(lambda x, w: ops.tanh(ops.matmul(x, w)))

    def f(x, w, scale=1.0):
        return ops.sum(inner(inner(x, w), w) * scale)

    x, w = inputs()
    got = gradients(customgrad.remat(f), (x, w), {"scale": 3.0}, "eager")
    expected = gradients(f, (x, w), {"scale": 3.0}, "eager")
    for g, e in zip(got, expected):
        np.testing.assert_allclose(npy(g), npy(e), rtol=1e-5, atol=1e-6)


# -- what is kept between the forward and the backward -------------------------------------------

def _chain(record):
    """A function whose intermediates go to `record` (a callable), to see which stay alive."""

    def f(x):
        h = x
        for _ in range(3):
            h = ops.tanh(h * 1.5)
            record(h)
        return ops.sum(h)

    return f


@pytest.mark.backends("tensorflow")
def test_tensorflow_keeps_none_of_f_intermediates_for_the_backward():
    import tensorflow as tf

    def alive_after_forward(fn_of):
        refs = []
        fn = fn_of(_chain(lambda h: refs.append(weakref.ref(h))))
        x = t(np.ones((64,)))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        gc.collect()
        alive = sum(r() is not None for r in refs)
        tape.gradient(y, x)
        return alive

    assert alive_after_forward(lambda f: f) == 3  # the tape holds them without remat
    assert alive_after_forward(customgrad.remat) == 0


@pytest.mark.backends("torch")
def test_torch_keeps_none_of_f_intermediates_for_the_backward():
    import torch

    def alive_after_forward(fn_of):
        saved = []

        def pack(tensor):
            # a detached alias: the tensor itself would hold its own autograd node, a cycle
            alias = tensor.detach()
            saved.append(weakref.ref(alias))
            return alias

        x = torch.ones(64, requires_grad=True, device=torch_device())
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            y = fn_of(_chain(lambda h: None))(x)
        gc.collect()
        alive = sum(r() is not None for r in saved)
        y.backward()
        return alive

    assert alive_after_forward(lambda f: f) >= 3  # tanh saves its output without remat
    assert alive_after_forward(customgrad.remat) == 0


@pytest.mark.backends("jax")
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_jax_keeps_only_the_input_for_the_backward(mode):
    import jax

    x = t(np.ones((64,)))

    def residual_bytes(fn):
        fn = jax.jit(fn) if mode == "jit" else fn
        _, back = jax.vjp(fn, x)
        return sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(back)
                   if isinstance(leaf, jax.Array))

    plain = residual_bytes(_chain(lambda h: None))
    recomputed = residual_bytes(customgrad.remat(_chain(lambda h: None)))
    assert recomputed <= x.nbytes < plain


# -- errors --------------------------------------------------------------------------------------

def test_remat_of_something_not_callable_names_what_it_received():
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.remat: expected a callable f(*args, **kwargs) whose forward is recomputed "
            "in the backward; received an int.")):
        customgrad.remat(3)


@pytest.mark.backends("tensorflow", "torch")
def test_a_framework_variable_read_by_f_is_refused_not_left_without_gradient():
    if BACKEND == "tensorflow":
        import tensorflow as tf

        w = tf.Variable([2.0, 3.0], name="raw_w")
    else:
        import torch

        w = torch.nn.Parameter(torch.tensor([2.0, 3.0], device=torch_device()))
    f = customgrad.remat(lambda x: ops.sum(x * w))
    x = t([1.0, 1.0])
    with pytest.raises(CustomGradientError, match=r"which are not keras.Variables"):
        gradients(f, (x,), {}, "eager")


def test_structured_outputs_get_their_upstream_gradients():
    def f(x, w):
        h = ops.tanh(ops.matmul(x, w))
        return h, {"squares": h * h, "count": ops.shape(h)[0]}

    def loss(fn):
        def scalar(x, w):
            h, extra = fn(x, w)
            return ops.sum(h) + 2.0 * ops.sum(extra["squares"])

        return scalar

    x, w = inputs()
    got = gradients(loss(customgrad.remat(f)), (x, w), {}, "eager")
    expected = gradients(loss(f), (x, w), {}, "eager")
    for g, e in zip(got, expected):
        np.testing.assert_allclose(npy(g), npy(e), rtol=1e-5, atol=1e-6)
