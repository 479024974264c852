"""The route x transform grid: every way a differentiated value reaches a custom-gradient f
(positional or keyword argument, closure cell, object attribute, list or dict element, a
variable, a parameter swapped in functionally, and generated nested routes), each with and
without f's own input differentiated too, and with f's input alone differentiated (`X_ONLY`),
under every transform the backend has (reverse mode eager and compiled,
compiled autograd's traced backward of an eager forward, second order, jacobians, forward mode,
per-sample gradients; the framework's API and customgrad's). Each cell compares customgrad
with plain autodiff of the same body and is

    ok       grad_fn's value (which is SCALE times plain autodiff's)
    autodiff plain autodiff's value for a value grad_fn's gradient does not reach: autodiff
             took it through f's own operations (documented where it happens)
    refused  a named customgrad.CustomGradientError
    silent   a value that differs from plain autodiff (zeros, None, part of it)
    bare     any other exception

Run on the Keras backend of this process; prints one JSON line per cell:

    KERAS_BACKEND=torch python tests/differential/routes.py [--only ROUTE:TRANSFORM ...]

`python tests/differential/routes.py --all` runs every backend (one process each) and prints the
counts; `--table` writes the markdown table docs/convention.md holds (see `grid_table`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import operator
import os
import runpy
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AUTODIFF = runpy.run_path(os.path.join(ROOT, "python", "customgrad", "_backend_names.py"))[
    "AUTODIFF"]
STATUSES = ("ok", "autodiff", "refused", "silent", "bare")

# the body is y = sin(x * t) with t = 2 p computed before f runs; x, p of shape (2,)
X, P = [0.3, -0.7], [0.5, 1.2]
W = [1.0, -2.0]  # the loss is sum(w * y): w is the cotangent
TX, TP = [0.4, 0.9], [-0.6, 0.25]  # tangents
XS = [[0.3, -0.7], [1.1, 0.2], [-0.4, 0.5]]  # a batch, for per-sample gradients


# ----------------------------------------------------------------------------- the routes
# A route builds fn(x, p) -> y. `custom`: f is a customgrad function whose grad_fn returns the
# exact gradients (and, for every variable it receives, the gradient of t: the only value a
# route hides is t); else f is the plain body. Stateful routes (`STATEFUL`) differentiate a
# variable itself, under the tape-like transforms only.

def _body(x, t):
    from keras import ops
    return ops.sin(ops.multiply(x, t))


# grad_fn returns SCALE times the exact gradients: a derivative that grad_fn defined is SCALE
# times plain autodiff's (also second order and forward mode: grad_fn is linear in dy), one that
# autodiff took through f's own operations instead is plain autodiff's (what a NaN-prone f such
# as log1pexp would give), and anything else is wrong
SCALE = 3.0


def _grads(dy, x, t):
    from keras import ops
    c = ops.multiply(ops.multiply(dy, SCALE), ops.cos(ops.multiply(x, t)))
    return ops.multiply(c, t), ops.multiply(c, x)


# options of customgrad.custom_gradient for the cell being run: on jax, forward-mode transforms
# take a function built with forward_mode=True (docs/forward-mode.md); reverse-only ones are
# refused by name under customgrad.jvp and by jax's own error under jax.jvp
_OPTIONS: dict = {}
JAX_FORWARD = ("jacfwd", "jvp", "customgrad.jvp")


def _decorate(f):
    import customgrad
    return customgrad.custom_gradient(f, **_OPTIONS)


def _custom(holder=None, read=None, reread=False):
    """A customgrad f(x, t) (no holder) or f(x) that reads t as `read(holder)`: f closes over
    the holder (an object, a list, a dict, a layer's self). `reread`: grad_fn reads t again
    when it runs (as a layer's grad_fn reads `self.w`), instead of using the value f read."""
    if holder is None:
        @_decorate
        def f2(x, t):
            def grad(dy, variables=None):
                gx, gt = _grads(dy, x, t)
                return (gx, gt) if variables is None else ((gx, gt), [gt for _ in variables])
            return _body(x, t), grad
        return f2

    @_decorate
    def f(x):
        t = read(holder)

        def grad(dy, variables=None):
            gx, gt = _grads(dy, x, read(holder) if reread else t)
            return gx if variables is None else (gx, [gt for _ in variables])
        return _body(x, t), grad
    return f


def _twice(p):
    from keras import ops
    return ops.multiply(p, 2.0)


def route_positional(custom):
    def fn(x, p):
        t = _twice(p)
        return _custom()(x, t) if custom else _body(x, t)
    return fn


def route_keyword(custom):
    @_decorate
    def f(x, *, t):
        return _body(x, t), lambda dy: _grads(dy, x, t)[0]

    def fn(x, p):
        t = _twice(p)
        return f(x, t=t) if custom else _body(x, t)
    return fn


def _reading(make_holder, read):
    """A route whose f reads t through a holder made around t each call."""
    def route(custom):
        def fn(x, p):
            holder = make_holder(_twice(p))
            return _custom(holder, read)(x) if custom else _body(x, read(holder))
        return fn
    return route


def route_closure_cell(custom):
    """t is a cell of f's own closure (what `refuse_hidden_inputs` sees)."""
    def fn(x, p):
        t = _twice(p)
        if not custom:
            return _body(x, t)

        @_decorate
        def f(x):
            def grad(dy, variables=None):
                gx, gt = _grads(dy, x, t)
                return gx if variables is None else (gx, [gt for _ in variables])
            return _body(x, t), grad
        return f(x)
    return fn


route_attribute = _reading(lambda t: types.SimpleNamespace(t=t), operator.attrgetter("t"))
route_list = _reading(lambda t: [t], operator.itemgetter(0))
route_dict = _reading(lambda t: {"t": t}, operator.itemgetter("t"))


def route_argument_attribute(custom):
    """t is an attribute of an object f receives positionally (not a structure of tensors:
    grad_fn gives it None)."""
    def fn(x, p):
        holder = types.SimpleNamespace(t=_twice(p))
        if not custom:
            return _body(x, holder.t)

        @_decorate
        def f(x, holder):
            t = holder.t

            def grad(dy, variables=None):
                gx, gt = _grads(dy, x, t)
                return (gx, None) if variables is None else ((gx, None), [gt for _ in variables])
            return _body(x, t), grad
        return f(x, holder)
    return fn


def _module_holding(t):
    """A module of the user's (no file of a library) holding t, and a function of its own that
    reads it: f calls `module.h()` and never names t."""
    module = types.ModuleType("user_state")
    exec("def h():\n    return t\n", module.__dict__)
    module.t = t
    return module


route_module_function = _reading(_module_holding, lambda module: module.h())


class _ScaledLayer:
    """A Keras layer whose call is a customgrad f reading its weight `self.w` (made lazily: the
    class is built after the backend is chosen)."""

    cls = None

    @classmethod
    def make(cls):
        if cls.cls is None:
            import keras

            class Scaled(keras.layers.Layer):
                def __init__(self, custom, reread):
                    super().__init__()
                    self.custom, self.reread = custom, reread
                    self.w = self.add_weight(shape=(2,), initializer="zeros")

                def call(self, x):
                    if not self.custom:
                        return _body(x, self.w)
                    return _custom(self, _weight, self.reread)(x)
            cls.cls = Scaled
        return cls.cls


def _weight(holder):
    return holder.w


def route_stateless_call(custom, reread=False):
    """Keras's layer.stateless_call: the weight's value is swapped for 2 p."""
    layer = _ScaledLayer.make()(custom, reread)
    layer.build((2,))

    def fn(x, p):
        return layer.stateless_call([_twice(p)], [], x)[0]
    return fn


def route_functional_call(custom, reread=False):
    """torch.func.functional_call: a module's parameter swapped for 2 p."""
    import torch

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2))

        def forward(self, x):
            if not custom:
                return _body(x, self.w)
            return _custom(self, _weight, reread)(x)

    module = Module()

    def fn(x, p):
        return torch.func.functional_call(module, {"w": _twice(p)}, (x,))
    return fn


