"""jax: every route by which a differentiated value reaches f, under every transform, gives
plain autodiff's value or a named CustomGradientError, never a bare jax error nor a silent zero
(a wrong gradient that raises nothing trains a wrong model).

The body is `sin(x * t)` with `t = p * 2` computed from the differentiated `p` before f runs,
and a grad_fn that returns the exact gradients; the truth is plain autodiff of the same body.
The routes: positional, keyword, closure cell, attribute of an object f closes over (`h.t`, a
layer's `self.effective`), element of a list or dict f closes over, and a keras.Variable read in
f whose value Keras's `layer.stateless_call` swaps in. Each under jax.grad, jit of grad, vjp,
jacrev, jacfwd, jax.jvp, hessian, grad of grad, grad of vmap, vmap of grad, customgrad.grad and
customgrad.jvp, with f's own input `x` as data or differentiated too, and with
`forward_mode=True` as well.
"""

import re
import types

import keras
import numpy as np
import pytest

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.backends("jax")

if keras.backend.backend() == "jax":
    import jax
    import jax.numpy as jnp

    from customgrad._messages import JaxForwardModeError, JaxHiddenTracerError

ROUTES = ["positional", "keyword", "cell", "attribute", "self", "list", "dict", "variable"]
HIDDEN = {"attribute": "h.t", "self": "self.effective", "list": "holder[0]",
          "dict": "holder['t']"}
P, X = [3.0, 4.0], [1.0, 2.0]


class _Scaled(keras.layers.Layer):
    """`x * self.effective`, `self.effective = p * 2` set before f runs (the `self` route)."""

    def __init__(self, forward_mode):
        super().__init__()
        self.forward_mode = forward_mode
        self.effective = None

    def call(self, x, p):
        self.effective = p * 2.0

        @customgrad.custom_gradient(forward_mode=self.forward_mode)
        def f(x):
            return x * self.effective, lambda dy: dy * self.effective

        return f(x)


class _VariableLayer(keras.layers.Layer):
    """`x * self.w`, a keras.Variable whose value `stateless_call` swaps in (the `variable`
    route): grad_fn receives it in `variables=`, as itself."""

    def __init__(self, forward_mode):
        super().__init__()
        self.forward_mode = forward_mode
        self.w = self.add_weight(shape=(2,), initializer="ones")
        self.built = True

    def call(self, x):
        @customgrad.custom_gradient(forward_mode=self.forward_mode)
        def f(x):
            def grad(dy, variables=None):
                assert variables is not None and variables[0] is self.w
                return dy * self.w, [dy * x]
            return x * self.w, grad

        return f(x)


def _loss(route, forward_mode=False):
    """loss(p, x) = sum(sin(x * t)), t = p * 2 reaching f by `route`."""
    custom = customgrad.custom_gradient(forward_mode=forward_mode)

    def loss(p, x):
        t = p * 2.0
        if route == "positional":
            y = custom(lambda x, t: (x * t, lambda dy: (dy * t, dy * x)))(x, t)
        elif route == "keyword":
            y = custom(lambda x, t=None: (x * t, lambda dy: dy * t))(x, t=t)
        elif route == "cell":
            y = custom(lambda x: (x * t, lambda dy: dy * t))(x)
        elif route == "attribute":
            h = types.SimpleNamespace(t=t)
            y = custom(lambda x: (x * h.t, lambda dy: dy * h.t))(x)
        elif route == "self":
            y = _Scaled(forward_mode)(x, p)
        elif route == "list":
            holder = [t]
            y = custom(lambda x: (x * holder[0], lambda dy: dy * holder[0]))(x)
        elif route == "dict":
            holder = {"t": t}
            y = custom(lambda x: (x * holder["t"], lambda dy: dy * holder["t"]))(x)
        else:  # "variable"
            y, _ = _VariableLayer(forward_mode).stateless_call([t], [], x)
        return jnp.sum(jnp.sin(y))

    return loss


def _plain(p, x):
    return jnp.sum(jnp.sin(x * (p * 2.0)))


