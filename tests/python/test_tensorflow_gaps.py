"""Code written for tf.custom_gradient, run with `customgrad.custom_gradient` in its place, where
the two used to differ: a GradientTape that f opens itself, and the variables handed to
grad_fn. Where they should agree, a case runs the same code under both decorators and expects the
same result. A grad_fn written for tf.custom_gradient that calls `.ref()` or GradientTape.watch
on the variables a Keras layer reads needs `custom_gradient(f, tf_variables=True)`, which passes
it the tf.Variables the keras.Variables hold; by default it receives the keras.Variables."""

import functools
import gc
import weakref

import keras
import numpy as np
import pytest
from helpers import BACKEND

import customgrad
from customgrad import CustomGradientError

pytestmark = [pytest.mark.backends("tensorflow"), pytest.mark.autodiff]

if BACKEND == "tensorflow":
    import tensorflow as tf

MODES = ["eager", "tf.function", "jit_compile"]


def decorators():
    return {"tf.custom_gradient": tf.custom_gradient, "customgrad": customgrad.custom_gradient}


def run(mode, fn, *args):
    """fn(*args) eagerly, or traced into a tf.function (compiled with XLA for "jit_compile")."""
    if mode == "eager":
        return fn(*args)
    return tf.function(fn, autograph=False, jit_compile=mode == "jit_compile")(*args)


def cube_and_log1pexp(decorator, seen):
    """log(1 + exp(x)) with its stable gradient, whose f also takes the derivative of x**3 with
    a tape of its own (kept in `seen`)."""

    @decorator
    def f(x):
        with tf.GradientTape() as inner:
            inner.watch(x)
            cube = x * x * x
        seen["inner"] = inner.gradient(cube, x)
        e = tf.exp(x)
        return tf.math.log(1.0 + e), lambda dy: dy * (1.0 - 1.0 / (1.0 + e))

    return f


# -- a tape opened inside f --------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("persistent", [False, True], ids=["tape", "persistent-tape"])
def test_tape_opened_inside_f_gets_the_gradient_it_gets_under_tf_custom_gradient(mode, persistent):
    def outer_and_inner_gradients(decorator):
        seen = {}
        f = cube_and_log1pexp(decorator, seen)

        def step(x):
            with tf.GradientTape(persistent=persistent) as outer:
                outer.watch(x)
                y = f(x)
            return outer.gradient(y, x), seen["inner"]

        return [float(v) for v in run(mode, step, tf.constant(100.0))]

    results = {name: outer_and_inner_gradients(d) for name, d in decorators().items()}
    # the outer tape gets grad_fn's gradient (autodiff's would be NaN); the inner one 3x^2
    assert results["customgrad"] == results["tf.custom_gradient"] == [1.0, 30000.0]


