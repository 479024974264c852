"""jax: a tensor computed inside a jitted function from the differentiated `p` (t = 2 p) that
reaches a custom-gradient f by keyword or as a cell of f's closure, under jax.grad(jax.jit(...)).
While jit traces, t is not yet known to be differentiated; the outer grad's JVP
later reaches the custom_vjp, which used to end in jax's bare CustomVJPException. Now it is a
named CustomGradientError, and where t is not differentiated (grad of x only, jit alone) the
call gives plain autodiff's value (before: a bare "No constant handler" TypeError). The same
for f built with forward_mode=True (custom_jvp). Read through an object f closes over (an
attribute, a list or dict element) a differentiated t is a JaxHiddenTracerError naming it, and
one not differentiated gives grad_fn's value for x (custom_vjp).

The body is `sin(x * t)`; grad_fn returns the exact gradients; the truth is plain autodiff of
the same body.
"""

import re
import types

import keras
import numpy as np
import pytest

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.backends("jax")

X, P = [0.3, -0.7], [0.5, 1.2]


def _body(x, t):
    return keras.ops.sin(x * t)


def _grads(dy, x, t):
    c = dy * keras.ops.cos(x * t)
    return c * t, c * x


# route -> (make the holder of t, read t from it, the name the error gives it)
HOLDERS = {"attribute": (lambda t: types.SimpleNamespace(t=t), lambda h: h.t, "holder.t"),
           "list": (lambda t: [t], lambda h: h[0], "holder[0]"),
           "dict": (lambda t: {"t": t}, lambda h: h["t"], "holder['t']")}


def _by_keyword(x, *, t):
    return _body(x, t), lambda dy: _grads(dy, x, t)[0]


def loss(route, forward_mode=False):
    """sum(f(x, t)) with t = 2 p computed inside the function, reaching f by `route`
    ("keyword", "cell") or, with "plain", the body itself; f on custom_vjp, or on custom_jvp
    with `forward_mode`."""
    custom = customgrad.custom_gradient(forward_mode=forward_mode)

    def fn(x, p):
        t = p * 2.0
        if route == "keyword":
            y = custom(_by_keyword)(x, t=t)
        elif route in HOLDERS:
            holder = HOLDERS[route][0](t)

            @custom
            def by_holder(x):
                t = HOLDERS[route][1](holder)
                return _body(x, t), lambda dy: _grads(dy, x, t)[0]
            y = by_holder(x)
        elif route == "cell":
            @custom
            def by_cell(x):
                return _body(x, t), lambda dy: _grads(dy, x, t)[0]
            y = by_cell(x)
        else:
            y = _body(x, t)
        return keras.ops.sum(y)
    return fn


def _arrays():
    import jax.numpy as jnp
    return jnp.asarray(X), jnp.asarray(P)


FORWARD_MODE = pytest.mark.parametrize("forward_mode", [False, True],
                                       ids=["custom_vjp", "forward_mode"])


@FORWARD_MODE
@pytest.mark.parametrize("argnums", [1, (0, 1)], ids=["p", "x and p"])
@pytest.mark.parametrize("route,words", [("keyword", "passed by keyword `t`"),
                                         ("cell", "the tensor `t` it closes over")])
def test_grad_of_jit_refuses_a_differentiated_hidden_tensor_by_name(route, words, argnums,
                                                                    forward_mode):
    import jax
    with pytest.raises(CustomGradientError, match=words) as info:
        jax.grad(jax.jit(loss(route, forward_mode)), argnums=argnums)(*_arrays())
    assert "_by_keyword" in str(info.value) or "by_cell" in str(info.value)
    assert "being differentiated" in str(info.value)


@FORWARD_MODE
@pytest.mark.parametrize("route", ["keyword", "cell"])
def test_grad_of_jit_of_x_only_gives_autodiffs_value(route, forward_mode):
    """t comes from the jit's argument p, which is not differentiated: grad_fn's value for x."""
    import jax
    want = jax.grad(jax.jit(loss("plain")))(*_arrays())
    got = jax.grad(jax.jit(loss(route, forward_mode)))(*_arrays())
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("route", ["keyword", "cell"])
def test_hessian_of_jit_of_x_only_gives_autodiffs_value(route):
    import jax
    want = jax.hessian(jax.jit(loss("plain")))(*_arrays())
    got = jax.hessian(jax.jit(loss(route, forward_mode=True)))(*_arrays())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@FORWARD_MODE
