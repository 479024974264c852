"""Backend-agnostic gradients: `grad`, `value_and_grad` and `vjp`, with JAX's semantics.

They return native tensors of the active backend and compose with each other (grad of grad) and
with each backend's compilation. Leaves that are not floating-point tensors (Python scalars are
converted to tensors; ints, bools, strings, None are not) get `None` as their gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal, ParamSpec, overload

import keras

from . import _tree
from . import _messages as msg
from ._returns import to_tensor
from ._autograph import not_converted
from ._tracebacks import boundary
from ._core import backend_module

P = ParamSpec("P")
# what vjp returns as vjp_fn: cotangents in the structure of the outputs -> one gradient per primal
VJPFunction = Callable[[Any], tuple[Any, ...]]
# gradients, values and aux are the active backend's tensors, or structures of them (the
# structure of the argument, of f's output): Any, as jax.grad's and jax.vjp's are

def _as_primal(leaf):
    """Python floats and numpy values become tensors (as jax.grad takes them); anything else
    stays as it is."""
    if isinstance(leaf, float) or _tree.framework_of(leaf) == "numpy":
        return to_tensor(leaf)
    return leaf


def _call_on(f, primals, leaves, diff, diff_values, has_aux, who):
    """f on `primals` with the leaves at `diff` replaced by `diff_values`; returns (output, aux),
    aux None without has_aux."""
    current = list(leaves)
    for i, v in zip(diff, diff_values):
        current[i] = v
    result = f(*_tree.unflatten(primals, current))
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise msg.aux_not_a_pair(who, f, result)
    return result[0], result[1]


@overload
def vjp(f: Callable[..., Any], *primals: Any,
        has_aux: Literal[False] = False) -> tuple[Any, VJPFunction]: ...
@overload
def vjp(f: Callable[..., Any], *primals: Any,
        has_aux: Literal[True]) -> tuple[Any, VJPFunction, Any]: ...
@overload
def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool) -> tuple[Any, ...]: ...
@boundary
def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Returns `(outputs, vjp_fn)` (and `aux` if `has_aux`), like `jax.vjp`, on any backend.

    `vjp_fn(cotangents)` takes cotangents in the structure of `outputs` and returns a tuple with
    one gradient per primal, each in that primal's structure (None for non-float leaves).

    Examples:
        >>> import keras, customgrad
        >>> y, vjp_fn = customgrad.vjp(keras.ops.sin, keras.ops.convert_to_tensor(0.0))
        >>> float(vjp_fn(keras.ops.convert_to_tensor(2.0))[0])
        2.0
    """
    return _vjp(f, primals, has_aux, reusable=True)