@pytest.mark.parametrize("mode", MODES)
def test_outer_tape_records_nothing_of_f_when_f_opens_a_tape(mode):
    # eager, f's operations on its inputs are not recorded on the tape that watches them: nothing
    # of f is kept for that tape, and a tensor computed inside f has no gradient there. In a
    # graph they are recorded, as tf.custom_gradient's are: tf.gradients can compute grad_fn
    # under that tape, which then differentiates grad_fn's closure (second order)
    hidden = {}

    @customgrad.custom_gradient
    def f(x):
        with tf.GradientTape() as inner:
            inner.watch(x)
            h = x * 3.0
        hidden["dh"] = inner.gradient(h, x)
        hidden["h"] = h
        return x * 2.0, lambda dy: dy * 5.0

    def step(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            y = f(x)
        # 5 from grad_fn, plus 3 if the tape had recorded h = 3x (as tf.custom_gradient's does)
        return outer.gradient([y, hidden["h"]], x), hidden["dh"]

    dy, dh_inner = run(mode, step, tf.constant(1.0))
    assert float(dy) == (5.0 if mode == "eager" else 8.0)
    assert float(dh_inner) == 3.0


def test_what_f_computes_on_its_inputs_is_freed_when_f_returns():
    refs = {}

    @customgrad.custom_gradient
    def f(x):
        with tf.GradientTape() as inner:
            inner.watch(x)
            hidden = tf.sin(x)  # f's own intermediate, which grad_fn does not hold
        refs["hidden"] = weakref.ref(hidden)
        refs["dhidden"] = inner.gradient(hidden, x)
        return x * 2.0, lambda dy: dy * 5.0

    gc.disable()  # reference counting only: a tape holding it would keep it alive
    try:
        with tf.GradientTape() as outer:
            x = tf.constant(0.0)
            outer.watch(x)
            y = f(x)
            assert refs["hidden"]() is None, "the outer tape kept an intermediate of f"
        assert float(outer.gradient(y, x)) == 5.0
    finally:
        gc.enable()
    assert float(refs["dhidden"]) == 1.0  # cos(0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["tf.Variable", "keras.Variable"])
def test_tape_inside_f_watches_the_variables_f_reads_and_the_outer_tape_gets_grad_fns(mode, kind):
    # the inner tape watches the variable as it is read (its gradient is x); the outer tape gets
    # exactly grad_fn's 7.0: what it saw of f's reads adds nothing
    def gradients(decorator):
        w = tf.Variable(2.0) if kind == "tf.Variable" else keras.Variable(2.0)
        raw = w if kind == "tf.Variable" else w.value
        seen = {}

        @decorator
        def f(x):
            with tf.GradientTape() as inner:
                y = x * w
            seen["inner"] = inner.gradient(y, raw)

            def grad(dy, variables=None):
                return dy * 3.0, [dy * 7.0]

            return y, grad

        def step(x):
            with tf.GradientTape() as outer:
                outer.watch(x)
                y = f(x)
            return [*outer.gradient(y, [x, raw]), seen["inner"]]

        return [float(v) for v in run(mode, step, tf.constant(5.0))]

    results = {name: gradients(d) for name, d in decorators().items()}
    assert results["customgrad"] == results["tf.custom_gradient"] == [3.0, 7.0, 5.0]


# -- the variables handed to grad_fn -----------------------------------------------------------

def written_for_tf_custom_gradient(decorator, layer, checks):
    """The pattern of public recompute-in-backward code written for tf.custom_gradient: grad_fn
    keys the variables by `.ref()`, recomputes layer(x) under a tape of its own that watches
    them, checks that tape watched the same variables, and returns their gradients by key.
    What it checked goes to `checks`."""

    @decorator
    def recomputed(x):
        def grad(dy, variables=None):
            refs = {v.ref() for v in variables}
            checks["hashes"] = {hash(r) for r in refs} == {hash(v.ref()) for v in variables}
            with tf.GradientTape() as tape:
                tape.watch(x)
                tape.watch(variables)
                y = layer(x)
            checks["same_as_watched"] = {v.ref() for v in tape.watched_variables()} == refs
            grads = tape.gradient(y, [x, *variables], output_gradients=dy)
            by_ref = {v.ref(): g for v, g in zip(variables, grads[1:])}
            return grads[0], [by_ref[v.ref()] for v in variables]

        return layer(x), grad

    return recomputed


class TFVariableDense(tf.Module if BACKEND == "tensorflow" else object):
    """A dense layer whose weights are plain tf.Variables (a tf.Module's, not Keras's)."""

    def __init__(self):
        super().__init__()
        self.kernel = tf.Variable([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]], name="kernel")
        self.bias = tf.Variable([0.1, -0.1], name="bias")

    def __call__(self, x):
        return tf.tanh(tf.matmul(x, self.kernel) + self.bias)