@pytest.mark.parametrize("route", ["keyword", "cell"])
def test_jit_alone_gives_the_bodys_value(route, forward_mode):
    import jax
    want = jax.jit(loss("plain"))(*_arrays())
    np.testing.assert_allclose(jax.jit(loss(route, forward_mode))(*_arrays()), want, rtol=1e-6)


@FORWARD_MODE
@pytest.mark.parametrize("route", ["keyword", "cell", *sorted(HOLDERS)])
def test_jit_of_grad_of_x_only_gives_autodiffs_value(route, forward_mode):
    import jax
    want = jax.jit(jax.grad(loss("plain")))(*_arrays())
    got = jax.jit(jax.grad(loss(route, forward_mode)))(*_arrays())
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_call_with_no_keyword_and_no_closure_does_not_search(monkeypatch):
    """The common positional call runs the path it ran before: no hidden-tracer search."""
    import jax
    from customgrad.backends.jax import link, traced

    def searched(*_):
        raise AssertionError("searched for hidden tracers")
    monkeypatch.setattr(traced, "Hidden", searched)
    monkeypatch.setattr(link, "Hoisted", searched)

    @customgrad.custom_gradient
    def positional(x, t):
        return _body(x, t), lambda dy: _grads(dy, x, t)

    def fn(x, p):
        return keras.ops.sum(positional(x, p * 2.0))
    want = jax.grad(jax.jit(loss("plain")), argnums=(0, 1))(*_arrays())
    got = jax.grad(jax.jit(fn), argnums=(0, 1))(*_arrays())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("argnums", [0, (0, 1)], ids=["x", "x and p"])
def test_a_bound_method_closing_over_the_tensor(argnums):
    """f a bound method whose function closes over t: refused where t is differentiated, and
    grad_fn's value for x where it is not (f runs with its `self`)."""
    import jax

    def fn(x, p):
        t = p * 2.0

        class Holder:
            scale = 1.0

            def f(self, x):
                return _body(x, t) * self.scale, lambda dy: _grads(dy * self.scale, x, t)[0]
        return keras.ops.sum(customgrad.custom_gradient(Holder().f)(x))

    if argnums == 0:
        want = jax.grad(jax.jit(loss("plain")))(*_arrays())
        np.testing.assert_allclose(jax.grad(jax.jit(fn))(*_arrays()), want, rtol=1e-6)
    else:
        with pytest.raises(CustomGradientError, match="the tensor `t` it closes over"):
            jax.grad(jax.jit(fn), argnums=argnums)(*_arrays())


@FORWARD_MODE
@pytest.mark.parametrize("argnums", [1, (0, 1)], ids=["p", "x and p"])
@pytest.mark.parametrize("route", sorted(HOLDERS))
def test_grad_of_jit_refuses_a_differentiated_tensor_read_through_an_object(route, argnums,
                                                                          forward_mode):
    import jax

    from customgrad._messages import JaxHiddenTracerError
    with pytest.raises(JaxHiddenTracerError, match=re.escape(f"`{HOLDERS[route][2]}`")):
        jax.grad(jax.jit(loss(route, forward_mode)), argnums=argnums)(*_arrays())


@pytest.mark.parametrize("route", sorted(HOLDERS))
def test_jit_alone_with_a_tensor_read_through_an_object(route):
    import jax
    want = jax.jit(loss("plain"))(*_arrays())
    np.testing.assert_allclose(jax.jit(loss(route))(*_arrays()), want, rtol=1e-6)


@FORWARD_MODE
@pytest.mark.parametrize("route", sorted(HOLDERS))
def test_grad_of_jit_of_x_only_with_a_tensor_read_through_an_object(route, forward_mode):
    """t not differentiated but read through an object, which f would read again when jax
    traces the forward rule after the jit's trace ended (before: jax's own "No constant
    handler" TypeError): the call is a jaxpr taking t as an input (`link.hoisted_call`)."""
    import jax
    want = jax.grad(jax.jit(loss("plain")))(*_arrays())
    np.testing.assert_allclose(jax.grad(jax.jit(loss(route, forward_mode)))(*_arrays()), want,
                               rtol=1e-6)