def _transforms(diff_x):
    """name -> (loss -> result); `diff_x`: x differentiated too (else data, zero tangent)."""
    argnums = (0, 1) if diff_x else 0
    p, x = jnp.array(P), jnp.array(X)
    tangents = (jnp.ones(2), jnp.ones(2) if diff_x else jnp.zeros(2))
    xs = jnp.stack([x, x + 1.0])

    def first(g):
        return g[0] if diff_x else g

    transforms = {
        "grad": lambda L: jax.grad(L, argnums)(p, x),
        "jit(grad)": lambda L: jax.jit(jax.grad(L, argnums))(p, x),
        "vjp": lambda L: (jax.vjp(L, p, x)[1](1.0) if diff_x
                          else jax.vjp(lambda q: L(q, x), p)[1](1.0)),
        "jacrev": lambda L: jax.jacrev(L, argnums)(p, x),
        "jacfwd": lambda L: jax.jacfwd(L, argnums)(p, x),
        "jvp": lambda L: jax.jvp(L, (p, x), tangents)[1],
        "hessian": lambda L: jax.hessian(L, argnums)(p, x),
        "grad(grad)": lambda L: jax.grad(
            lambda q, y: jnp.sum(first(jax.grad(L, argnums)(q, y))), argnums)(p, x),
        "grad(vmap)": lambda L: jax.grad(
            lambda q, y: jnp.sum(jax.vmap(L, in_axes=(None, 0))(q, y)), argnums)(p, xs),
        "vmap(grad)": lambda L: jax.vmap(jax.grad(L, argnums), in_axes=(None, 0))(p, xs),
        "customgrad.grad": lambda L: customgrad.grad(L, argnums=argnums)(p, x),
        "customgrad.jvp": lambda L: customgrad.jvp(L, (p, x), tangents)[1],
    }
    assert list(transforms) == TRANSFORMS
    return transforms


TRANSFORMS = ["grad", "jit(grad)", "vjp", "jacrev", "jacfwd", "jvp", "hessian", "grad(grad)",
              "grad(vmap)", "vmap(grad)", "customgrad.grad", "customgrad.jvp"]
_FORWARD = {"jacfwd", "jvp"}  # jax's forward mode of the custom rule itself


def _expected(route, transform, diff_x, forward_mode):
    """What the cell gives: "ok" (plain autodiff's value) or the named error's class."""
    if route in ("keyword", "cell"):
        return CustomGradientError  # refused by the core, by name
    if route in HIDDEN:  # named, as on every backend (also where f's inputs are data)
        return JaxHiddenTracerError
    if not forward_mode and transform in _FORWARD:
        return JaxForwardModeError
    if not forward_mode and transform == "customgrad.jvp":
        return CustomGradientError  # customgrad.jvp's own message for a reverse-only function
    return "ok"


def _close(a, b):
    a, b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(a) == len(b) and all(
        np.allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-5) for u, v in zip(a, b))


