"""Keras integration: variables as inputs, variables read inside f, layers trained with fit."""

import re

import keras
import numpy as np
import pytest
from helpers import BACKEND, npy, t
from keras import ops

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.autodiff


@customgrad.custom_gradient
def matmul_with_custom_grad(x, w):
    def grad(dy):
        return ops.matmul(dy, ops.transpose(w)), ops.matmul(ops.transpose(x), dy)

    return ops.matmul(x, w), grad


class ExplicitDense(keras.layers.Layer):
    """Passes its kernel to the custom-gradient function as an input."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="zeros",
                                      name="kernel")

    def call(self, x):
        return matmul_with_custom_grad(x, self.kernel)


class ClosureDense(keras.layers.Layer):
    """Reads self.kernel inside f: its gradient comes through grad_fn's `variables=`."""

    def __init__(self, units, accept_variables=True, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.accept_variables = accept_variables

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="zeros",
                                      name="kernel")

    def call(self, x):
        kernel = self.kernel

        def f(x):
            y = ops.matmul(x, kernel)
            if self.accept_variables:
                def grad(dy, variables=None):
                    assert variables == [kernel]
                    return ops.matmul(dy, ops.transpose(kernel)), [ops.matmul(ops.transpose(x), dy)]
            else:
                def grad(dy):
                    return ops.matmul(dy, ops.transpose(kernel))
            return y, grad

        return customgrad.custom_gradient(f)(x)


def regression_data(n=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 3)).astype("float32")
    w = np.array([[1.0], [-2.0], [0.5]], dtype="float32")
    return x, x @ w, w


@pytest.mark.parametrize("layer_cls", [ExplicitDense, ClosureDense])
@pytest.mark.parametrize("run_eagerly", [False, True], ids=["compiled", "eager"])
def test_layer_trains_with_fit_and_matches_plain_dense(layer_cls, run_eagerly):
    x, y, w_true = regression_data()

    def train(layer):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((3,))
        model = keras.Model(inputs, layer(inputs))  # a functional model on KerasTensors
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", run_eagerly=run_eagerly)
        history = model.fit(x, y, epochs=15, batch_size=16, verbose=0, shuffle=False)
        return npy(model.layers[-1].kernel.value), history.history["loss"]

    kernel, losses = train(layer_cls(1))
    reference, _ = train(keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros"))
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(kernel, reference, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(kernel, w_true, atol=1e-2)


def test_variable_read_inside_f_without_variables_keyword_is_a_clear_error():
    x, y, _ = regression_data(16)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, ClosureDense(1, accept_variables=False, name="cd")(inputs))
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(CustomGradientError, match=re.escape(
            "read the trainable variables ['cd/kernel'], so its grad_fn "
            "`ClosureDense.call.<locals>.f.<locals>.grad` must accept a `variables` keyword "
            "argument and return (grad_xs, grad_vars)")):
        model.fit(x, y, epochs=1, verbose=0)


def test_keras_variable_passed_as_input_receives_its_gradient():
    v = keras.Variable(np.array([1.0, 2.0], dtype="float32"), name="v")

    @customgrad.custom_gradient
    def f(a):
        return a * a, lambda dy: dy * 10.0  # deliberately not 2a: proves grad_fn is used

    if BACKEND == "jax":
        import jax
        from keras import StatelessScope

        def loss(value):
            with StatelessScope(state_mapping=[(v, value)]):
                return ops.sum(f(v))

        g = jax.grad(loss)(v.value)
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = ops.sum(f(v))
        (g,) = tape.gradient(loss, [v.value])
    else:
        loss = ops.sum(f(v))
        loss.backward()
        g = v.value.grad
    np.testing.assert_array_equal(npy(g), [10.0, 10.0])


def test_variable_read_in_f_gets_gradient_through_variables_keyword_outside_fit():
    v = keras.Variable(np.array(3.0, dtype="float32"))

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables):
            return dy * v, [dy * x * 100.0]  # 100x marks the custom variable gradient

        return x * v, grad

    x = t(2.0)
    if BACKEND == "jax":
        import jax
        from keras import StatelessScope

        def loss(value, x):
            with StatelessScope(state_mapping=[(v, value)]):
                return f(x)

        gv, gx = jax.grad(loss, argnums=(0, 1))(v.value, x)
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        gv, gx = tape.gradient(y, [v.value, x])
    else:
        x = x.requires_grad_(True)
        y = f(x)
        y.backward()
        gv, gx = v.value.grad, x.grad
    assert float(npy(gv)) == 200.0 and float(npy(gx)) == 3.0