def _vjp(f: Callable[..., Any], primals: tuple, has_aux: bool, reusable: bool) -> tuple[Any, ...]:
    """`vjp`; `reusable=False` when vjp_fn runs once (grad, value_and_grad), which lets the
    tensorflow backend use a non-persistent tape."""
    B = backend_module()
    if not B.HAS_AUTODIFF:
        raise msg.no_autodiff("customgrad.vjp", B.__name__.rsplit(".", 1)[-1], "gradients")
    leaves = [_as_primal(leaf) for leaf in _tree.flatten(primals)]
    values = [B.tensor_value(leaf) for leaf in leaves]
    diff = [i for i, v in enumerate(values) if v is not None and B.is_float(v)]
    structure = {}

    def flat_fn(*diff_values):
        result, aux = _call_on(f, primals, leaves, diff, diff_values, has_aux, "customgrad")
        structure["out"] = result
        out_leaves = _tree.flatten(result)
        structure["n_out"] = len(out_leaves)
        if not has_aux:
            return out_leaves
        # aux's tensors go out as extra outputs (with zero cotangents): under jax.vjp a tensor
        # kept aside from the traced function would be a leaked tracer. Its other leaves (a
        # name, a count) are kept aside, as jax.vjp keeps them: no autodiff takes them.
        aux_leaves = _tree.flatten(aux)
        tensors = [i for i, leaf in enumerate(aux_leaves) if B.tensor_value(leaf) is not None]
        structure["aux"], structure["aux_leaves"], structure["aux_tensors"] = (
            aux, aux_leaves, tensors)
        return out_leaves + [aux_leaves[i] for i in tensors]

    all_leaves, back = B.vjp_flat(flat_fn, [values[i] for i in diff], reusable)
    n_out = structure["n_out"]
    outputs = _tree.unflatten(structure["out"], all_leaves[:n_out])
    if has_aux:
        aux_leaves = list(structure["aux_leaves"])
        for i, value in zip(structure["aux_tensors"], all_leaves[n_out:]):
            aux_leaves[i] = value
        structure["aux"] = _tree.unflatten(structure["aux"], aux_leaves)

    def vjp_fn(cotangents):
        try:
            ct_leaves = _tree.match(cotangents, structure["out"])
        except _tree.StructureMismatch as e:
            raise msg.cotangent_structure(e) from None
        grads = back(_filled(B, all_leaves, ct_leaves + [None] * (len(all_leaves) - n_out)))
        full = [None] * len(leaves)
        for i, g in zip(diff, grads):
            full[i] = g
        return tuple(_tree.unflatten(primals, full))

    if has_aux:
        return outputs, boundary(vjp_fn), structure.get("aux")
    return outputs, boundary(vjp_fn)


@overload
def value_and_grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0,
                   has_aux: Literal[False] = False) -> Callable[P, tuple[Any, Any]]: ...
@overload
def value_and_grad(f: Callable[P, Any], argnums: int | Sequence[int],
                   has_aux: Literal[True]) -> Callable[P, tuple[tuple[Any, Any], Any]]: ...
@overload
def value_and_grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0, *,
                   has_aux: Literal[True]) -> Callable[P, tuple[tuple[Any, Any], Any]]: ...
