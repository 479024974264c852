"""torch, reverse mode: every route by which a differentiated tensor reaches f (an object's
attribute, a list or dict element, a module parameter swapped in by `functional_call`, a Keras
variable bound by `stateless_call`) gives plain autodiff's gradient under torch.func transforms,
torch.compile and eager `.backward()`, with f's own input differentiated at the same time.

Each body is `sin(x * t)` (or `x * t`), `t` computed from the differentiated `p` before f runs,
with a grad_fn that returns the exact gradients (reading `t` the way f read it)."""

import keras
import numpy as np
import pytest

from helpers import npy, only_on, torch_device

pytestmark = only_on("torch")
import torch  # noqa: E402
from torch.func import functional_call, grad, jacrev, vjp, vmap  # noqa: E402

import customgrad  # noqa: E402
from customgrad import CustomGradientError  # noqa: E402


def tensor(values):
    return torch.tensor(values, device=torch_device())


class Holder:
    pass


def read(route, holder):
    return holder.t if route == "attribute" else holder[0] if route == "list" else holder["t"]


def reading(route, holder):
    """A custom-gradient `sin(x * t)` whose `t` is read through `holder` by `route`."""
    @customgrad.custom_gradient
    def f(x):
        t = read(route, holder)

        def grad_fn(dy, variables=None):
            c = dy * torch.cos(x * read(route, holder))
            return (c * t, [c * x]) if variables is not None else c * t
        return torch.sin(x * t), grad_fn

    return f


def loss(route):
    def run(p, x):
        t = p * 2.0
        holder = Holder()
        holder.t = t
        holder = {"attribute": holder, "list": [t], "dict": {"t": t}}[route]
        return reading(route, holder)(x).sum()
    return run


def plain(p, x):
    return torch.sin(x * (p * 2.0)).sum()


TRANSFORMS = {
    "grad": lambda fn, p, x: grad(fn, argnums=(0, 1))(p, x),
    "vjp": lambda fn, p, x: vjp(fn, p, x)[1](torch.ones((), device=p.device)),
    "jacrev": lambda fn, p, x: jacrev(fn, argnums=(0, 1))(p, x),
    "vmap(grad)": lambda fn, p, x: vmap(grad(fn, argnums=(0, 1)), in_dims=(None, 0))(
        p, torch.stack([x, 2.0 * x])),
}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("route", ["attribute", "list", "dict"])
def test_a_tensor_read_through_an_object_is_refused_by_name_under_torch_func(route, transform):
    """t = 2 p, read through an object: refused by name under every torch.func transform, as
    on every backend (it used to get grad_fn's gradient in `variables=` where a walk of one
    level of objects found it, and a refusal one level deeper)."""
    p, x = tensor([0.3, 0.5]), tensor([1.5, -2.0])
    with pytest.raises(CustomGradientError, match="read through an object, which is being "
                                                  "differentiated"):
        TRANSFORMS[transform](loss(route), p, x)


def test_a_closed_over_tensor_under_torch_func_grad_is_still_refused():
    def run(p, x):
        t = p * 2.0

        @customgrad.custom_gradient
        def f(x):
            return x * t, lambda dy: dy * t
        return f(x).sum()

    with pytest.raises(CustomGradientError, match="closes over"):
        grad(run)(tensor([1.0, 2.0]), tensor([3.0, 4.0]))


class Scaled(torch.nn.Module):
    """sin(x * w); `custom` through a custom-gradient function whose grad_fn reads `self.w`."""

    def __init__(self, custom, keyword=False):
        super().__init__()
        self.custom, self.keyword = custom, keyword
        self.w = torch.nn.Parameter(tensor([1.0, 2.0]))

    def forward(self, x):
        if not self.custom:
            return torch.sin(x * self.w)

        @customgrad.custom_gradient
        def f(x, scale=1.0):
            def grad_fn(dy, variables=None):
                c = dy * torch.cos(x * self.w) * scale  # the swapped-in w, as f read it
                return c * self.w if variables is None else (c * self.w, [c * x])
            return torch.sin(x * self.w) * scale, grad_fn
        return f(x, scale=1.0) if self.keyword else f(x)


def test_functional_call_with_grad_and_per_sample_grads_gets_autodiffs_gradient():
    params, x = {"w": tensor([0.5, -0.7])}, tensor([1.5, 2.5])
    xs = torch.stack([x, -x, 3.0 * x])
    results = {}
    for custom in (True, False):
        m = Scaled(custom)

        def run(p, x):
            return functional_call(m, p, (x,)).sum()

        g = grad(run, argnums=(0, 1))(params, x)
        per_sample = vmap(grad(run), in_dims=(None, 0))(params, xs)
        results[custom] = (g[0]["w"], g[1], per_sample["w"])
    for got, want in zip(results[True], results[False]):
        np.testing.assert_allclose(npy(got), npy(want), rtol=1e-6)


def test_functional_call_under_eager_backward_gives_grad_fn_the_swapped_parameter():
    grads = {}
    for custom in (True, False):
        w, x = tensor([0.5, -0.7]).requires_grad_(), tensor([1.5, 2.5]).requires_grad_()
        functional_call(Scaled(custom), {"w": w}, (x,)).sum().backward()
        grads[custom] = (w.grad, x.grad)
    for got, want in zip(grads[True], grads[False]):
        np.testing.assert_allclose(npy(got), npy(want), rtol=1e-6)


