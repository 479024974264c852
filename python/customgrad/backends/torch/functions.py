"""The autograd.Functions that link f's (detached) outputs to its inputs, whose backward calls
the call's `_call.Link` (grad_fn): `LinkFunction`, and `FunctorchLinkFunction` under torch.func
transforms (`forward_mode.DualLink` for dual tensors)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch._C._functorch import TransformType
from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

from ... import _messages as msg
from ..._tracebacks import without_own_frames
from .forward_mode import lifted_jvp, meta, transforms_kept

if TYPE_CHECKING:
    from collections.abc import Callable

_keep_graph = torch._C._autograd._get_current_graph_task_keep_graph


class LinkFunction(torch.autograd.Function):
    """Returns the (detached) outputs f computed, attached to the inputs; backward calls grad_fn.

    The outputs come in as a Python list, not as tensor arguments: outputs that are not inputs
    of the Function need no view bookkeeping, which makes this about 7 us cheaper a call.
    """

    @staticmethod
    def forward(ctx: Any, link: Any, outputs: Any, *inputs: Any) -> Any:
        ctx.link = link
        return tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *cotangents: Any) -> Any:
        link = ctx.link
        # compiled autograd traces this backward when it runs under torch.compile
        eager = not torch.compiler.is_compiling()
        try:
            if link is None:
                raise msg.torch_second_backward()
            if eager and not _keep_graph():
                # As autograd frees a node's saved tensors once it ran: grad_fn's closure (the
                # tensors it holds, often a previous layer's output) goes now, not when the
                # whole graph does; else one more activation is alive at the backward's peak.
                ctx.link = None
            return (None, None) + tuple(link(list(cotangents), eager))
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's backward()
            raise


def functorch_link(link: Any, n_outputs: Any, *tensors: Any) -> Any:
    """`FunctorchLinkFunction.apply`, keeping the transforms f ran under for its jvp rule
    (`forward_mode.transforms_kept`)."""
    with transforms_kept(link):
        return FunctorchLinkFunction.apply(link, n_outputs, *tensors)


def _functorch_link_eagerly(*args):
    return functorch_link(*args)


# Under torch.compile, torch.func transforms reach FunctorchLinkFunction eagerly (one graph break): from
# torch 2.15 on, dynamo traces an autograd.Function under a jvp transform without its `jvp`, which
# gives a zero tangent, and skips the linearity check that `jvp` makes; torch 2.11-2.13 broke the
# graph there by themselves. Plain torch.compile of a call (no torch.func) is not affected.
functorch_link_eagerly: Callable[..., Any] = torch.compiler.disable(_functorch_link_eagerly)


# autograd.Function.apply binds arguments for setup_context and unwraps functorch tensors before
# it calls this; LinkFunction has no setup_context, and the fast path runs without functorch transforms
link_apply: Callable[..., Any] = super(torch.autograd.Function, LinkFunction).apply


class FunctorchLinkFunction(torch.autograd.Function):
    """`LinkFunction` in the form torch.func transforms need: forward without ctx, a function of its
    tensor arguments only (the outputs come in as tensors and leave as views), setup_context.

    Kept apart because binding arguments for setup_context costs about 40 us a call in eager
    mode, a third of the whole overhead of a small custom-gradient call.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(link: Any, n_outputs: Any, *tensors: Any) -> Any:
        return tuple(tensors[i].view_as(tensors[i]) for i in range(n_outputs))

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.link, ctx.n_outputs = inputs[0], inputs[1]
        # for jvp: shapes only (holding the tensors would keep the inputs alive until backward)
        ctx.meta = [meta(t) for t in inputs[2:]]

    @staticmethod
    def backward(ctx: Any, *cotangents: Any) -> Any:
        try:
            grads = ctx.link(list(cotangents))
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's transform
            raise
        return (None, None) + (None,) * ctx.n_outputs + tuple(grads)

    @staticmethod
    def jvp(ctx: Any, _link: Any, _n_outputs: Any, *tangents: Any) -> Any:
        # (torch.func.jvp, jacfwd, hessian) the outputs' own tangents are f's derivative: unused
        try:
            if sum([i.key() == TransformType.Jvp
                    for i in retrieve_all_functorch_interpreters()]) > 1:
                # torch runs an autograd.Function's jvp without differentiating it: forward
                # over forward (jacfwd(jacfwd(f))) would silently get a zero second derivative
                raise msg.torch_forward_over_forward(ctx.link.backward.f)
            n = ctx.n_outputs
            return lifted_jvp(ctx.link, ctx.meta[:n], ctx.meta[n:], tangents[n:])
        except Exception as error:
            without_own_frames(error)
            raise