@overload
def value_and_grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable[P, tuple[Any, Any]]: ...
def value_and_grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable[P, tuple[Any, Any]]:
    """Returns a function computing `f(*args)` and its gradient with respect to `args[argnums]`.

    `f` must return a scalar (or `(scalar, aux)` with `has_aux=True`). With an int `argnums` the
    gradient has the structure of that argument; with a tuple, it is a tuple of those.

    Examples:
        >>> import keras, customgrad
        >>> v, g = customgrad.value_and_grad(lambda x: keras.ops.sum(x ** 2))(
        ...     keras.ops.convert_to_tensor([1.0, 2.0]))
        >>> [float(t) for t in g]
        [2.0, 4.0]
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(n, int) for n in nums):
        raise msg.bad_argnums(argnums)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        for n in nums:
            if not -len(args) <= n < len(args):
                raise msg.argnums_out_of_range(argnums, n, f, len(args))
        nums_ = tuple(n % len(args) for n in nums)

        def on_selected(*selected):
            full = list(args)
            for n, value in zip(nums_, selected):
                full[n] = value
            return f(*full, **kwargs)

        B = backend_module()
        # before anything runs, on every backend: torch's autograd would refuse it with a bare
        # error, jax and tensorflow would give None
        _refuse_integer_inputs(f, args, nums_, B)
        result = _vjp(on_selected, tuple(args[n] for n in nums_), has_aux, reusable=False)
        out, vjp_fn = result[0], result[1]
        value = B.tensor_value(out) if _tree.flatten(out) == [out] else None
        if value is None or tuple(B.static_shape(value)) != () or not B.is_float(value):
            raise msg.not_a_scalar(f, out)
        grads = vjp_fn(B.ones_like(value))
        grads = grads[0] if isinstance(argnums, int) else grads
        if has_aux:
            return (out, result[2]), grads
        return out, grads

    return not_converted(boundary(wrapper))  # by AutoGraph: _autograph.py


def _refuse_integer_inputs(f, args, nums, B):
    """Raises if an argument to differentiate has numbers but no floating-point one: the
    gradient is taken with respect to floats (as jax.grad requires), and it is the input, not
    the output, that the message must point at."""
    for n in nums:
        values = [B.tensor_value(_as_primal(leaf)) for leaf in _tree.flatten(args[n])]
        numbers = [leaf for leaf, v in zip(_tree.flatten(args[n]), values)
                   if v is not None or isinstance(leaf, (bool, int))]
        if numbers and not any(v is not None and B.is_float(v) for v in values):
            raise msg.nothing_to_differentiate(n, f, args[n])


@overload
def grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0,
         has_aux: Literal[False] = False) -> Callable[P, Any]: ...
@overload
def grad(f: Callable[P, Any], argnums: int | Sequence[int],
         has_aux: Literal[True]) -> Callable[P, tuple[Any, Any]]: ...
@overload
def grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0, *,
         has_aux: Literal[True]) -> Callable[P, tuple[Any, Any]]: ...
@overload
def grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Callable[P, Any]: ...
def grad(f: Callable[P, Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Callable[P, Any]:
    """Returns a function computing the gradient of scalar `f` with respect to `args[argnums]`.

    Works on jax, tensorflow and torch, returns native tensors, and composes with itself.

    Examples:
        >>> import keras, customgrad
        >>> d2 = customgrad.grad(customgrad.grad(lambda x: x ** 3))
        >>> float(d2(keras.ops.convert_to_tensor(2.0)))
        12.0
    """
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return not_converted(boundary(wrapper))


@overload
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: Literal[False] = False) -> tuple[Any, Any]: ...
@overload
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: Literal[True]) -> tuple[Any, Any, Any]: ...
@overload
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool) -> tuple[Any, ...]: ...
@boundary
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """Returns `(outputs, output_tangents)` (and `aux` if `has_aux`), like `jax.jvp`, on any
    backend: the directional derivative of `f` at `primals` along `tangents`.

    `primals` is a tuple of `f`'s positional arguments; `tangents` has their structure (None for
    a zero tangent). Output tangents have the structure of the outputs (None for non-float
    leaves). For a `customgrad.custom_gradient` function the JVP is derived from its grad_fn
    (on jax the function needs `forward_mode=True`).

    Examples:
        >>> import keras, customgrad
        >>> @customgrad.custom_gradient(forward_mode=True)
        ... def log1pexp(x):
        ...     e = keras.ops.exp(x)
        ...     return keras.ops.log(1.0 + e), lambda dy: dy * (1.0 - 1.0 / (1.0 + e))
        >>> x = keras.ops.convert_to_tensor([0.0, 100.0])
        >>> y, dy = customgrad.jvp(log1pexp, (x,), (keras.ops.ones_like(x),))
        >>> [float(v) for v in dy]
        [0.5, 1.0]
    """
    if not isinstance(primals, (tuple, list)):
        raise msg.primals_not_a_tuple("customgrad.jvp", f, primals)
    B = backend_module()
    if not B.HAS_AUTODIFF:
        raise msg.no_autodiff("customgrad.jvp", B.__name__.rsplit(".", 1)[-1], "derivatives")
    primals = tuple(primals)
    leaves = [_as_primal(leaf) for leaf in _tree.flatten(primals)]
    try:
        tangent_leaves = _tree.match(tuple(tangents), primals)
    except (TypeError, _tree.StructureMismatch) as e:
        raise msg.tangent_structure(primals, tangents, e) from None
    values = [B.tensor_value(leaf) for leaf in leaves]
    diff = [i for i, v in enumerate(values) if v is not None and B.is_float(v)]
    paths = _tree.leaf_paths(primals, "primals")
    diff_tangents = [_tangent_like(tangent_leaves[i], values[i], B, paths[i]) for i in diff]
    structure = {}

    def flat_fn(*diff_values):
        result, aux = _call_on(f, primals, leaves, diff, diff_values, has_aux, "customgrad.jvp")
        out_leaves = _tree.flatten(result) + (_tree.flatten(aux) if has_aux else [])
        # only tensors go through the transform; other leaves (None, strings) are kept aside
        is_tensor = [B.is_tensor(o) for o in out_leaves]
        structure.update(out=result, aux=aux, n_out=len(_tree.flatten(result)),
                         is_tensor=is_tensor, others=out_leaves)
        return tuple(o for o, k in zip(out_leaves, is_tensor) if k)

    try:
        outs, out_tangents = keras.ops.jvp(flat_fn, tuple(values[i] for i in diff),
                                           tuple(diff_tangents))
    except TypeError as e:
        if "forward-mode autodiff (jvp) to a custom_vjp" not in str(e):
            raise
        raise msg.jvp_of_reverse_only(f, e) from e
    outs, out_tangents = iter(outs), iter(out_tangents)
    all_out, all_tan = [], []
    for o, k in zip(structure["others"], structure["is_tensor"]):
        value, tangent = (next(outs), next(out_tangents)) if k else (o, None)
        all_out.append(value)
        all_tan.append(tangent if k and B.is_float(value) else None)
    n_out = structure["n_out"]
    outputs = _tree.unflatten(structure["out"], all_out[:n_out])
    output_tangents = _tree.unflatten(structure["out"], all_tan[:n_out])
    if has_aux:
        return outputs, output_tangents, _tree.unflatten(structure["aux"], all_out[n_out:])
    return outputs, output_tangents


def _tangent_like(tangent, primal, B, where):
    """A tangent leaf as a tensor of its primal's dtype (None: zeros), shape-checked."""
    if tangent is None:
        return keras.ops.zeros_like(primal)
    tangent = _as_primal(tangent)
    value = B.tensor_value(tangent)
    value = keras.ops.convert_to_tensor(tangent if value is None else value,
                                        dtype=keras.backend.standardize_dtype(primal.dtype))
    if tuple(value.shape) != tuple(primal.shape):
        raise msg.tangent_shape(where, value.shape, primal.shape)
    return value


