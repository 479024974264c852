"""Plain autograd VJPs: `vjp_flat` (customgrad.vjp/jvp, the gradient checker, remat's backward)
and the inputs a recomputation starts from (`recomputation_inputs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .tensors import is_float

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def recomputation_inputs(leaves: list[Any]) -> list[Any]:
    # the inputs still require grad from the forward: differentiated as they are, the
    # recomputation would keep a graph of the gradient, unless the backward itself is being
    # differentiated (create_graph=True)
    if torch.is_grad_enabled():
        return list(leaves)
    return [leaf.detach() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]


def vjp_flat(fn: Callable[..., Any], values: list[Any],
             reusable: bool = True) -> tuple[Sequence[Any], Callable[[list[Any]], list[Any]]]:
    """Runs fn(*values) -> output leaves with autograd on; returns (outputs, back(cotangents)).

    Inputs that already require grad (inside an outer grad) are used as they are and the backward
    builds a graph, so grad of grad works. The graph is kept after back either way (`reusable`
    is for tensorflow's tape).
    """
    if torch._C._are_functorch_transforms_active():
        return _functorch_vjp(fn, values)
    nested = any(v.requires_grad for v in values)
    with torch.enable_grad():
        inputs = [v if v.requires_grad else v.detach().requires_grad_(True) for v in values]
        outputs = fn(*inputs)

    def backward(cotangents):  # one per output (the core filled in zeros: `_autodiff._filled`)
        pairs = [
            (o, torch.as_tensor(ct, dtype=o.dtype))
            for o, ct in zip(outputs, cotangents)
            if isinstance(o, torch.Tensor) and is_float(o) and o.requires_grad
        ]
        if not pairs or not inputs:  # (torch.autograd.grad refuses an empty `inputs`)
            return [torch.zeros_like(v) for v in values]
        grads = torch.autograd.grad(
            [o for o, _ in pairs], inputs, grad_outputs=[c for _, c in pairs],
            retain_graph=True, create_graph=nested,
            allow_unused=True, materialize_grads=True,
        )
        return list(grads)

    return outputs, backward


def _functorch_vjp(fn, values):
    """vjp_flat inside torch.func transforms (torch.vmap: keras.ops.vectorized_map), where
    requires_grad_() is not allowed: through torch.func.vjp, for the floating-point outputs."""
    split = {}  # which outputs are floating-point, and the others as fn returned them

    def float_outputs(*inputs):
        outputs = fn(*inputs)
        keep = [isinstance(o, torch.Tensor) and is_float(o) for o in outputs]
        split["keep"], split["others"] = keep, {j: o for j, o in enumerate(outputs) if not keep[j]}
        return tuple(o for o, k in zip(outputs, keep) if k)

    floats, back = torch.func.vjp(float_outputs, *values)
    keep, floats = split["keep"], iter(floats)
    outputs = [next(floats) if k else split["others"][j] for j, k in enumerate(keep)]

    def backward(cotangents):
        cts = tuple(torch.as_tensor(ct, dtype=o.dtype)
                    for o, ct, k in zip(outputs, cotangents, keep) if k)
        if not cts:
            return [torch.zeros_like(v) for v in values]
        return list(back(cts))

    return outputs, backward