# The reach axis: routes generated (seeded) from the ways Python lets f reach a value, nested
# 1 to 4 deep and mixed: an attribute, a list or tuple element, a dict value, a dataclass
# field, a bound method's `self`, a `functools.partial`'s argument, a closure of a closure, a
# generator's value, a property, an attribute `__getattr__` makes, a class attribute. f closes
# over the outermost holder only; the value is found (or not) by what the autodiff recorded,
# whatever the path.

@dataclasses.dataclass
class _Field:
    value: object


class _Getter:
    def __init__(self, value):
        self._value = value

    def get(self):
        return self._value


class _Property:
    def __init__(self, value):
        self._value = value

    @property
    def value(self):
        return self._value


class _Dynamic:
    """An object whose attribute is made by `__getattr__` (as proxies and lazy configs do)."""

    def __init__(self, value):
        self.__dict__["_values"] = {"value": value}

    def __getattr__(self, name):
        return self._values[name]


def _class_holding(value):
    """A class made for the value, holding it as a class attribute."""
    return type("Holder", (), {"value": value})


def _closure_of_closure(value):
    def outer():
        def inner():
            return value
        return inner
    return outer()


def _generator(value):
    while True:
        yield value


def _called(holder):
    return holder()


# name -> (wrap(value) -> holder, unwrap(holder) -> value)
_WRAPPERS = {
    "attribute": (lambda v: types.SimpleNamespace(v=v), operator.attrgetter("v")),
    "list": (lambda v: [v], operator.itemgetter(0)),
    "tuple": (lambda v: (v,), operator.itemgetter(0)),
    "dict": (lambda v: {"k": v}, operator.itemgetter("k")),
    "dataclass": (_Field, operator.attrgetter("value")),
    "bound method": (lambda v: _Getter(v).get, _called),
    "partial": (lambda v: functools.partial(_itself, v), _called),
    "closure of closure": (_closure_of_closure, _called),
    "generator": (lambda v: _generator(v), next),
    "property": (_Property, operator.attrgetter("value")),
    "__getattr__": (_Dynamic, operator.attrgetter("value")),
    "class attribute": (_class_holding, operator.attrgetter("value")),
}