@boundary
def hvp(f: Callable[..., Any], primals: Sequence[Any], vectors: Sequence[Any]) -> tuple[Any, ...]:
    """Returns the Hessian-vector product H v of scalar `f` at `primals`, one entry per primal
    (in its structure), forward over reverse: the JVP of `customgrad.grad(f)` along `vectors`.

    For a `customgrad.custom_gradient` function the Hessian is the derivative of its grad_fn
    (reverse mode), so this works for every custom-gradient function on every backend, also
    without `forward_mode=True` on jax.

    Examples:
        >>> import keras, customgrad
        >>> x = keras.ops.convert_to_tensor([0.0, 2.0])
        >>> f = lambda v: keras.ops.sum(customgrad.ops.log1pexp(v))
        >>> (hv,) = customgrad.hvp(f, (x,), (keras.ops.ones_like(x),))
        >>> [round(float(v), 4) for v in hv]  # sigmoid(x) * (1 - sigmoid(x))
        [0.25, 0.105]
    """
    if not isinstance(primals, (tuple, list)) or not primals:
        raise msg.primals_not_a_tuple("customgrad.hvp", f, primals, non_empty=True)
    gradient = grad(f, argnums=tuple(range(len(primals))))
    _, hv = jvp(gradient, tuple(primals), vectors)
    return tuple(hv)


def _filled(B, outputs: list, cotangents: list) -> list:
    """The cotangents `vjp_flat`'s backward receives, one per output leaf: zeros of its output
    for a floating-point tensor given none (aux outputs, a None in the cotangent structure),
    the given ones as they are (each backend casts them to its output's dtype), None for the
    rest (no gradient flows there)."""
    return [B.zeros_like(o) if ct is None and B.is_tensor(o) and B.is_float(o) else ct
            for o, ct in zip(outputs, cotangents)]