@pytest.mark.parametrize("mode", MODES)
def test_grad_fn_written_for_tf_custom_gradient_gets_tf_variables_it_can_key_by_ref(mode):
    x = tf.constant([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])

    def gradients(decorator):
        layer, checks = TFVariableDense(), {}
        recomputed = written_for_tf_custom_gradient(decorator, layer, checks)

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(recomputed(x) ** 2)
            return tape.gradient(y, [x, layer.kernel, layer.bias])

        grads = [np.asarray(g) for g in run(mode, step, x)]
        assert checks == {"hashes": True, "same_as_watched": True}
        return grads

    for ours, theirs in zip(gradients(customgrad.custom_gradient),
                            gradients(tf.custom_gradient)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_variables_are_unhashable_as_they_are_under_tf_custom_gradient(mode):
    # TensorFlow 2 refuses to hash a tf.Variable ("use variable.ref() as the key"); customgrad
    # hands grad_fn the same objects, so code that hashes them fails the same way
    def hash_error(decorator):
        w, seen = tf.Variable(2.0), {}

        @decorator
        def f(x):
            def grad(dy, variables=None):
                try:
                    hash(variables[0])
                except TypeError as error:
                    seen["error"] = str(error)
                return dy, [dy]

            return x * w, grad

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = f(x)
            return tape.gradient(y, x)

        run(mode, step, tf.constant(1.0))
        return seen["error"]

    ours, theirs = hash_error(customgrad.custom_gradient), hash_error(tf.custom_gradient)
    assert ours == theirs
    assert "Instead, use variable.ref() as the key" in ours


def test_backend_agnostic_grad_fn_uses_the_keras_variables_f_read_as_keras_variables():
    scale = keras.Variable(3.0, name="scale")
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            (v,) = variables
            seen["path"], seen["value"] = v.path, float(v.value)
            return dy * v * 2, [keras.ops.sum(dy * x) * keras.ops.ones_like(v.value)]

        return x * scale, grad

    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(f(x))
    dx, dscale = tape.gradient(y, [x, scale.value])
    assert seen == {"path": "scale", "value": 3.0}
    np.testing.assert_array_equal(np.asarray(dx), [6.0, 6.0])
    assert float(dscale) == 3.0


@pytest.mark.parametrize("mode", MODES)
def test_tf_style_grad_fn_on_keras_variables_is_a_clear_error(mode):
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    recomputed = written_for_tf_custom_gradient(customgrad.custom_gradient, layer, {})

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(recomputed(x))
        return tape.gradient(y, x)

    with pytest.raises(CustomGradientError) as info:
        run(mode, step, tf.ones((2, 3)))
    assert (
        "customgrad.custom_gradient: the grad_fn of "
        "`written_for_tf_custom_gradient.<locals>.recomputed` raised AttributeError ('Variable' "
        "object has no attribute 'ref') while variables= held the keras.Variables "
        f"['{layer.kernel.path}', '{layer.bias.path}']. customgrad passes the keras.Variables f "
        "read, where tf.custom_gradient passes tf.Variables;") in str(info.value)


with_tf_variables = functools.partial(customgrad.custom_gradient, tf_variables=True)


def recompute_model(decorator):
    """Dense(4, tanh) -> Dense(1), the first layer recomputed in the backward by the code
    written for tf.custom_gradient above; the same initial weights every time."""

    class Recomputed(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(4, activation="tanh")

        def build(self, shape):
            self.dense.build(shape)

        def call(self, x):
            return written_for_tf_custom_gradient(decorator, self.dense, {})(x)

    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    hidden = Recomputed()(inputs) if decorator else keras.layers.Dense(4, activation="tanh")(
        inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def test_public_recompute_grad_under_model_fit_trains_a_dense_layer_as_plain_training():
    data = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    target = np.sin(data.sum(axis=1, keepdims=True))
    losses = {}
    for name, decorator in [("plain", None), ("customgrad", with_tf_variables)]:
        model = recompute_model(decorator)
        history = model.fit(data, target, epochs=3, batch_size=8, shuffle=False, verbose=0)
        losses[name] = history.history["loss"]
    np.testing.assert_allclose(losses["customgrad"], losses["plain"], rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_tf_style_grad_fn_on_a_keras_layer_with_tf_variables_matches_tf_custom_gradient(mode):
    # the keras.Variables' tf.Variables key by .ref(), are what grad_fn's own tape watched, and
    # their gradients (returned keyed by .ref()) reach the outer tape
    x = tf.constant([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])

    def gradients(decorator):
        keras.utils.set_random_seed(0)
        layer, checks = keras.layers.Dense(2, activation="tanh"), {}
        layer.build((None, 3))
        recomputed = written_for_tf_custom_gradient(decorator, layer, checks)

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(recomputed(x) ** 2)
            return tape.gradient(y, [x, layer.kernel.value, layer.bias.value])

        grads = [np.asarray(g) for g in run(mode, step, x)]
        assert checks == {"hashes": True, "same_as_watched": True}
        return grads

    ours, theirs = gradients(with_tf_variables), gradients(tf.custom_gradient)
    assert [g.shape for g in ours] == [(2, 3), (3, 2), (2,)]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("tf_variables", [False, True])
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_grad_fn_receives_keras_variables_by_default_and_their_tf_variables_on_request(
        mode, tf_variables):
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    module = TFVariableDense()  # a tf.Module's tf.Variables arrive as themselves either way
    seen = {}

    @customgrad.custom_gradient(tf_variables=tf_variables)
    def f(x):
        def grad(dy, variables=None):
            seen["variables"] = list(variables)
            return tf.ones_like(x), [None] * len(variables)

        return layer(x) + module(x), grad

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(f(x))
        return tape.gradient(y, x)

    run(mode, step, tf.ones((1, 3)))
    keras_variables = [layer.kernel, layer.bias]
    expected = [v.value for v in keras_variables] if tf_variables else keras_variables
    expected += [module.kernel, module.bias]
    assert [type(v) for v in seen["variables"]] == [type(v) for v in expected]
    assert all(a is b for a, b in zip(seen["variables"], expected))