def reach_route(path):
    """The route through `path` (wrapper names, innermost first): t wrapped in each in turn;
    f reads it back by unwrapping, outermost first."""
    wraps = [_WRAPPERS[name][0] for name in path]
    unwraps = [_WRAPPERS[name][1] for name in reversed(path)]

    def make(t):
        for wrap in wraps:
            t = wrap(t)
        return t

    def read(holder):
        for unwrap in unwraps:
            holder = unwrap(holder)
        return holder
    return _reading(make, read)


def generated_paths(n=8, seed=55):
    """`n` paths of 1 to 4 wrappers (seeded): every wrapper once alone at depth 1 first would
    take too many cells, so each path mixes; together they cover every wrapper."""
    import random

    rng = random.Random(seed)
    names = list(_WRAPPERS)
    paths = []
    while len(paths) < n:
        depth = 1 + len(paths) % 4
        path = tuple(rng.choice(names) for _ in range(depth))
        if path not in paths:
            paths.append(path)
    missing = [w for w in names if not any(w in p for p in paths)]
    for k, w in enumerate(missing):  # every wrapper appears somewhere
        paths[k % n] = (*paths[k % n][:-1], w) if len(paths[k % n]) > 1 else (w,)
    return paths


REACH_ROUTES = {"reach: " + " > ".join(reversed(path)): reach_route(path)
                for path in generated_paths()}


ROUTES = {
    "positional": route_positional,
    "keyword": route_keyword,
    "closure cell": route_closure_cell,
    "attribute": route_attribute,
    "list element": route_list,
    "dict element": route_dict,
    "attribute of an argument": route_argument_attribute,
    "module function": route_module_function,
    "stateless_call": route_stateless_call,
    "functional_call": route_functional_call,
    "stateless_call, grad_fn reads self.w": functools.partial(route_stateless_call,
                                                              reread=True),
    "functional_call, grad_fn reads self.w": functools.partial(route_functional_call,
                                                               reread=True),
    **REACH_ROUTES,
}
ROUTE_BACKENDS = {"functional_call": ("torch",),
                  "functional_call, grad_fn reads self.w": ("torch",)}


def stateful_keras_variable(custom, value):
    """A keras.Variable read inside f; returns (fn(x), the tensor to differentiate)."""
    import keras

    v = keras.Variable(value)
    fn = (lambda x: _custom(v, _itself)(x)) if custom else (lambda x: _body(x, v))
    return fn, v


def _itself(holder):
    return holder


def stateful_tf_variable(custom, value):
    import tensorflow as tf

    v = tf.Variable(value)
    fn = (lambda x: _custom(v, _itself)(x)) if custom else (lambda x: _body(x, v))
    return fn, v