@pytest.mark.parametrize("path", ["fast path", "general path"])
def test_functional_call_of_x_alone_gives_grad_fn_the_swapped_parameter(path):
    """The swapped-in value does not require grad (x alone is differentiated): grad_fn reading
    `self.w` in the backward still sees it, not the module's stored zeros (before: a zero
    gradient, silently). A keyword argument takes the general path."""
    grads = {}
    for custom in (True, False):
        w, x = tensor([0.5, -0.7]), tensor([1.5, 2.5]).requires_grad_()
        module = Scaled(custom, keyword=path == "general path")
        functional_call(module, {"w": w}, (x,)).sum().backward()
        grads[custom] = x.grad
    assert np.any(npy(grads[False]) != 0)
    np.testing.assert_allclose(npy(grads[True]), npy(grads[False]), rtol=1e-6)


def test_functional_call_of_x_alone_gives_a_bound_method_the_swapped_parameter():
    """f a bound method of the module (its grad_fn reads `self.w` in the backward)."""
    class Method(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(tensor([1.0, 2.0]))

        def f(self, x):
            return torch.sin(x * self.w), lambda dy: dy * torch.cos(x * self.w) * self.w

        def forward(self, x):
            return customgrad.custom_gradient(self.f)(x)

    w, x = tensor([0.5, -0.7]), tensor([1.5, 2.5]).requires_grad_()
    functional_call(Method(), {"w": w}, (x,)).sum().backward()
    np.testing.assert_allclose(npy(x.grad), npy(torch.cos(x * w) * w), rtol=1e-6)


class ScaledLayer(keras.layers.Layer):
    """sin(x * k), `custom` through a custom-gradient function whose grad_fn reads `self.k`."""

    def __init__(self, custom):
        super().__init__()
        self.custom = custom

    def build(self, shape):
        self.k = self.add_weight(shape=(2,), initializer="ones")

    def call(self, x):
        if not self.custom:
            return keras.ops.sin(x * self.k)

        @customgrad.custom_gradient
        def f(x):
            def grad_fn(dy, variables=None):
                c = dy * keras.ops.cos(x * self.k)  # the value stateless_call bound
                return c * self.k, [c * x]
            return keras.ops.sin(x * self.k), grad_fn
        return f(x)


def test_stateless_call_gives_grad_fn_the_bound_value():
    grads = {}
    for custom in (True, False):
        layer = ScaledLayer(custom)
        layer.build((2,))
        k, x = tensor([0.5, -0.7]).requires_grad_(), tensor([1.5, 2.5]).requires_grad_()
        out, _ = layer.stateless_call([k], [], x)
        out.sum().backward()
        grads[custom] = (k.grad, x.grad)
    for got, want in zip(grads[True], grads[False]):
        np.testing.assert_allclose(npy(got), npy(want), rtol=1e-6)


W = None  # a parameter f reads as a global (made by the test: on Keras's torch device)


@pytest.mark.parametrize("route", ["parameter"])
def test_torch_compile_keeps_the_gradient_of_a_tensor_read_through_an_object(route):
    global W
    W = torch.nn.Parameter(tensor([2.0, 3.0]))
    holder, box = Holder(), [None]

    @customgrad.custom_gradient
    def f(x):
        t = holder.t if route == "attribute" else box[0] if route == "list" else W
        return x * t, lambda dy, variables=None: (dy * t, [dy * x])

    def run(p, x, f):
        t = p * 2.0 if route != "parameter" else W
        holder.t = box[0] = t
        return (f(x) * p).sum()

    def body(x):  # plain autodiff of the same body
        return x * (holder.t if route != "parameter" else W)

    grads = {}
    for name, fn, g in [("compiled", torch.compile(run), f), ("plain", run, body)]:
        W.grad = None
        p, x = tensor([1.0, 2.0]).requires_grad_(), tensor([3.0, 4.0]).requires_grad_()
        fn(p, x, g).backward()
        grads[name] = (p.grad, x.grad, W.grad)
    for got, want in zip(grads["compiled"], grads["plain"]):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(npy(got), npy(want))


@pytest.mark.parametrize("route", ["attribute", "list"])
def test_torch_compile_refuses_a_computed_tensor_read_through_an_object(route):
    holder, box = Holder(), [None]

    @customgrad.custom_gradient
    def f(x):
        t = holder.t if route == "attribute" else box[0]
        return x * t, lambda dy, variables=None: (dy * t, [dy * x])

    def run(p, x):
        holder.t = box[0] = p * 2.0
        return (f(x) * p).sum()

    p, x = tensor([1.0, 2.0]).requires_grad_(), tensor([3.0, 4.0]).requires_grad_()
    with pytest.raises(CustomGradientError, match="which is being differentiated"):
        torch.compile(run)(p, x).backward()


def test_torch_compile_fullgraph_names_why_the_call_breaks_the_graph():
    holder = Holder()

    @customgrad.custom_gradient
    def f(x):
        return x * holder.t, lambda dy, variables=None: (dy * holder.t, [dy * x])

    p, x = tensor([1.0, 2.0]).requires_grad_(), tensor([3.0, 4.0]).requires_grad_()
    holder.t = p * 2.0
    with pytest.raises(Exception, match="customgrad: f reaches a tensor that requires grad"):
        torch.compile(lambda x: f(x).sum(), fullgraph=True)(x)


def test_vjp_with_no_differentiable_primal_returns_none_gradients():
    v = keras.Variable([2.0, 3.0])

    @customgrad.custom_gradient
    def f(n):
        return keras.ops.cast(n, "float16") * v, lambda dy, variables=None: (None, [dy])

    y, back = customgrad.vjp(f, tensor([1, 2]))
    assert back(keras.ops.ones_like(y)) == (None,)
    y, back = customgrad.vjp(lambda: v * 2.0)
    assert back(keras.ops.ones_like(y)) == ()