@pytest.mark.parametrize("forward_mode", [False, True], ids=["reverse", "forward_mode"])
@pytest.mark.parametrize("diff_x", [False, True], ids=["x_data", "x_differentiated"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_every_route_gives_autodiff_or_a_named_error(transform, diff_x, forward_mode):
    run = _transforms(diff_x)[transform]
    truth = run(_plain)
    outcomes = {}
    for route in ROUTES:
        try:
            got = run(_loss(route, forward_mode))
            outcome = "ok" if _close(got, truth) else f"silent: {got} != {truth}"
        except CustomGradientError as error:
            outcome = type(error)
            if route in HIDDEN and outcome is JaxHiddenTracerError:
                assert f"`{HIDDEN[route]}`" in str(error), str(error)
                assert "Pass it to" in str(error) and "as a positional argument" in str(error)
        outcomes[route] = outcome
    expected = {route: _expected(route, transform, diff_x, forward_mode) for route in ROUTES}
    assert outcomes == expected


def test_object_attribute_with_x_differentiated_is_named():
    """The finding: `h.t` computed from p before f ran, f's own x differentiated too: jax's
    UnexpectedTracerError before, now a JaxHiddenTracerError naming f, `h.t` and the fix."""
    def loss(p, x):
        h = types.SimpleNamespace(t=p * 2.0)

        @customgrad.custom_gradient
        def scaled(x):
            return x * h.t, lambda dy: dy * h.t

        return jnp.sum(scaled(x))

    for transform in (jax.grad, lambda g, **k: jax.jit(jax.grad(g, **k))):
        with pytest.raises(JaxHiddenTracerError) as caught:
            transform(loss, argnums=(0, 1))(jnp.array(P), jnp.array(X))
        text = str(caught.value)
        assert "`test_object_attribute_with_x_differentiated_is_named.<locals>.loss.<locals>." \
               "scaled` reaches `h.t`, a tensor being differentiated" in text
        assert "through an object it closes over" in text


def test_object_attribute_with_x_as_data_is_named_as_on_every_backend():
    """Eager jax.grad with only p differentiated runs f on concrete x, and jax would
    differentiate f's own operations for `h.t` (autodiff's gradient, not grad_fn's): the traced
    output tells, and the call is refused by name, as tensorflow and torch refuse it."""
    x = jnp.array(X)
    with pytest.raises(JaxHiddenTracerError, match=re.escape("`h.t`")):
        jax.grad(_loss("attribute"), 0)(jnp.array(P), x)


def test_a_jits_value_read_through_an_object_with_x_as_data_runs_and_is_named_once_differentiated():
    """Under jit alone, a value f reads through an object is no error (nothing differentiates
    it); grad of that jit is refused by name, not differentiated through f's own operations."""
    x = jnp.array(X)
    loss = _loss("attribute")
    np.testing.assert_allclose(np.asarray(jax.jit(loss)(jnp.array(P), x)),
                               np.asarray(_plain(jnp.array(P), x)), rtol=1e-6)
    with pytest.raises(JaxHiddenTracerError):
        jax.grad(jax.jit(loss), 0)(jnp.array(P), x)


def test_forward_mode_of_a_reverse_only_function_is_named():
    """jax.jvp of a function built without forward_mode=True: a JaxForwardModeError naming f
    and the opt-in (still a TypeError, as jax's own error was)."""
    @customgrad.custom_gradient
    def double(x):
        return x * 2.0, lambda dy: dy * 2.0

    with pytest.raises(JaxForwardModeError, match="forward_mode=True") as caught:
        jax.jvp(double, (jnp.ones(2),), (jnp.ones(2),))
    assert isinstance(caught.value, TypeError)
    assert "reached `test_forward_mode_of_a_reverse_only_function_is_named.<locals>.double`" \
        in str(caught.value)


def test_an_unrelated_closure_still_runs_without_a_search_error():
    """f closing over an object with no traced tensor (a constant array) under jit of grad:
    the search finds nothing and the gradient is grad_fn's."""
    h = types.SimpleNamespace(c=jnp.array([4.0, 5.0]))

    @customgrad.custom_gradient
    def f(x):
        return x * h.c, lambda dy: dy * 10.0

    got = jax.jit(jax.grad(lambda x: jnp.sum(f(x))))(jnp.array(X))
    np.testing.assert_array_equal(np.asarray(got), [10.0, 10.0])


@pytest.mark.parametrize("forward_mode", [False, True], ids=["reverse", "forward_mode"])
def test_grad_of_jit_of_a_hidden_tensor_is_refused_by_name(forward_mode):
    """Under jax.grad(jax.jit(...)) a tensor that reaches f other than positionally is only a jit
    tracer while f runs, so nothing in f's call can tell that it is differentiated; it is
    refused by name when the outer grad differentiates it (docs/convention.md, "Arguments"),
    never with jax's bare CustomVJPException (more in test_routes_jax_jit.py)."""
    for route in ("attribute", "list", "dict"):
        with pytest.raises(JaxHiddenTracerError, match=re.escape(HIDDEN[route])):
            jax.grad(jax.jit(_loss(route, forward_mode)))(jnp.array(P), jnp.array(X))
    for route in ("keyword", "cell"):
        with pytest.raises(CustomGradientError, match="which is being differentiated"):
            jax.grad(jax.jit(_loss(route, forward_mode)))(jnp.array(P), jnp.array(X))
