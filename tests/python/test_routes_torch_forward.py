"""torch, forward mode and second order: every route by which a tensor carrying a tangent reaches
a custom-gradient f, under every forward-mode API (torch.func.jvp, jacfwd, dual tensors of
torch.autograd.forward_ad, also under torch.vmap, customgrad.jvp), with f's own input carrying a
tangent or not. Each cell gives plain autodiff's JVP of the same body (derived from grad_fn, with
`variables=` where the route is a hidden tensor or a keras.Variable) or a named
CustomGradientError: never a zero.
And torch.func.hessian (jacfwd over jacrev) of a positional custom-gradient function."""

import types

import keras
import pytest

import customgrad
from customgrad import _messages as msg

pytestmark = pytest.mark.backends("torch")

if keras.backend.backend() == "torch":
    import torch
    from torch.autograd import forward_ad

ROUTES = ["positional", "keyword", "closure", "attribute", "list", "dict", "keras_variable",
          "parameter"]
# refused by name, as on every backend: a tensor computed from one being differentiated that f
# reads without receiving it positionally (docs/convention.md, "Arguments")
REFUSED = {"keyword": "passed by keyword `t`", "closure": "the tensor `t` it closes over",
           # (the three hold the same t: the message names the first it finds)
           "attribute": "`, read through an object", "list": "`, read through an object",
           "dict": "`, read through an object"}
TRANSFORMS = ["func.jvp", "jacfwd", "dual", "vmap of dual", "customgrad.jvp"]


def body(x, t):
    return torch.sin(x * t)


def exact(x, t, dy, scale_t=1.0):
    """The gradients of body for x and t (t's scaled by `scale_t`: a grad_fn whose JVP differs
    from f's own derivative, to tell which one the JVP comes from)."""
    c = torch.cos(x * t) * dy
    return c * t, scale_t * c * x


def hidden_grad(x, t, scale_t=1.0):
    """grad_fn for a route where t is not a positional argument: t's gradient in variables=."""
    def grad_fn(dy, variables=None):
        gx, gt = exact(x, t, dy, scale_t)
        if variables is None:
            return gx
        assert len(variables) == 1, variables
        return gx, [gt]
    return grad_fn


def routed(route, scale_t=1.0):
    """fn(p, x): t = p * 2 computed before f runs, reaching f by `route`; f's body is
    sin(x * t) and its grad_fn returns the exact gradients (t's scaled by `scale_t`)."""
    if route == "positional":
        @customgrad.custom_gradient
        def f(x, t):
            return body(x, t), lambda dy: exact(x, t, dy, scale_t)
        return lambda p, x: f(x, p * 2)
    if route == "keyword":
        @customgrad.custom_gradient
        def f(x, t=None):
            return body(x, t), hidden_grad(x, t, scale_t)
        return lambda p, x: f(x, t=p * 2)
    if route == "closure":
        def fn(p, x):
            t = p * 2

            @customgrad.custom_gradient
            def f(x):
                return body(x, t), hidden_grad(x, t, scale_t)
            return f(x)
        return fn
    if route in ("attribute", "list", "dict"):
        h, items, table = types.SimpleNamespace(t=None), [None], {"t": None}

        @customgrad.custom_gradient
        def f(x):
            t = h.t if route == "attribute" else items[0] if route == "list" else table["t"]
            return body(x, t), hidden_grad(x, t, scale_t)

        def fn(p, x):
            h.t = items[0] = table["t"] = p * 2
            return f(x)
        return fn
    if route == "keras_variable":
        v = keras.Variable(torch.zeros(2))

        @customgrad.custom_gradient
        def f(x):
            t = v.value
            return body(x, t), hidden_grad(x, t, scale_t)

        def fn(p, x):
            with keras.StatelessScope(state_mapping=[(v, p * 2)]):
                return f(x)
        return fn
    if route == "parameter":  # an nn.Parameter read through self, swapped by functional_call
        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(2))

            def forward(self, x):
                @customgrad.custom_gradient
                def f(x):
                    return body(x, self.w), hidden_grad(x, self.w, scale_t)
                return f(x)
        module = Module()
        return lambda p, x: torch.func.functional_call(module, {"w": p * 2}, (x,))
    raise ValueError(route)


