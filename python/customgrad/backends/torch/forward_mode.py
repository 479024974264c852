"""Forward mode: calls on dual tensors (torch.autograd.forward_ad) and the JVP derived from
grad_fn, which `DualLink` and the torch.func form of the link (`functions.FunctorchLinkFunction`) use.

f's own ops would give f's derivative (NaN for log1pexp at 100); grad_fn is linear in the
cotangents, so the VJP of the backward applied to the input tangents is J v.

A tangent reaches f by other routes too: `tangent_test` tells a tensor that carries one (also
under torch.func transforms), `hidden_tangents` finds those f reaches through objects (they go
to grad_fn's `variables=`; the keyword and closure-cell routes are refused by the core, as in
reverse mode, through `tensors.being_differentiated`), and `transforms_kept` / `lifted_jvp` run
the JVP rule inside the transforms f ran under (torch.func.hessian: jacfwd over jacrev).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from torch._C._functorch import TransformType, _unwrap_batched, _unwrap_for_grad
from torch._C._functorch import is_batchedtensor, is_gradtrackingtensor, maybe_get_level
from torch._C._functorch import pop_dynamic_layer_stack, push_dynamic_layer_stack
from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
from torch.autograd import forward_ad

from ... import _forward, _messages as msg
from ..._convention import inspect_grad_fn
from ..._tracebacks import without_own_frames
from .hidden_inputs import reachable


def has_tangents(tensors: Any) -> bool:
    """Whether a tensor is a dual tensor with a tangent (torch.autograd.forward_ad, outside
    torch.func transforms). Such a tensor says requires_grad=False; the call is linked by
    `DualLink`, whose jvp derives the JVP from grad_fn."""
    if forward_ad._current_level < 0:  # no dual_level open: one module attribute read
        return False
    if torch._C._are_functorch_transforms_active():  # (their link has its own jvp rule)
        return False
    return any([isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None
                for t in tensors])


def primals(tensors: list[Any]) -> list[Any]:
    """The tensors f receives in forward mode: each input's primal where it carries a tangent at
    the innermost forward level (a forward_ad dual level, or a torch.func.jvp level no other
    transform is inside: jvp, jacfwd), else the input itself. The JVP comes from grad_fn on the
    inputs' own tangents, so f need not see them; and without them, a tangent on f's outputs can
    only come from one f read without receiving it, which `link` then tells apart from the
    inputs' (with them, f's own tangent of x would hide it: a silent loss).

    An input that requires grad keeps its tangent: a backward run inside the forward level
    (torch.autograd.grad of f's output, forward over reverse) runs grad_fn, whose closure must
    hold x's tangent then. For such an input a hidden tangent is found by the walk only."""
    if forward_ad._current_level < 0 or torch.compiler.is_compiling():
        return tensors
    if torch._C._are_functorch_transforms_active() and (
            retrieve_all_functorch_interpreters()[-1].key() != TransformType.Jvp):
        return tensors  # (a transform inside the jvp level: its wrappers are not unpacked)
    return [forward_ad.unpack_dual(t).primal
            if isinstance(t, torch.Tensor) and not t.requires_grad else t for t in tensors]


def tangent_test() -> Any:
    """A predicate telling whether a tensor carries a forward-mode tangent now (dual tensors of
    torch.autograd.forward_ad, or of a torch.func.jvp level: jvp, jacfwd, hessian), or None
    where none can (no dual level open, which torch.func.jvp opens too: one attribute read)."""
    if forward_ad._current_level < 0:
        return None
    if not torch._C._are_functorch_transforms_active():
        return _has_dual_tangent
    interpreters = retrieve_all_functorch_interpreters()
    levels = [i.level() for i in interpreters]
    # the jvp levels, and -1: dual tensors of forward_ad under the transforms (torch.vmap)
    tangent_levels = [-1] + [i.level() for i in interpreters if i.key() == TransformType.Jvp]
    return lambda t: isinstance(t, torch.Tensor) and any(
        [_tangent_at(t, level, levels) for level in tangent_levels])


def _has_dual_tangent(t) -> bool:
    return isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None


def _tangent_at(t, level: int, levels: list[Any]) -> bool:
    """Whether `t` has a tangent at the torch.func jvp level `level` (-1: forward_ad's own, below
    every transform): its wrapper of that level (peeled from the wrappers of the transforms
    above), read with those transforms set aside, as torch.func.jvp reads its outputs
    (unpack_dual has no vmap rule)."""
    while True:
        own = maybe_get_level(t)
        if own == level:
            break
        if own < level:  # not a tensor of that level: no tangent there
            return False
        if is_batchedtensor(t):
            t = _unwrap_batched(t, own)[0]
        elif is_gradtrackingtensor(t):
            t = _unwrap_for_grad(t, own)
        else:  # another kind of wrapper (functionalization): not followed
            return False
    above = sum([1 for other in levels if other > level])
    layers = []
    try:
        for _ in range(above):
            layers.append(pop_dynamic_layer_stack())
        return forward_ad.unpack_dual(t).tangent is not None
    finally:
        for layer in reversed(layers):
            push_dynamic_layer_stack(layer)


def hidden_tangents(f: Any, grad_fn: Any, carries: Any, received: Any, known: Any) -> list[Any]:
    """The tensors carrying tangents (`carries`: `tangent_test()`) that f reaches through the
    objects it closes over (an attribute, an element of a list or dict, a module's parameter,
    as torch.func.functional_call swaps it in) without receiving them: not `received` (its
    arguments) and not `known` (the keras.Variable values it read). In forward mode there is no
    graph to walk, so every such tensor f reaches is one: grad_fn receives them in
    `variables=`, or, where it does not accept it, a TorchHiddenTangentError names them."""
    skip = {id(t) for t in received}
    skip.update(id(t) for t in known)
    found, names = [], []
    for name, t, weight in reachable(f):
        if id(t) not in skip and carries(t):
            if not weight:
                raise msg.hidden_input(f, through=name)
            skip.add(id(t))
            found.append(t)
            names.append(name)
    if found and not inspect_grad_fn(grad_fn).accepts_variables:
        raise msg.torch_hidden_tangent(f, grad_fn, names)
    return found


class DualLink(torch.autograd.Function):
    """`functions.LinkFunction` for inputs that carry forward-mode tangents: its jvp derives the
    JVP from grad_fn. Only calls with dual tensors use it, so `LinkFunction` stays as cheap as it
    was."""

    @staticmethod
    def forward(ctx: Any, link: Any, outputs: Any, *inputs: Any) -> Any:
        ctx.link = link
        ctx.meta = ([meta(o) for o in outputs], [meta(t) for t in inputs])
        return tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *cotangents: Any) -> Any:
        try:
            return (None, None) + tuple(ctx.link(list(cotangents)))
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's backward()
            raise

    @staticmethod
    def jvp(ctx: Any, _link: Any, _outputs: Any, *tangents: Any) -> Any:
        try:
            return derived_jvp(ctx.link, *ctx.meta, tangents)
        except Exception as error:
            without_own_frames(error)
            raise


