"""A program's description made real on the active Keras backend: its arguments, and `f`
decorated with `customgrad.custom_gradient`, whose grad_fn has the signature the description
names and returns what it names (see programs.py for the model).

>>> import keras
>>> from programs import program
>>> p = program(0, 1)
>>> f, values, variable = build(p)
>>> f.__name__
'program_0_1'
"""

import keras
import numpy as np
from keras import ops

import customgrad
from programs import arg_leaves, none_leaf
from truth import output_dtype

OPS = {  # op, its derivative
    "identity": (lambda z: z, lambda z: ops.ones_like(z)),
    "sin": (ops.sin, ops.cos),
    "tanh": (ops.tanh, lambda z: ops.subtract(1.0, ops.square(ops.tanh(z)))),
    "exp": (ops.exp, ops.exp),
    "square": (ops.square, lambda z: ops.multiply(z, 2.0)),
    "softplus": (ops.softplus, ops.sigmoid),
    "sigmoid": (ops.sigmoid, lambda z: ops.multiply(ops.sigmoid(z),
                                                    ops.subtract(1.0, ops.sigmoid(z)))),
}


def leaf_object(leaf):
    """A leaf as the program passes it: a backend tensor, a Python or numpy number, an array."""
    kind, values = leaf["kind"], leaf["values"]
    if kind == "pyfloat":
        return float(values)
    if kind == "pyint":
        return int(values)
    if kind == "npscalar":
        return np.dtype(leaf["dtype"]).type(values)
    if kind == "nparray":
        return np.asarray(values, leaf["dtype"])
    return ops.convert_to_tensor(np.asarray(values, leaf["dtype"]))


def assemble(node, values, leaf="leaf"):
    """The argument `node` describes, with leaf i taken from `values[i]` (an output with
    `leaf="out"`)."""
    if leaf in node:
        return values[node[leaf]]
    if "dict" in node:
        return {k: assemble(child, values, leaf) for k, child in node["dict"].items()}
    if "tuple" in node:
        return tuple(assemble(child, values, leaf) for child in node["tuple"])
    return [assemble(child, values, leaf) for child in node["list"]]