def plain(p, x, scale_t=1.0):
    """The same body under plain autodiff (t's derivative scaled by `scale_t`, as `exact`)."""
    t = p * 2
    t = t.detach() + scale_t * (t - t.detach())
    return body(x, t)


def jvp_of(transform, fn, p, x, dp, dx):
    if transform == "func.jvp":
        return torch.func.jvp(fn, (p, x), (dp, dx))[1]
    if transform == "customgrad.jvp":
        return customgrad.jvp(fn, (p, x), (dp, dx))[1]
    if transform == "jacfwd":
        jp, jx = torch.func.jacfwd(fn, argnums=(0, 1))(p, x)
        return jp @ dp + jx @ dx
    if transform == "vmap of dual":  # dual tensors under torch.vmap: a batch of one
        fn, p, x, dp, dx = torch.vmap(fn), p[None], x[None], dp[None], dx[None]
    with forward_ad.dual_level():
        x_in = forward_ad.make_dual(x, dx) if bool(dx.any()) else x
        tangent = forward_ad.unpack_dual(fn(forward_ad.make_dual(p, dp), x_in)).tangent
    return tangent if transform == "dual" else tangent[0]


P, X = [0.3, -0.7], [1.5, 0.4]


@pytest.mark.parametrize("with_x", [False, True], ids=["x constant", "x with tangent"])
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("route", ROUTES)
def test_every_route_gives_autodiffs_jvp_or_a_named_error(route, transform, with_x):
    p, x = torch.tensor(P), torch.tensor(X)
    dp = torch.tensor([1.0, 2.0])
    dx = torch.tensor([0.5, -1.0]) if with_x else torch.zeros(2)
    truth = torch.func.jvp(plain, (p, x), (dp, dx))[1]
    if route in REFUSED:
        with pytest.raises(customgrad.CustomGradientError, match="being differentiated") as e:
            jvp_of(transform, routed(route), p, x, dp, dx)
        assert REFUSED[route] in str(e.value) and ".f`" in str(e.value)  # names f
        return
    got = jvp_of(transform, routed(route), p, x, dp, dx)
    assert bool(truth.abs().min() > 0.1)  # a zero tangent could not pass
    torch.testing.assert_close(got, truth)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("route", ["keras_variable", "parameter"])
def test_the_hidden_tangent_goes_through_grad_fn_not_fs_own_ops(route, transform):
    """grad_fn's gradient for t, scaled by 3, shows in the JVP: it is derived from grad_fn."""
    p, x = torch.tensor(P), torch.tensor(X)
    dp, dx = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0])
    truth = torch.func.jvp(lambda p, x: plain(p, x, scale_t=3.0), (p, x), (dp, dx))[1]
    got = jvp_of(transform, routed(route, scale_t=3.0), p, x, dp, dx)
    torch.testing.assert_close(got, truth)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_hidden_tangent_grad_fn_cannot_take_is_a_named_error(transform):
    """A tensor a torch module holds stands for a weight (grad_fn's in `variables=`): a grad_fn
    without `variables=` is named."""
    h = torch.nn.Module()

    @customgrad.custom_gradient
    def f(x):
        t = h.t
        return body(x, t), lambda dy: exact(x, t, dy)[0]

    def fn(p, x):
        h.t = p * 2
        return f(x)

    p, x = torch.tensor(P), torch.tensor(X)
    with pytest.raises(msg.TorchHiddenTangentError, match=r"\.f` reaches `h\.t` through an object"):
        jvp_of(transform, fn, p, x, torch.ones(2), torch.ones(2))


def test_a_constant_reached_through_an_object_is_no_hidden_tangent():
    """A tensor f reaches that carries no tangent (made inside the transformed function) is
    not taken for one: grad_fn without variables= is fine."""
    h = types.SimpleNamespace()

    @customgrad.custom_gradient
    def f(x):
        return x * h.c, lambda dy: dy * h.c

    def fn(x):
        h.c = torch.full((2,), 3.0)
        return f(x)

    x = torch.tensor(X)
    torch.testing.assert_close(torch.func.jvp(fn, (x,), (torch.ones(2),))[1], torch.full((2,), 3.0))
    torch.testing.assert_close(torch.func.jacfwd(fn)(x), 3.0 * torch.eye(2))
    with forward_ad.dual_level():
        y = fn(forward_ad.make_dual(x, torch.ones(2)))
        torch.testing.assert_close(forward_ad.unpack_dual(y).tangent, torch.full((2,), 3.0))