def meta(t: Any) -> tuple[Any, ...]:
    """What the derived JVP needs of a tensor (holding the tensor would keep it alive)."""
    return t.shape, t.dtype, t.device


# id(link) -> the torch.func transforms active while f ran, while its link is being applied
# (`transforms_kept`); read by the jvp rule (`lifted_jvp`)
_transforms_of: dict[Any, Any] = {}


@contextlib.contextmanager
def transforms_kept(link: Any):
    """Keeps, while the link is applied, the torch.func transforms f ran under, where a jvp
    transform has others inside it (torch.func.hessian: jacfwd over jacrev). torch runs the jvp
    rule of an autograd.Function outside the transforms nested in the jvp, but grad_fn holds
    tensors of those (x, wrapped by jacrev's level): `lifted_jvp` runs it inside them again."""
    interpreters = retrieve_all_functorch_interpreters()
    if not any([i.key() == TransformType.Jvp for i in interpreters[:-1]]):
        yield
        return
    layers = []  # torch's dynamic layers, top first: popped and pushed back as they were
    try:
        for _ in interpreters:
            layers.append(pop_dynamic_layer_stack())
    finally:
        for layer in reversed(layers):
            push_dynamic_layer_stack(layer)
    kinds = [(i.key(), i.level()) for i in reversed(interpreters)]
    _transforms_of[id(link)] = list(zip(kinds, layers))
    try:
        yield
    finally:
        del _transforms_of[id(link)]