def flatten(tree) -> list:
    """The leaves of nested tuples, lists and dicts (keys sorted); None is a leaf."""
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in flatten(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [x for item in tree for x in flatten(item)]
    return [tree]


def leaves_like(tree, node) -> list:
    """The leaves of `tree` (a gradient) at the places of the leaves of argument `node`; a None
    subtree gives None for each leaf below it."""
    if tree is None:
        return [None] * len(arg_leaves(node))
    if "leaf" in node:
        return [tree]
    if "dict" in node:
        return [x for k in sorted(node["dict"]) for x in leaves_like(tree[k], node["dict"][k])]
    children = node.get("tuple", node.get("list"))
    if len(tree) != len(children):
        raise ValueError(f"a gradient has {len(tree)} entries where its argument has "
                         f"{len(children)}")
    return [x for sub, child in zip(tree, children) for x in leaves_like(sub, child)]


def unbroadcast(g, shape):
    """The sum of `g` over the axes broadcasting added to `shape` (customgrad never does it)."""
    shape = tuple(shape)
    extra = len(g.shape) - len(shape)
    if extra:
        g = ops.sum(g, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return ops.sum(g, axis=axes, keepdims=True) if axes else g


def n_upstreams(p) -> int:
    """How many upstreams the rule gives positionally: one per leaf of the output."""
    return len(flatten(assemble(p["output"], range(len(p["outputs"])), leaf="out")))


def build(p):
    """(f, values, variable): the decorated program, its leaves (`values[i]` for leaf i) and
    the keras.Variable it reads (None if none)."""
    values = [leaf_object(leaf) for leaf in p["leaves"]]
    variable = None
    if p["variable"] is not None:
        variable = keras.Variable(np.asarray(p["variable"]["values"], "float32"), name="v")

    def f(*args, **kwargs):
        leaves = flatten(args)
        zs, outs = [], []
        for out in p["outputs"]:
            z = _z(p, out, leaves, kwargs, variable) if out["kind"] == "tensor" else None
            zs.append(z)
            outs.append(_output_leaf(out, z))
        output = assemble(p["output"], outs, leaf="out")
        backward = _backward(p, leaves, zs)
        if p["fault"] == "not_a_pair":
            return output
        if p["fault"] == "grad_fn_not_callable":
            return output, (None if p["index"] % 2 else 3)
        return output, grad_function(p["signature"], n_upstreams(p), backward)

    f.__name__ = f.__qualname__ = f"program_{p['seed']}_{p['index']}"
    return customgrad.custom_gradient(f), values, variable


def _z(p, out, leaves, kwargs, variable):
    """z in the output's dtype (float64 where a term is float64): each term is cast to it, so
    the program does not depend on how a backend promotes mixed dtypes."""
    dtype = output_dtype(p, out)
    z = ops.zeros((), dtype)
    for i, c in out["terms"]:
        z = ops.add(z, ops.multiply(ops.cast(leaves[i], dtype), c))
    if out["var_coef"] is not None:
        z = ops.add(z, ops.multiply(ops.cast(variable, dtype), out["var_coef"]))
    for leaf, description in zip(leaves, p["leaves"]):
        if description["kind"] in ("pyint", "inttensor"):
            z = ops.add(z, ops.multiply(ops.sum(ops.cast(leaf, dtype)), 0.125))
    for name in sorted(kwargs):
        if isinstance(kwargs[name], float):
            z = ops.add(z, kwargs[name])
        else:
            z = ops.add(z, ops.multiply(ops.sum(ops.cast(kwargs[name], dtype)), 0.125))
    return z


def _output_leaf(out, z):
    if out["kind"] == "none":
        return None
    if out["kind"] == "const":
        return out["value"]
    y = OPS[out["op"]][0](z)
    if out["reduce"] == "none":
        return y
    # a mean as sum / size: Keras's own ops.mean computes a float64 mean in float32 on jax and
    # torch (its result_type makes 64-bit types 32-bit), which would hide the float64 cases
    size = float(np.prod(z.shape))
    return ops.sum(y) if out["reduce"] == "sum" else ops.divide(ops.sum(y), size)


def _backward(p, leaves, zs):
    """grad_fn's body: from what it received (an upstream structure, or one per output) and the
    variables, the exact gradient times `scale`, returned as the description says."""
    def backward(received, variables):
        upstreams = flatten(received)
        grads, var_grad = {}, None
        for out, z, dy in zip(p["outputs"], zs, upstreams):
            if z is None or dy is None:
                continue
            if out["reduce"] != "none":
                dy = ops.broadcast_to(dy, z.shape)
                if out["reduce"] == "mean":
                    dy = ops.divide(dy, float(np.prod(z.shape)))
            gz = ops.multiply(ops.multiply(dy, OPS[out["op"]][1](z)), p["scale"])
            for i, c in out["terms"]:
                g = ops.multiply(unbroadcast(gz, p["leaves"][i]["shape"]), c)
                grads[i] = g if i not in grads else ops.add(grads[i], g)
            if out["var_coef"] is not None:
                g = ops.multiply(unbroadcast(gz, p["variable"]["shape"]), out["var_coef"])
                var_grad = g if var_grad is None else ops.add(var_grad, g)
        grad_xs = _shaped(p, grads, leaves)
        if not variables:
            return grad_xs
        return grad_xs, ([var_grad, var_grad] if p["fault"] == "variable_count" else [var_grad])
    return backward


def _shaped(p, grads, leaves):
    """The gradients for the arguments in the form `returns` (or the fault) names."""
    fault, returns = p["fault"], p["returns"]
    if fault == "wrong_shape":
        grads[0] = ops.zeros(tuple(p["leaves"][0]["shape"]) + (2,))
    elif fault == "string_gradient":
        grads[0] = "oops"
    elif fault is None and returns == "none_leaf":
        grads.pop(none_leaf(p), None)
    elif fault is None and returns == "none_all":
        return None
    if returns == "flat" or fault == "extra_gradients":
        flat = [grads.get(i) for i, leaf in enumerate(p["leaves"]) if leaf["kind"] != "pyint"]
        if fault == "extra_gradients":  # longer than the arguments, their leaves, any subtree
            flat += [None] * (len(p["leaves"]) + 2 - len(flat))
        return flat
    per_arg = [assemble(arg, [grads.get(i) for i in range(len(leaves))]) for arg in p["args"]]
    if len(per_arg) == 1 and returns != "list":
        return per_arg[0]
    return list(per_arg) if returns == "list" else tuple(per_arg)


class _CallableGrad:
    """A grad_fn that is an object with `__call__` (its signature read by inspect)."""

    def __init__(self, backward):
        self.backward = backward

    def __call__(self, dy):
        return self.backward(dy, None)


def grad_function(signature: str, n: int, backward):
    """A grad_fn with the named signature; `n`: upstreams given one per output."""
    if signature in ("positional", "too_many"):
        return _POSITIONAL[n + (signature == "too_many")](backward)
    if signature == "callable_object":
        return _CallableGrad(backward)
    return _SIGNATURES[signature](backward)


_POSITIONAL = {  # grad_fns taking exactly n upstreams positionally
    1: lambda b: lambda a: b(a, None),
    2: lambda b: lambda a, c: b((a, c), None),
    3: lambda b: lambda a, c, d: b((a, c, d), None),
    4: lambda b: lambda a, c, d, e: b((a, c, d, e), None),
    5: lambda b: lambda a, c, d, e, g: b((a, c, d, e, g), None),
    6: lambda b: lambda a, c, d, e, g, h: b((a, c, d, e, g, h), None),
}


def _dy(b):
    def grad(dy):
        return b(dy, None)
    return grad


def _star(b):
    def grad(*dys):
        return b(dys, None)
    return grad


def _upstream_only(b):
    def grad(*, upstream):
        return b(upstream, None)
    return grad


def _upstream_named(b):
    def grad(upstream):
        return b(upstream, None)
    return grad


def _star_upstream(b):
    def grad(*args, upstream=None):
        return b(upstream, None)
    return grad


def _star_upstream_required(b):
    def grad(*args, upstream):
        return b(upstream, None)
    return grad


def _dy_variables(b):
    def grad(dy, variables=None):
        return b(dy, variables)
    return grad


def _star_variables(b):
    def grad(*dys, variables=None):
        return b(dys, variables)
    return grad


def _kwargs(b):
    def grad(*dys, **kwargs):  # tf.custom_gradient's: **kwargs gets variables= only
        assert "upstream" not in kwargs, sorted(kwargs)
        return b(dys, kwargs.get("variables"))
    return grad


def _required_keyword(b):
    def grad(dy, *, factor):
        return b(dy, None)
    return grad


_SIGNATURES = {"dy": _dy, "star": _star, "upstream_only": _upstream_only,
               "upstream_named": _upstream_named, "star_upstream": _star_upstream,
               "star_upstream_required": _star_upstream_required, "dy_variables": _dy_variables,
               "star_variables": _star_variables, "kwargs": _kwargs,
               "required_keyword": _required_keyword}