def test_custom_gradient_function_applied_to_keras_tensors_in_a_layer_builds_a_model():
    log1pexp = customgrad.custom_gradient(
        lambda x: (ops.log1p(ops.exp(x)), lambda dy: dy * ops.sigmoid(x)))

    class Softplus(keras.layers.Layer):
        def call(self, x):
            return log1pexp(x)

    inputs = keras.Input((2,))
    model = keras.Model(inputs, Softplus()(inputs))
    assert tuple(model.output.shape) == (None, 2)
    np.testing.assert_allclose(npy(model(np.array([[0.0, 1.0]], "float32"))),
                               [[np.log(2.0), np.log1p(np.e)]], rtol=1e-6)


def test_called_directly_on_keras_input_the_model_keeps_the_custom_gradient():
    @customgrad.custom_gradient
    def log1pexp(x):
        e = ops.exp(x)
        return ops.log(1.0 + e), lambda dy: dy * (1.0 - 1.0 / (1.0 + e))

    inputs = keras.Input((2,))
    model = keras.Model(inputs, log1pexp(inputs))
    np.testing.assert_allclose(npy(model(t([[10.0, 0.0]]))), [[np.log1p(np.exp(10.0)), np.log(2.0)]],
                               rtol=1e-6)
    x = t([[100.0, 0.0]])
    # plain autodiff of the ops inside would give NaN at 100: the model must call log1pexp
    np.testing.assert_array_equal(npy(customgrad.grad(lambda x: ops.sum(model(x)))(x)),
                                  [[1.0, 0.5]])