def lifted_jvp(link: Any, out_meta: Any, in_meta: Any, tangents: Any) -> Any:
    """`derived_jvp` inside the transforms f ran under (`transforms_kept`) that the jvp rule
    runs outside of, its result unwrapped back to the jvp rule's level."""
    kept = _transforms_of.get(id(link))
    level = retrieve_all_functorch_interpreters()[-1].level()
    above = [] if kept is None else [(kind, layer) for kind, layer in kept if kind[1] > level]
    if not above:
        return derived_jvp(link, out_meta, in_meta, tangents)
    keys = [key for (key, _), _ in above]
    if TransformType.Jvp in keys:  # as FunctorchLinkFunction.jvp refuses at the inner level
        raise msg.torch_forward_over_forward(link.backward.f)
    if any([key != TransformType.Grad for key in keys]):
        raise msg.torch_jvp_over_transform(link.backward.f, [key.name for key in keys])
    pushed = 0
    try:
        for _, layer in reversed(above):
            push_dynamic_layer_stack(layer)
            pushed += 1
        out = derived_jvp(link, out_meta, in_meta, tangents)
    finally:
        for _ in range(pushed):
            pop_dynamic_layer_stack()
    for (_, layer_level), _ in above:  # top first
        out = (_unwrap_for_grad(out, layer_level) if isinstance(out, torch.Tensor)
               else tuple(_unwrap_for_grad(t, layer_level) for t in out))
    return out


def derived_jvp(link: Any, out_meta: Any, in_meta: Any, tangents: Any) -> Any:
    """J v for the input tangents `tangents` (None: zero): the VJP of the backward (`link`, a
    `_call.Link`: grad_fn, linear in the cotangents) applied to them, through torch.func.vjp,
    which nests in every transform and keeps the result differentiable (reverse over forward)."""
    f, grad_fn = link.backward.f, link.backward.grad_fn
    # the probe reads values: not under torch.func transforms (wrapped tensors) or compiling
    concrete = not (torch._C._are_functorch_transforms_active() or torch.compiler.is_compiling())
    _forward.check_linear(f, grad_fn, _numpy_rule(link, out_meta) if concrete else None,
                          [tuple(m[0]) for m in out_meta])

    def rule(*cotangents):
        grads = link(list(cotangents))
        return tuple(_zeros(m) if g is None else g for g, m in zip(grads, in_meta))

    _, back = torch.func.vjp(rule, *[_zeros(m) for m in out_meta])
    out = back(tuple(_zeros(m) if v is None else v for v, m in zip(tangents, in_meta)))
    return out[0] if len(out) == 1 else out


def _zeros(meta):
    return torch.zeros(meta[0], dtype=meta[1], device=meta[2])


def _numpy_rule(link, out_meta):
    """The backward on numpy cotangents, for the linearity probe."""
    if any(m[1].is_complex for m in out_meta):
        return None

    def rule(cotangents):
        with torch.no_grad():
            grads = link([torch.as_tensor(u, dtype=m[1], device=m[2])
                                 for u, m in zip(cotangents, out_meta)])
        return [None if g is None else g.detach().cpu().numpy() for g in grads]

    return rule
