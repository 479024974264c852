"""Every way a differentiated value reaches f, under every tensorflow transform: plain autodiff's
value, or the named CustomGradientError reverse mode gives for that route, never None or zeros.

The body is `sin(x * t)` with `t` computed from the differentiated `p` before f runs (or `t` a
variable), grad_fn returning the exact gradients; the truth is plain autodiff of the same body
under the same transform.
"""

from __future__ import annotations

import types

import keras
import numpy as np
import pytest

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.backends("tensorflow")

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

ROUTES = ["positional", "keyword", "closure", "attribute", "list", "dict", "keras.Variable",
          "tf.Variable"]
VARIABLE_ROUTES = ("keras.Variable", "tf.Variable")
# how the refusal names the value, per hidden route
NAMED = {"keyword": "passed by keyword `t`", "closure": "the tensor `t` it closes over",
         "attribute": "`h.t`, read through an object", "list": "`held[0]`, read through an object",
         "dict": "`held['t']`, read through an object"}


def body(x, t):
    return tf.sin(x * t)


def exact(x, t):
    """grad_fn's two exact gradients (with respect to x and to t) of `body`."""
    c = tf.cos(x * t)
    return (lambda dy: dy * c * t), (lambda dy: dy * c * x)


def customgrad_call(route, x, t):
    """body(x, t) as a customgrad function that receives `t` by `route`."""
    if route == "positional":
        @customgrad.custom_gradient
        def f(x, t):
            gx, gt = exact(x, t)
            return body(x, t), lambda dy: (gx(dy), gt(dy))
        return f(x, t)
    if route == "keyword":
        @customgrad.custom_gradient
        def f(x, t=None):
            gx, _ = exact(x, t)
            return body(x, t), lambda dy, variables=None: gx(dy)
        return f(x, t=t)
    if route in VARIABLE_ROUTES:
        @customgrad.custom_gradient
        def f(x):
            value = tf.convert_to_tensor(t.value if route == "keras.Variable" else t)
            gx, gt = exact(x, value)

            def grad(dy, variables=None):
                return (gx(dy),), [gt(dy) for _ in variables or ()]
            return body(x, value), grad
        return f(x)
    if route == "closure":
        @customgrad.custom_gradient
        def f(x):
            gx, _ = exact(x, t)
            return body(x, t), lambda dy, variables=None: gx(dy)
        return f(x)
    # f reads the object it closes over itself (the names the refusal gives: `h.t`, `held[0]`)
    if route == "attribute":
        h = types.SimpleNamespace(t=t)

        @customgrad.custom_gradient
        def f(x):
            gx, _ = exact(x, h.t)
            return body(x, h.t), lambda dy, variables=None: gx(dy)
    else:
        key = 0 if route == "list" else "t"
        held = [t] if route == "list" else {"t": t}

        @customgrad.custom_gradient
        def f(x):
            gx, _ = exact(x, held[key])
            return body(x, held[key]), lambda dy, variables=None: gx(dy)
    return f(x)


def loss_fn(route, custom):
    """L(x, p): t computed from p before f runs (p itself for a variable), then f."""
    def L(x, p):
        t = p if route in VARIABLE_ROUTES else p * 1.0
        if not custom:
            return body(x, tf.convert_to_tensor(t))
        return customgrad_call(route, x, t)
    return L


def raw(p):
    return p.value if isinstance(p, keras.Variable) else p


def tape(L, x, p, dx):
    with tf.GradientTape() as g:
        if dx:
            g.watch(x)
        if isinstance(p, tf.Tensor):
            g.watch(p)
        out = tf.reduce_sum(L(x, p))
    gx, gp = g.gradient(out, [x, raw(p)])
    return [gx if dx else None, gp]


def accumulator(L, x, p, dx):
    primals, tangents = [raw(p)], [tf.ones((2,))]
    if dx:
        primals, tangents = [x, *primals], [tf.ones_like(x), *tangents]
    with tf.autodiff.ForwardAccumulator(primals, tangents) as acc:
        out = L(x, p)
    return [acc.jvp(out)]


def cg_jvp(L, x, p, dx):
    if isinstance(p, tf.Tensor):
        return [customgrad.jvp(L, (x, p), (tf.ones_like(x) if dx else None, tf.ones_like(p)))[1]]
    return [customgrad.jvp(lambda x: L(x, p), (x,), (tf.ones_like(x),))[1]]


def cg_grad(L, x, p, dx):
    if isinstance(p, tf.Tensor):
        nums = (0, 1) if dx else 1
        grads = customgrad.grad(lambda x, p: tf.reduce_sum(L(x, p)), argnums=nums)(x, p)
        return list(grads) if dx else [None, grads]
    return [customgrad.grad(lambda x: tf.reduce_sum(L(x, p)))(x)]


def in_function(transform):
    def run(L, x, p, dx):
        return tf.function(lambda x: transform(L, x, p, dx), autograph=False)(x)
    return run


TRANSFORMS = {"GradientTape": tape, "GradientTape in tf.function": in_function(tape),
              "ForwardAccumulator": accumulator,
              "ForwardAccumulator in tf.function": in_function(accumulator),
              "customgrad.jvp": cg_jvp, "customgrad.grad": cg_grad}


