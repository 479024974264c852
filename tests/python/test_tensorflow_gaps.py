"""Code written for tf.custom_gradient, run with `customgrad.custom_gradient` in its place, where
the two used to differ (issue 23): a GradientTape that f opens itself, and the variables handed to
grad_fn. Each case runs the same code under both decorators and expects the same result."""

import gc
import weakref

import keras
import numpy as np
import pytest
from helpers import BACKEND

import customgrad

pytestmark = [pytest.mark.backends("tensorflow"), pytest.mark.autodiff]

if BACKEND == "tensorflow":
    import tensorflow as tf

MODES = ["eager", "tf.function"]


def decorators():
    return {"tf.custom_gradient": tf.custom_gradient, "customgrad": customgrad.custom_gradient}


def run(mode, fn, *args):
    """fn(*args) eagerly, or traced into a tf.function and run."""
    return (tf.function(fn, autograph=False) if mode == "tf.function" else fn)(*args)


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
    # f's operations on its inputs are not recorded on the tape that watches them: nothing of f
    # is kept for that tape, and a tensor computed inside f has no gradient there
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
    assert float(dy) == 5.0
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