def stateful_parameter(custom, value):
    """An nn.Parameter of a module, read through self."""
    import torch

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(value.detach().clone())

        def forward(self, x):
            return _custom(self, _weight)(x) if custom else _body(x, self.w)

    m = Module()
    return m, m.w


STATEFUL = {
    "keras.Variable": (stateful_keras_variable, ("tensorflow", "torch")),
    "tf.Variable": (stateful_tf_variable, ("tensorflow",)),
    "nn.Parameter": (stateful_parameter, ("torch",)),
}


# ------------------------------------------------------------------------- the transforms
# A transform takes fn(x, p), the primals and `own` (x differentiated too) and returns the
# derivatives as a list of arrays (None where the framework gave none).

def _np(t):
    import keras
    return None if t is None else keras.ops.convert_to_numpy(t)


# `own`, per cell: False (p differentiated, x data), True (both), X_ONLY (x alone, p data: the
# value reaching f by the route is not differentiated)
X_ONLY = "x only"


def _wrt(own, x, p) -> list:
    """The arguments a cell differentiates (see X_ONLY)."""
    return [x] if own == X_ONLY else [x, p] if own else [p]


def _argnums(own):
    return 0 if own == X_ONLY else (0, 1) if own else 1


def _with_data_x(transform):
    """For a transform over fn's differentiated arguments only: the others as data."""
    @functools.wraps(transform)
    def run(fn, x, p, own):
        if own == X_ONLY:
            return transform(lambda q: fn(q, p), (x,), (TX,))
        if own:
            return transform(fn, (x, p), (TX, TP))
        return transform(lambda q: fn(x, q), (p,), (TP,))
    return run


def _customgrad_transforms():
    import customgrad

    @_with_data_x
    def cg_grad(fn, primals, _):
        g = customgrad.grad(_scalar_loss(fn), argnums=tuple(range(len(primals))))(*primals)
        return [_np(v) for v in g]

    @_with_data_x
    def cg_jvp(fn, primals, tangents):
        tangents = tuple(_constant(t) for t in tangents)
        return [_np(customgrad.jvp(fn, primals, tangents)[1])]

    return {"customgrad.grad": cg_grad, "customgrad.jvp": cg_jvp}


def _scalar_loss(fn):
    """sum(w * fn(*args)): the scalar the reverse-mode transforms differentiate."""
    from keras import ops
    w = _constant(W)
    return lambda *a: ops.sum(ops.multiply(fn(*a), w))


def jax_transforms():
    import jax
    import jax.numpy as jnp

    def over(make):
        @_with_data_x
        def run(fn, primals, tangents):
            out = make(fn, primals, tangents, tuple(range(len(primals))))
            return [_np(v) for v in jax.tree_util.tree_leaves(out)]
        return run

    def vmap_grad(fn, x, p, own):
        xs = jnp.asarray(XS)
        nums = _argnums(own)
        g = jax.vmap(jax.grad(_scalar_loss(fn), argnums=nums), in_axes=(0, None))(xs, p)
        return [_np(v) for v in jax.tree_util.tree_leaves(g)]

    return {
        "grad": over(lambda fn, a, t, n: jax.grad(_scalar_loss(fn), argnums=n)(*a)),
        "jit(grad)": over(lambda fn, a, t, n: jax.jit(
            jax.grad(_scalar_loss(fn), argnums=n))(*a)),
        "grad(jit)": over(lambda fn, a, t, n: jax.grad(
            jax.jit(_scalar_loss(fn)), argnums=n)(*a)),
        "vjp": over(lambda fn, a, t, n: jax.vjp(fn, *a)[1](jnp.asarray(W))),
        "jacrev": over(lambda fn, a, t, n: jax.jacrev(fn, argnums=n)(*a)),
        "hessian": over(lambda fn, a, t, n: jax.hessian(_scalar_loss(fn),
                                                        argnums=n)(*a)),
        "jacfwd": over(lambda fn, a, t, n: jax.jacfwd(fn, argnums=n)(*a)),
        "jvp": over(lambda fn, a, t, n: jax.jvp(fn, a, tuple(jnp.asarray(v) for v in t))[1]),
        "vmap(grad)": vmap_grad,
        **_customgrad_transforms(),
    }


