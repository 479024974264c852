"""Forward mode: calls on dual tensors (torch.autograd.forward_ad) and the JVP derived from
grad_fn, which `DualLink` and the torch.func form of the link (`functions.FunctorchLinkFunction`) use.

f's own ops would give f's derivative (NaN for log1pexp at 100); grad_fn is linear in the
cotangents, so the VJP of the backward applied to the input tangents is J v.
"""

from __future__ import annotations

import torch

from torch.autograd import forward_ad

from ... import _forward


def has_tangents(tensors) -> bool:
    """Whether a tensor is a dual tensor with a tangent. Such a tensor says requires_grad=False;
    the call is linked by `DualLink`, whose jvp derives the JVP from grad_fn."""
    if forward_ad._current_level < 0:  # no dual_level open: one module attribute read
        return False
    return any([isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None
                for t in tensors])


class DualLink(torch.autograd.Function):
    """`functions.LinkFunction` for inputs that carry forward-mode tangents: its jvp derives the
    JVP from grad_fn. Only calls with dual tensors use it, so `LinkFunction` stays as cheap as it
    was."""

    @staticmethod
    def forward(ctx, link, outputs, *inputs):
        ctx.link = link
        ctx.meta = ([meta(o) for o in outputs], [meta(t) for t in inputs])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *cotangents):
        return (None, None) + tuple(ctx.link(list(cotangents)))

    @staticmethod
    def jvp(ctx, _link, _outputs, *tangents):
        return derived_jvp(ctx.link, *ctx.meta, tangents)


def meta(t) -> tuple:
    """What the derived JVP needs of a tensor (holding the tensor would keep it alive)."""
    return t.shape, t.dtype, t.device


def derived_jvp(link, out_meta, in_meta, tangents):
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