class NoisyScale(keras.layers.Layer):
    """A custom-gradient layer with state: f draws a random mask (advancing a SeedGenerator)
    and counts its calls in a non-trainable weight; the mask and the count must advance once
    per training step, as they do without a custom gradient."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale")
        self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                     name="calls")
        self.seed = keras.random.SeedGenerator(7)

    def call(self, x):
        scale, calls = self.scale, self.calls

        @customgrad.custom_gradient
        def f(x):
            mask = keras.random.uniform(ops.shape(x), seed=self.seed)
            calls.assign(calls + 1.0)
            y = x * scale * mask

            def grad(dy, variables=None):
                return dy * scale * mask, [ops.sum(dy * x * mask)]

            return y, grad

        return f(x)


@pytest.mark.parametrize("run_eagerly", [False, True], ids=["compiled", "eager"])
def test_variables_assigned_inside_f_are_updated_by_fit(run_eagerly):
    layer = NoisyScale()
    inputs = keras.Input((3,))
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer="sgd", loss="mse", run_eagerly=run_eagerly)
    seed_before = npy(layer.seed.state.value)
    x = np.ones((12, 3), "float32")
    model.fit(x, np.zeros((12, 3), "float32"), batch_size=4, epochs=1, verbose=0)
    assert float(npy(layer.calls.value)) == 3.0  # one forward per step of 3
    assert not np.array_equal(npy(layer.seed.state.value), seed_before)
    # every step drew a new mask: predictions after fit use yet another one
    first, second = npy(model.predict(x[:1], verbose=0)), npy(model.predict(x[:1], verbose=0))
    assert not np.allclose(first, second)
    assert float(npy(layer.calls.value)) == 5.0


def _model_whose_grad_fn_assigns(steps, forward_mode=False):
    """A Dense layer, then a custom-gradient function whose grad_fn counts its calls in `steps`."""

    @customgrad.custom_gradient(forward_mode=forward_mode)
    def f(x):
        def grad(dy):
            steps.assign(steps + 1.0)
            return dy

        return x * 1.0, grad

    inputs = keras.Input((2,))
    model = keras.Model(inputs, f(keras.layers.Dense(2)(inputs)))
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_assignment_inside_grad_fn_during_fit():
    steps = keras.Variable(0.0, trainable=False, name="steps")
    model = _model_whose_grad_fn_assigns(steps)
    x = np.ones((4, 2), "float32")
    if BACKEND == "jax":
        # jax's backward pass has no way out for a new variable value: a clear error, not a
        # silently dropped update
        with pytest.raises(CustomGradientError, match=r"assigned 1 variable.*Assign in the forward"):
            model.fit(x, x, batch_size=4, epochs=1, verbose=0)
    else:
        model.fit(x, x, batch_size=4, epochs=1, verbose=0)
        assert float(npy(steps.value)) == 1.0


@pytest.mark.backends("jax")
def test_assignment_inside_grad_fn_during_fit_in_forward_mode():
    """custom_jvp's rule is grad_fn as well: the same error as on the custom_vjp path."""
    steps = keras.Variable(0.0, trainable=False, name="steps")
    model = _model_whose_grad_fn_assigns(steps, forward_mode=True)
    x = np.ones((4, 2), "float32")
    with pytest.raises(CustomGradientError, match=r"assigned 1 variable.*Assign in the forward"):
        model.fit(x, x, batch_size=4, epochs=1, verbose=0)


class Regularized(keras.layers.Layer):
    """Adds an activity loss inside its custom-gradient function."""

    def call(self, x):
        @customgrad.custom_gradient
        def f(x):
            self.add_loss(ops.sum(x * x))
            return x * 1.0, lambda dy: dy

        return f(x)


@pytest.mark.parametrize("run_eagerly", [False, True], ids=["compiled", "eager"])
def test_loss_added_inside_f_during_fit(run_eagerly):
    dense = keras.layers.Dense(2, kernel_initializer="ones", use_bias=False)
    inputs = keras.Input((2,))
    model = keras.Model(inputs, Regularized()(dense(inputs)))
    # the only loss is the one f adds: sum((x @ W)^2) with x = 1, W = 1 -> dL/dW = 2 * 2 * 4 rows
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=lambda y, p: 0.0 * ops.sum(p),
                  run_eagerly=run_eagerly)
    x = np.ones((4, 2), "float32")
    if BACKEND == "torch":
        # f runs with autograd on: the loss is differentiated through f's own ops
        model.fit(x, x, batch_size=4, epochs=1, verbose=0)
        np.testing.assert_allclose(npy(dense.kernel.value), np.full((2, 2), 1.0 - 0.01 * 16.0),
                                   rtol=1e-5)
    else:
        # jax's custom_vjp and TensorFlow's unrecorded forward have no path for it: an error,
        # not a loss whose gradient is silently zero
        with pytest.raises(CustomGradientError, match=r"added a loss \(layer.add_loss\) inside its"):
            model.fit(x, x, batch_size=4, epochs=1, verbose=0)


@pytest.mark.backends("tensorflow")
def test_loss_added_inside_f_under_nested_tapes_is_differentiated():
    import tensorflow as tf

    layer, x = Regularized(), tf.constant([1.0, 2.0])
    # under two tapes f's ops are recorded (for second derivatives), so the loss has its path
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            loss = ops.sum(layer(x)) + sum(layer.losses)
        grad = inner.gradient(loss, x)
    np.testing.assert_allclose(npy(grad), [3.0, 5.0])  # 1 + 2x