def torch_transforms():
    import torch
    from torch.autograd import forward_ad

    tensor = _constant

    def func(make):
        @_with_data_x
        def run(fn, primals, tangents):
            out = make(fn, primals, tangents, tuple(range(len(primals))))
            return [_np(v) for v in torch.utils._pytree.tree_leaves(out)]
        return run

    def tape(second_order=False, compiled=False, fullgraph=False, compiled_backward=False):
        def run(fn, x, p, own):
            x = x.clone().requires_grad_(bool(own))
            p = p.clone().requires_grad_(own != X_ONLY)
            if compiled:
                fn = torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)
            loss = (fn(x, p) * tensor(W)).sum()
            return _torch_gradients(loss, tuple(_wrt(own, x, p)), second_order,
                                    compiled_backward, _wrt(own, TX, TP))
        return run

    def dual(fn, x, p, own):
        with forward_ad.dual_level():
            pd = p if own == X_ONLY else forward_ad.make_dual(p, tensor(TP))
            xd = forward_ad.make_dual(x, tensor(TX)) if own else x
            return [_np(forward_ad.unpack_dual(fn(xd, pd)).tangent)]

    def vmap_grad(fn, x, p, own):
        nums = _argnums(own)
        g = torch.func.vmap(torch.func.grad(_scalar_loss(fn), argnums=nums),
                            in_dims=(0, None))(tensor(XS), p)
        return [_np(v) for v in torch.utils._pytree.tree_leaves(g)]

    def t_of(t):
        return tuple(tensor(v) for v in t)

    return {
        "backward": tape(),
        "grad of grad": tape(second_order=True),
        "torch.compile": tape(compiled=True),
        "torch.compile(fullgraph)": tape(compiled=True, fullgraph=True),
        "compiled autograd": tape(compiled_backward=True),
        "func.grad": func(lambda fn, a, t, n: torch.func.grad(
            _scalar_loss(fn), argnums=n)(*a)),
        "func.vjp": func(lambda fn, a, t, n: torch.func.vjp(fn, *a)[1](tensor(W))),
        "jacrev": func(lambda fn, a, t, n: torch.func.jacrev(fn, argnums=n)(*a)),
        "hessian": func(lambda fn, a, t, n: torch.func.hessian(
            _scalar_loss(fn), argnums=n)(*a)),
        "jacfwd": func(lambda fn, a, t, n: torch.func.jacfwd(fn, argnums=n)(*a)),
        "func.jvp": func(lambda fn, a, t, n: torch.func.jvp(fn, a, t_of(t))[1]),
        "forward_ad": dual,
        "vmap(grad)": vmap_grad,
        **_customgrad_transforms(),
    }


def tensorflow_transforms():
    import tensorflow as tf

    def tape(kind="eager"):
        def run(fn, x, p, own):
            def grads(x, p):
                body = tf.function(fn) if kind == "around tf.function" else fn
                watched = [x] if own == X_ONLY else [x, p]
                return _tf_gradients(lambda: body(x, p), watched, _wrt(own, x, p),
                                     kind == "second order", _wrt(own, TX, TP))
            if kind == "tf.function":
                grads = tf.function(grads)
            elif kind == "xla":
                grads = tf.function(grads, jit_compile=True)
            return [_np(g) for g in grads(x, p)]
        return run

    def jacobian(fn, x, p, own):
        with tf.GradientTape() as t:
            t.watch([x] if own == X_ONLY else [x, p])
            y = fn(x, p)
        return [_np(g) for g in t.jacobian(y, _wrt(own, x, p))]

    def accumulator(in_function):
        def run(fn, x, p, own):
            def jvp(x, p):
                primals = _wrt(own, x, p)
                tangents = [tf.constant(v) for v in _wrt(own, TX, TP)]
                with tf.autodiff.ForwardAccumulator(primals, tangents) as acc:
                    y = fn(x, p)
                return acc.jvp(y)
            return [_np((tf.function(jvp) if in_function else jvp)(x, p))]
        return run

    return {
        "tape": tape(),
        "tape in tf.function": tape("tf.function"),
        "tape around tf.function": tape("around tf.function"),
        "tape in XLA": tape("xla"),
        "second order": tape("second order"),
        "jacobian": jacobian,
        "ForwardAccumulator": accumulator(False),
        "ForwardAccumulator in tf.function": accumulator(True),
        **_customgrad_transforms(),
    }


TRANSFORMS = {"jax": jax_transforms, "torch": torch_transforms,
              "tensorflow": tensorflow_transforms}
