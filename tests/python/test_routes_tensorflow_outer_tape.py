"""A GradientTape opened outside a tf.function, around a customgrad f that reaches a tensor being
differentiated without receiving it positionally (by keyword, a closure cell, an object's
attribute or a list element, a keras.Variable's value bound by `layer.stateless_call`). The tape
is invisible while the function is traced, so nothing inside can tell the tensor is
differentiated: it gets autodiff's gradient through f's own operations (grad_fn has none for
it), and a stateless scope's value grad_fn's gradient in `variables=`, never None or zeros.
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

X, P = [0.3, -0.7], [0.5, 1.2]
SCALE = 3.0  # grad_fn returns SCALE times the exact gradients: its values are told apart


def body(x, t):
    return tf.sin(x * t)


def exact(dy, x, t, scale=1.0):
    c = scale * dy * tf.cos(x * t)
    return c * t, c * x


def tape_around(fn, own, jit_compile=False):
    """The gradients of sum(fn(x, p)) (p's, and x's first where `own`) from a tape opened
    outside tf.function(fn); None where it gives none."""
    x, p = tf.constant(X), tf.constant(P)
    compiled = tf.function(fn, jit_compile=jit_compile)
    with tf.GradientTape() as tape:
        tape.watch([x, p])
        y = tf.reduce_sum(compiled(x, p))
    return [None if g is None else g.numpy()
            for g in tape.gradient(y, [x, p] if own else [p])]


def plain(x, p):
    return body(x, 2.0 * p)


def by_keyword():
    @customgrad.custom_gradient
    def f(x, *, t):
        return body(x, t), lambda dy: exact(dy, x, t, SCALE)[0]
    return lambda x, p: f(x, t=2.0 * p)


def by_closure_cell():
    def fn(x, p):
        t = 2.0 * p

        @customgrad.custom_gradient
        def f(x):
            return body(x, t), lambda dy: exact(dy, x, t, SCALE)[0]
        return f(x)
    return fn


def through(make_holder, read):
    def fn(x, p):
        holder = make_holder(2.0 * p)

        @customgrad.custom_gradient
        def f(x):
            t = read(holder)
            return body(x, t), lambda dy: exact(dy, x, t, SCALE)[0]
        return f(x)
    return fn


ROUTES = {
    "keyword": by_keyword,
    "closure cell": by_closure_cell,
    "attribute": lambda: through(lambda t: types.SimpleNamespace(t=t), lambda h: h.t),
    "list element": lambda: through(lambda t: [t], lambda h: h[0]),
}


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("own", [False, True], ids=["p", "x-and-p"])
@pytest.mark.parametrize("route", list(ROUTES))
def test_hidden_tensor_gets_autodiffs_gradient_through_f(route, own, jit_compile):
    got = tape_around(ROUTES[route](), own, jit_compile)
    want = tape_around(plain, own, jit_compile)
    # p's through f's own operations: plain autodiff's, not zero
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5)
    assert np.any(got[-1] != 0)
    if own:  # x's is grad_fn's
        np.testing.assert_allclose(got[0], SCALE * want[0], rtol=1e-5)


def test_hidden_tensor_fs_own_input_is_computed_from_is_not_counted_twice():
    # f's input x t is computed from the closed-over t: p's gradient is grad_fn's for that input
    # times x, plus autodiff's through f's own use of t, which must not go through the input
    def fn(x, p):
        t = 2.0 * p

        @customgrad.custom_gradient
        def f(u):
            return body(u, t), lambda dy: exact(dy, u, t)[0]
        return f(x * t)

    got = tape_around(fn, own=False)
    want = tape_around(lambda x, p: body(x * 2.0 * p, 2.0 * p), own=False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


def test_tensor_of_an_enclosing_tf_function_gets_its_gradient():
    # t is a tensor of the outer function's graph, closed over by a tf.function inside it
    def nested(custom):
        def fn(x, p):
            t = 2.0 * p

            @customgrad.custom_gradient
            def f(x):
                return body(x, t), lambda dy: exact(dy, x, t, SCALE)[0]
            return tf.function(lambda x: f(x) if custom else body(x, t))(x)
        return fn

    got, want = tape_around(nested(True), own=False), tape_around(nested(False), own=False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


class Scaled(keras.layers.Layer):
    """A layer whose call is a customgrad f reading its weight `self.w`; `reread`: grad_fn
    reads `self.w` again when it runs."""

    def __init__(self, reread):
        super().__init__()
        self.reread = reread
        self.w = self.add_weight(shape=(2,), initializer="zeros")

    def call(self, x):
        @customgrad.custom_gradient
        def f(x):
            w = self.w.value

            def grad(dy, variables=None):
                gx, gw = exact(dy, x, self.w.value if self.reread else w, SCALE)
                return gx, [gw for _ in variables]
            return body(x, w), grad
        return f(x)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("own", [False, True], ids=["p", "x-and-p"])
@pytest.mark.parametrize("reread", [False, True], ids=["f-reads", "grad_fn-reads-self.w"])
def test_stateless_call_value_gets_grad_fns_gradient(reread, own, jit_compile):
    layer = Scaled(reread)
    layer.build((2,))
    got = tape_around(lambda x, p: layer.stateless_call([2.0 * p], [], x)[0], own, jit_compile)
    want = tape_around(plain, own, jit_compile)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, SCALE * w, rtol=1e-5)


def test_tape_inside_the_function_still_refuses_the_hidden_tensor():
    fn = by_closure_cell()

    @tf.function
    def step(x, p):
        with tf.GradientTape() as tape:
            tape.watch(p)
            y = tf.reduce_sum(fn(x, p))
        return tape.gradient(y, p)

    with pytest.raises(CustomGradientError, match="`t` it closes over"):
        step(tf.constant(X), tf.constant(P))


def test_hidden_tensor_beside_a_tf_variable_f_reads():
    # tf.custom_gradient passes the variable to grad_fn (`variables=`): its gradient is
    # grad_fn's, the closed-over tensor's autodiff's, x's grad_fn's
    v = tf.Variable([1.5, -0.5])

    def make(custom):
        def fn(x, p):
            t = 2.0 * p

            @customgrad.custom_gradient
            def f(x):
                def grad(dy, variables=None):
                    c = SCALE * dy * tf.cos(x * t * v)
                    return c * t * v, [c * x * t for _ in variables]
                return tf.sin(x * t * v), grad
            return f(x) if custom else tf.sin(x * t * v)
        return tf.function(fn)

    def gradients(custom):
        x, p = tf.constant(X), tf.constant(P)
        with tf.GradientTape() as tape:
            tape.watch([x, p])
            y = tf.reduce_sum(make(custom)(x, p))
        return [g.numpy() for g in tape.gradient(y, [x, p, v])]

    (gx, gp, gv), (wx, wp, wv) = gradients(True), gradients(False)
    np.testing.assert_allclose(gx, SCALE * wx, rtol=1e-5)
    np.testing.assert_allclose(gp, wp, rtol=1e-5)
    np.testing.assert_allclose(gv, SCALE * wv, rtol=1e-5)