# --- second order -------------------------------------------------------------------------------
@customgrad.custom_gradient
def square(x):
    return x * x, lambda dy: dy * 2 * x


@customgrad.custom_gradient
def sin_xt(x, t):
    return body(x, t), lambda dy: exact(x, t, dy)


def total(fn):
    return lambda *args: fn(*args).sum()


def test_hessian_of_the_plainest_function():
    x = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(torch.func.hessian(total(square))(x), 2 * torch.eye(3))
    torch.testing.assert_close(torch.func.jacfwd(torch.func.jacrev(square))(x),
                               torch.func.jacfwd(torch.func.jacrev(lambda v: v * v))(x))


@pytest.mark.parametrize("second_order", ["hessian", "jacfwd(jacrev)", "jacrev(jacrev)",
                                          "jvp(grad)", "vmap(hessian)"])
def test_second_order_matches_plain_autodiff(second_order):
    func = torch.func
    x, t = torch.tensor([0.3, -1.2]), torch.tensor([1.5, 0.7])
    argnums = (0, 1)
    transforms = {
        "hessian": lambda g: func.hessian(total(g), argnums=argnums)(x, t),
        "jacfwd(jacrev)": lambda g: func.jacfwd(func.jacrev(g, argnums=argnums),
                                                argnums=argnums)(x, t),
        "jacrev(jacrev)": lambda g: func.jacrev(func.jacrev(total(g), argnums=argnums),
                                                argnums=argnums)(x, t),
        "jvp(grad)": lambda g: func.jvp(func.grad(total(g), argnums=argnums), (x, t),
                                        (torch.ones(2), torch.tensor([0.5, -2.0])))[1],
        "vmap(hessian)": lambda g: func.vmap(func.hessian(total(g), argnums=argnums))(
            x.repeat(3, 1), t.repeat(3, 1)),
    }
    got, truth = transforms[second_order](sin_xt), transforms[second_order](body)
    torch.testing.assert_close(got, truth)


def test_customgrad_hvp_matches_plain_autodiff():
    x, t = torch.tensor([0.3, -1.2]), torch.tensor([1.5, 0.7])
    v, w = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.25])
    got = customgrad.hvp(total(sin_xt), (x, t), (v, w))
    truth = torch.func.jvp(torch.func.grad(total(body), argnums=(0, 1)), (x, t), (v, w))[1]
    torch.testing.assert_close(tuple(got), tuple(truth))


@pytest.mark.parametrize("route", ["parameter"])
def test_hessian_of_a_hidden_route_matches_plain_autodiff(route):
    p, x = torch.tensor(P), torch.tensor(X)
    hessian = lambda fn: torch.func.hessian(total(fn), argnums=(0, 1))(p, x)  # noqa: E731
    torch.testing.assert_close(hessian(routed(route)), hessian(plain))


def test_forward_over_forward_stays_refused():
    with pytest.raises(customgrad.CustomGradientError, match="forward over forward"):
        torch.func.jacfwd(torch.func.jacfwd(total(square)))(torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("with_x", [False, True], ids=["x constant", "x with tangent"])
def test_torchs_forward_mode_idiom_dual_tensors_set_on_a_submodule(with_x):
    """torch's documented idiom (a parameter deleted, a dual tensor set as the module's
    attribute), on a submodule f reaches through self: its tangent goes through grad_fn."""
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(P) * 2)

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            @customgrad.custom_gradient
            def f(x):
                t = self.inner.w
                return body(x, t), hidden_grad(x, t)
            return f(x)

    module, x = Outer(), torch.tensor(X)
    dp, dx = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0]) if with_x else torch.zeros(2)
    truth = torch.func.jvp(plain, (torch.tensor(P), x), (dp, dx))[1]
    with forward_ad.dual_level():
        w = module.inner.w.detach()
        del module.inner.w
        module.inner.w = forward_ad.make_dual(w, 2 * dp)  # t = 2 p
        y = module(forward_ad.make_dual(x, dx) if with_x else x)
        torch.testing.assert_close(forward_ad.unpack_dual(y).tangent, truth)