# the transforms a stateful route (a variable differentiated itself) runs under
def compiled_autograd():
    """torch's compiled autograd around a backward of an eager forward: dynamo traces the
    backward graph, the backward of each custom-gradient call's link included."""
    import torch
    from torch._dynamo import compiled_autograd as module

    # `enable` until torch 2.12, `_enable` since (the context manager torch's own tests use)
    enable = getattr(module, "enable", None) or module._enable
    torch._dynamo.reset()
    return enable(torch.compile(backend="eager"))


STATEFUL_TRANSFORMS = {"torch": ("backward", "grad of grad", "compiled autograd"),
                       "tensorflow": ("tape", "tape in tf.function", "tape around tf.function",
                                      "second order")}


def _constant(values):
    """A float32 tensor of the backend on Keras's default device."""
    import keras
    return keras.ops.convert_to_tensor(values, dtype="float32")


def _directional(first, directions) -> list:
    """The terms <g, v> of the second-order transforms: each first derivative against its
    input's tangent (`directions`: x's TX, p's TP, as `_wrt` gives them)."""
    return [(g, _constant(v)) for g, v in zip(first, directions)]


def _torch_gradients(loss, inputs, second_order, compiled_backward=False, directions=None):
    """torch.autograd's derivatives of `loss` (second order: of its directional derivative;
    `compiled_backward`: the backward under compiled autograd)."""
    import torch

    if compiled_backward:
        with compiled_autograd():
            return _torch_gradients(loss, inputs, second_order, directions=directions)
    if not second_order:
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    else:
        first = torch.autograd.grad(loss, inputs, create_graph=True)
        total = sum((g * v).sum() for g, v in _directional(first, directions))
        grads = torch.autograd.grad(total, inputs, allow_unused=True)
    return [_np(None if g is None else g.detach()) for g in grads]


def _tf_gradients(output, watched, inputs, second_order, directions=None):
    """A GradientTape's derivatives of sum(w * output()) (second order: nested tapes, of its
    directional derivative)."""
    import tensorflow as tf

    with tf.GradientTape(persistent=True) as outer:
        outer.watch(watched)
        with tf.GradientTape() as tape:
            tape.watch(watched)
            loss = tf.reduce_sum(output() * tf.constant(W))
        first = tape.gradient(loss, inputs)
        if not second_order:
            return first
        total = tf.add_n([tf.reduce_sum(g * v) for g, v in _directional(first, directions)])
    return outer.gradient(total, inputs)


def stateful_run(backend, transform, make, custom, own):
    """A stateful route under a tape-like transform: the derivative with respect to the variable
    (and x when `own`)."""
    import keras

    fn, var = make(custom, _constant(P) * 2.0)
    target = var.value if isinstance(var, keras.Variable) else var
    second_order = transform in ("grad of grad", "second order")
    if backend == "torch":
        x = _constant(X).requires_grad_(own)
        loss = (fn(x) * _constant(W)).sum()
        return _torch_gradients(loss, (x, target) if own else (target,), second_order,
                                transform == "compiled autograd", _wrt(own, TX, TP))
    import tensorflow as tf

    body = tf.function(fn) if transform == "tape around tf.function" else fn

    def grads(x):
        return _tf_gradients(lambda: body(x), [x, target], [x, target] if own else [target],
                             second_order, _wrt(own, TX, TP))
    if transform == "tape in tf.function":
        grads = tf.function(grads)
    return [_np(g) for g in grads(_constant(X))]


# ------------------------------------------------------------------------------ the cells

def cells(backend: str) -> list:
    """(route, own, transform) for every cell of the backend's grid."""
    out = []
    transforms = list(TRANSFORMS[backend]().keys())
    for route in ROUTES:
        if backend not in ROUTE_BACKENDS.get(route, (backend,)):
            continue
        for own in (False, True, X_ONLY):
            out += [(route, own, t) for t in transforms]
    for route, (_, backends) in STATEFUL.items():
        if backend in backends:
            for own in (False, True):
                out += [(route, own, t) for t in STATEFUL_TRANSFORMS[backend]]
    return out


def row_name(route, own) -> str:
    """The row of a cell's route and `own`: `route`, `route + x`, `route, x only`."""
    return route + (", x only" if own == X_ONLY else " + x" if own else "")


def cell_id(route, own, transform) -> str:
    return f"{row_name(route, own)} | {transform}"