def make_p(route):
    if route == "keras.Variable":
        return keras.Variable([3.0, 4.0])
    if route == "tf.Variable":
        return tf.Variable([3.0, 4.0])
    return tf.constant([3.0, 4.0])


@pytest.mark.parametrize("x_differentiated", [False, True], ids=["x data", "x differentiated"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_route_gives_autodiffs_value_or_a_named_refusal(transform, route, x_differentiated):
    run = TRANSFORMS[transform]
    if route in VARIABLE_ROUTES and transform.startswith("customgrad.") and not x_differentiated:
        pytest.skip("customgrad.grad/jvp differentiate positional arguments: with x as data "
                    "nothing is differentiated")
    x = tf.constant([1.0, 2.0])
    truth = run(loss_fn(route, custom=False), x, make_p(route), x_differentiated)
    if route in NAMED:
        with pytest.raises(CustomGradientError, match="which is being differentiated") as error:
            run(loss_fn(route, custom=True), x, make_p(route), x_differentiated)
        assert NAMED[route] in str(error.value)
        assert "customgrad_call.<locals>.f" in str(error.value)
        return
    got = run(loss_fn(route, custom=True), x, make_p(route), x_differentiated)
    assert len(got) == len(truth)
    for g, want in zip(got, truth):
        assert (g is None) == (want is None)
        if want is not None:
            np.testing.assert_allclose(g, want, rtol=1e-6)


def test_the_grid_compares_with_real_derivatives():
    # the truth is not vacuous: every transform gives p (through t) a nonzero derivative
    x = tf.constant([1.0, 2.0])
    for transform, run in TRANSFORMS.items():
        result = run(loss_fn("positional", custom=False), x, make_p("positional"), True)
        assert result[-1] is not None and np.all(np.abs(result[-1]) > 0.1), transform


# -- Keras's layer.stateless_call: grad_fn reads the values the call was given --------------------

class Scale(keras.layers.Layer):
    """sin(x * w), whose grad_fn reads `self.w` again (the stored weights are ones)."""

    def __init__(self, custom, **kwargs):
        super().__init__(**kwargs)
        self.custom = custom

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer="ones")

    def call(self, x):
        if not self.custom:
            return keras.ops.sin(x * self.w)

        @customgrad.custom_gradient
        def f(x):
            def grad(dy, variables=None):
                c = keras.ops.cos(x * self.w)
                return (dy * c * self.w,), [keras.ops.sum(dy * c * x, axis=0)]
            return keras.ops.sin(x * self.w), grad
        return f(x)


def stateless_gradients(custom, compiled):
    layer = Scale(custom)
    x = tf.constant([[1.0, 2.0]])
    layer.build(x.shape)

    def step(w, x):
        with tf.GradientTape() as g:
            g.watch([w, x])
            y, _ = layer.stateless_call([w], [], x)
            loss = tf.reduce_sum(y)
        return g.gradient(loss, [w, x])

    if compiled:
        step = tf.function(step, autograph=False)
    return step(tf.constant([3.0, 4.0]), x), layer


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_stateless_call_grad_fn_reads_the_values_passed(compiled):
    (want_w, want_x), _ = stateless_gradients(False, compiled)
    (got_w, got_x), layer = stateless_gradients(True, compiled)
    # with the stored ones grad_fn would give cos(x) and cos(x) * 1 instead
    np.testing.assert_allclose(got_x, want_x, rtol=1e-6)
    assert got_w is not None  # the gradient reaches the values passed to stateless_call
    np.testing.assert_allclose(got_w, want_w, rtol=1e-6)
    np.testing.assert_array_equal(layer.w.numpy(), [1.0, 1.0])  # stored weights untouched


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_stateless_call_forward_mode(compiled):
    def jvp(custom):
        layer = Scale(custom)
        x = tf.constant([[1.0, 2.0]])
        layer.build(x.shape)

        def step(w, x):
            with tf.autodiff.ForwardAccumulator([w, x], [tf.ones(2), tf.ones_like(x)]) as acc:
                y, _ = layer.stateless_call([w], [], x)
            return acc.jvp(y)

        if compiled:
            step = tf.function(step, autograph=False)
        return step(tf.constant([3.0, 4.0]), x)

    np.testing.assert_allclose(jvp(True), jvp(False), rtol=1e-6)


# -- second order: a tape over tf.gradients inside a tf.function -----------------------------------

def test_tape_over_tf_gradients_in_a_function_gets_the_second_derivative():
    def second_order(decorator):
        @decorator
        def cube(x):
            return x ** 3, lambda dy: dy * 3.0 * x ** 2

        @tf.function(autograph=False)
        def both(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                (d1,) = tf.gradients(cube(x), [x])
            return d1, tape.gradient(d1, x)

        return [float(v) for v in both(tf.constant(2.0))]

    assert second_order(customgrad.custom_gradient) == second_order(tf.custom_gradient) == [
        12.0, 12.0]


# -- one forward: the graph forward-mode path runs every check --------------------------------------

def test_graph_forward_mode_refuses_other_composite_outputs():
    @customgrad.custom_gradient
    def f(x):
        return tf.IndexedSlices(x, tf.constant([0, 1])), lambda dy: dy

    @tf.function(autograph=False)
    def jvp(x):
        with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)):
            return f(x).values

    with pytest.raises(CustomGradientError, match=r"tf.IndexedSlices"):
        jvp(tf.constant([1.0, 2.0]))