def _named(error) -> bool:
    """A customgrad.CustomGradientError, raised as it is or as the cause a framework re-raised
    it with (tf.function's staging, torch.compile's)."""
    import customgrad

    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, customgrad.CustomGradientError):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _compare(want, got) -> str:
    """'ok' where every derivative is SCALE times plain autodiff's (`want`), 'autodiff' where
    some are plain autodiff's and the rest SCALE times it, else 'silent'."""
    import numpy as np

    if len(want) != len(got):
        return "silent"
    found = set()
    for a, b in zip(want, got):
        a = None if a is None else np.asarray(a)
        b = None if b is None else np.asarray(b)
        if a is None or b is None:
            present = a if b is None else b
            if present is not None and np.any(present != 0):
                return "silent"
            continue
        if np.shape(a) != np.shape(b):
            return "silent"
        if not np.any(a != 0):
            if np.any(np.abs(b) > 1e-5):
                return "silent"
        elif np.allclose(b, SCALE * a, rtol=1e-4, atol=1e-5):
            found.add("ok")
        elif np.allclose(b, a, rtol=1e-4, atol=1e-5):
            found.add("autodiff")
        else:
            return "silent"
    return "autodiff" if "autodiff" in found else "ok"


def run_cell(backend, route, own, transform) -> dict:
    """One cell: plain autodiff's value, customgrad's, and the status."""
    import keras

    if route in STATEFUL:
        make = STATEFUL[route][0]
        run = functools.partial(stateful_run, backend, transform, make)

        def compute(custom):
            return run(custom, own)
    else:
        transform_fn = TRANSFORMS[backend]()[transform]
        x, p = keras.ops.convert_to_tensor(X), keras.ops.convert_to_tensor(P)

        def compute(custom):
            return transform_fn(ROUTES[route](custom), x, p, own)
    cell = {"backend": backend, "route": route, "own": own, "transform": transform}
    _OPTIONS.clear()
    if backend == "jax" and transform in JAX_FORWARD:
        _OPTIONS["forward_mode"] = True
    try:
        want = compute(False)
    except Exception as error:  # plain autodiff cannot: no cell
        return {**cell, "status": "n/a", "detail": f"{type(error).__name__}: {error}"[:300]}
    try:
        got = compute(True)
    except Exception as error:
        status = "refused" if _named(error) else "bare"
        return {**cell, "status": status, "detail": f"{type(error).__name__}: {error}"[:300]}
    status = _compare(want, got)
    return {**cell, "status": status,
            "detail": "" if status == "ok" else
            f"plain {_show(want)}, customgrad {_show(got)} (grad_fn gives {SCALE:g}x)"[:300]}


def _show(values) -> str:
    import numpy as np
    return str([None if v is None else np.round(np.asarray(v), 4).tolist() for v in values])


def run_backend(only=None) -> list:
    import keras

    backend = keras.backend.backend()
    results = []
    for route, own, transform in cells(backend):
        if only and cell_id(route, own, transform) not in only:
            continue
        result = run_cell(backend, route, own, transform)
        print(json.dumps(result), flush=True)
        results.append(result)
    return results


# --------------------------------------------------------------------------- all backends

# cells known to be silent or bare and not fixed yet: cell id -> why. Printed by --all and by
# the test, not failing them; an entry goes when its fix lands.
KNOWN_DEFECTS: dict = {}

DOCS_PAGE = os.path.join(ROOT, "docs", "convention.md")
TABLE_START, TABLE_END = "<!-- route-grid:start -->", "<!-- route-grid:end -->"


def installed(backend: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(backend) is not None


def run_all(python=sys.executable, only=None, backends=AUTODIFF) -> dict:
    """{backend: [cell results]}, each backend in a process of its own."""
    results = {}
    for backend in backends:
        env = dict(os.environ, KERAS_BACKEND=backend)
        args = [python, os.path.abspath(__file__)]
        for cell in only or ():
            args += ["--only", cell]
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            raise RuntimeError(f"routes.py on {backend} exited {proc.returncode}:\n"
                               f"{proc.stderr[-3000:]}")
        results[backend] = rows
    return results


def counts(rows) -> dict:
    return {s: sum(r["status"] == s for r in rows) for s in (*STATUSES, "n/a")}


SYMBOL = {"ok": "✓", "autodiff": "A", "refused": "R", "silent": "SILENT", "bare": "BARE",
          "n/a": "–"}  # noqa: RUF001  (a dash, as the table shows it)


def grid_table(results: dict) -> str:
    """The markdown tables of docs/convention.md: per backend, a row per route (± x) and a
    column per transform; ✓ grad_fn's value, A autodiff's through f's own operations for a value
    grad_fn's gradient does not reach, R a named refusal, – plain autodiff cannot."""  # noqa: RUF002
    lines = []
    for backend, rows in results.items():
        transforms = list(dict.fromkeys(r["transform"] for r in rows))
        by_row = {}
        for r in rows:
            key = row_name(r["route"], r["own"])
            by_row.setdefault(key, {})[r["transform"]] = SYMBOL[r["status"]]
        lines += [f"**{backend}**", "", "| route | " + " | ".join(transforms) + " |",
                  "|---|" + "---|" * len(transforms)]
        for key, row in by_row.items():
            lines.append(f"| {key} | " + " | ".join(row.get(t, " ") for t in transforms) + " |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# The backend-agnostic transforms, the same call on every backend: their verdicts must agree
# (`verdict_differences`), row by row, wherever the backends share a route
SHARED_TRANSFORMS = ("customgrad.grad", "customgrad.jvp")
# "backend: row | transform" -> why that backend cannot give the others' verdict there (each
# said in docs/convention.md's paragraph on the rule); empty: one verdict everywhere
CANNOT: dict = {}


def parse_table(table: str) -> dict:
    """{backend: {(row, transform): symbol}} of `grid_table`'s markdown (docs/convention.md's)."""
    grids, backend, transforms = {}, None, []
    for line in table.splitlines():
        if line.startswith("**") and line.endswith("**"):
            backend = line.strip("*")
            grids[backend] = {}
        elif line.startswith("| route |"):
            transforms = [c.strip() for c in line.strip("|").split("|")][1:]
        elif line.startswith("| ") and backend is not None:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            for transform, symbol in zip(transforms, cells[1:]):
                if symbol:
                    grids[backend][(cells[0], transform)] = symbol
    return grids


def verdict_differences(grids: dict) -> list:
    """'row | transform: jax ✓, tensorflow R, ...' for each shared transform's cell whose
    verdict differs between the backends that have its row, less those `CANNOT` explains."""
    rows = dict.fromkeys(row for grid in grids.values() for row, _ in grid)
    out = []
    for row in rows:
        for transform in SHARED_TRANSFORMS:
            seen = {b: grid[(row, transform)] for b, grid in grids.items()
                    if (row, transform) in grid}
            if len(set(seen.values())) > 1 and not all(
                    f"{b}: {row} | {transform}" in CANNOT for b in seen):
                out.append(f"{row} | {transform}: "
                           + ", ".join(f"{b} {v}" for b, v in seen.items()))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a cell id: 'ROUTE[ + x|, x only] | TRANSFORM'")
    parser.add_argument("--all", action="store_true", help="every backend, then the counts")
    parser.add_argument("--table", action="store_true", help="with --all: print the tables")
    parser.add_argument("--write-docs", action="store_true",
                        help="with --all: write the tables into docs/convention.md")
    a = parser.parse_args(argv)
    if not a.all:
        run_backend(a.only)
        return 0
    results = run_all(only=a.only)
    bad = 0
    for backend, rows in results.items():
        c = counts(rows)
        bad += c["silent"] + c["bare"]
        print(f"{backend}: " + ", ".join(f"{n} {s}" for s, n in c.items()))
        for r in rows:
            if r["status"] in ("silent", "bare"):
                known = KNOWN_DEFECTS.get(f"{backend}: " + cell_id(r["route"], r["own"],
                                                                   r["transform"]))
                bad -= known is not None
                print(f"  {r['status']}{' (known defect)' if known else ''}: "
                      f"{cell_id(r['route'], r['own'], r['transform'])}: {r['detail']}")
    if a.table:
        print(grid_table(results))
    if a.write_docs:
        write_docs(grid_table(results))
    return 1 if bad else 0


def documented_table(path: str = DOCS_PAGE) -> str:
    """The tables between the route-grid markers of docs/convention.md."""
    text = open(path, encoding="utf-8").read()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[start:end].strip() + "\n"


def write_docs(table: str, path: str = DOCS_PAGE) -> None:
    text = open(path, encoding="utf-8").read()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text[:start] + "\n" + table + text[end:])


if __name__ == "__main__":
    sys.exit(main())
