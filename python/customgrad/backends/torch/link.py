"""The general call (`call`) and the link: f's outputs, detached, re-attached to the inputs
through an autograd.Function whose backward is grad_fn (`_Link`; `_FunctorchLink` under
torch.func transforms; `forward_mode.DualLink` for dual tensors)."""

from __future__ import annotations

import torch

from torch._C._functorch import TransformType
from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

from ... import _messages as msg
from ..._convention import inspect_grad_fn
from .forward_mode import DualLink, derived_jvp, has_tangents, meta
from .hidden_inputs import (
    check_versions, closure_versions, hidden_tensors, hidden_leaves_error, next_node_number)
from .tensors import is_float

_keep_graph = torch._C._autograd._get_current_graph_task_keep_graph


class _Link(torch.autograd.Function):
    """Returns the (detached) outputs f computed, attached to the inputs; backward calls grad_fn.

    The outputs come in as a Python list, not as tensor arguments: outputs that are not inputs
    of the Function need no view bookkeeping, which makes this about 7 us cheaper a call.
    """

    @staticmethod
    def forward(ctx, link, outputs, *inputs):
        ctx.link = link
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *cotangents):
        link = ctx.link
        if link is None:
            raise msg.torch_second_backward()
        if not torch.compiler.is_compiling() and not _keep_graph():
            # As autograd frees a node's saved tensors once it ran: grad_fn's closure (the
            # tensors it holds, often a previous layer's output) goes now, not when the whole
            # graph does; else one more activation is alive at the backward's peak.
            ctx.link = None
        return (None, None) + tuple(link(list(cotangents)))


def _functorch_link_eagerly(*args):
    return _FunctorchLink.apply(*args)


# Under torch.compile, torch.func transforms reach _FunctorchLink eagerly (one graph break): from
# torch 2.15 on, dynamo traces an autograd.Function under a jvp transform without its `jvp`, which
# gives a zero tangent, and skips the linearity check that `jvp` makes; torch 2.11-2.13 broke the
# graph there by themselves. Plain torch.compile of a call (no torch.func) is not affected.
_functorch_link_eagerly = torch.compiler.disable(_functorch_link_eagerly)


# autograd.Function.apply binds arguments for setup_context and unwraps functorch tensors before
# it calls this; _Link has no setup_context, and the fast path runs without functorch transforms
link_apply = super(torch.autograd.Function, _Link).apply


class _FunctorchLink(torch.autograd.Function):
    """`_Link` in the form torch.func transforms need: forward without ctx, a function of its
    tensor arguments only (the outputs come in as tensors and leave as views), setup_context.

    Kept apart because binding arguments for setup_context costs about 40 us a call in eager
    mode, a third of the whole overhead of a small custom-gradient call.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(link, n_outputs, *tensors):
        return tuple(tensors[i].view_as(tensors[i]) for i in range(n_outputs))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.link, ctx.n_outputs = inputs[0], inputs[1]
        # for jvp: shapes only (holding the tensors would keep the inputs alive until backward)
        ctx.meta = [meta(t) for t in inputs[2:]]

    @staticmethod
    def backward(ctx, *cotangents):
        grads = ctx.link(list(cotangents))
        return (None, None) + (None,) * ctx.n_outputs + tuple(grads)

    @staticmethod
    def jvp(ctx, _link, _n_outputs, *tangents):
        # (torch.func.jvp, jacfwd, hessian) the outputs' own tangents are f's derivative: unused
        if sum([i.key() == TransformType.Jvp for i in retrieve_all_functorch_interpreters()]) > 1:
            # torch runs an autograd.Function's jvp without differentiating it: forward over
            # forward (jacfwd(jacfwd(f))) would silently get a zero second derivative
            raise msg.torch_forward_over_forward(ctx.link.backward.f)
        n = ctx.n_outputs
        return derived_jvp(ctx.link, ctx.meta[:n], ctx.meta[n:], tangents[n:])


def _requires_grad(t) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad


def call(arguments):
    dual = has_tangents(arguments.tensor_values)
    start = None if torch.compiler.is_compiling() else next_node_number()
    return link(arguments, *arguments.forward(arguments.tensor_values), start, dual=dual)


def link(arguments, output, out_leaves, backward, start, hidden=None, dual=False):
    """Attaches the outputs of the forward f ran (with autograd on) to the inputs through
    `_Link`, whose backward runs grad_fn (through `backward.link(...)`, a `_call.Link`); returns
    the output (f's `output`, when nothing needs grad).

    `start`: the number of the first autograd node f could have made (None under
    torch.compile, whose tracing has no autograd nodes to walk); `hidden`: the leaf tensors
    requiring grad that f read without receiving them (None: not looked for yet); `dual`: an
    input carries a forward-mode tangent, and `DualLink` links every input."""
    if not torch.is_grad_enabled() and not dual:
        return output
    # Under torch.vmap a batched tensor says requires_grad=False even when the tensor it wraps
    # requires grad: under functorch transforms every differentiable input is linked.
    transformed = torch._C._are_functorch_transforms_active()
    values = arguments.tensor_values
    inputs = [
        k for k, (t, diff) in enumerate(zip(values, arguments.differentiable))
        if diff and (transformed or dual or t.requires_grad)
    ]
    variables, var_values = backward.reads.variables, backward.reads.values
    if hidden is None and not transformed and start is not None:
        hidden = hidden_tensors(out_leaves, values, var_values, start, arguments.f)
    if hidden:
        # routed like the keras.Variables f read: grad_fn gets them in variables=
        variables, var_values = [*variables, *hidden], [*var_values, *hidden]
    wanted = [v for v in var_values if _requires_grad(v)]  # the variables autograd differentiates
    if not inputs and not wanted:
        return output
    del output
    # detached: the parts of the forward graph grad_fn does not use are dropped now
    result, linked_outputs, outputs = [], [], []
    for j, o in enumerate(out_leaves):
        if isinstance(o, torch.Tensor):
            o = o.detach()
            if is_float(o):
                linked_outputs.append(j)
                outputs.append(o)
        result.append(o)
    del out_leaves
    every_output = len(linked_outputs) == len(result)
    linked_inputs = values if len(inputs) == len(values) else [values[k] for k in inputs]
    if wanted:
        linked_inputs = linked_inputs + wanted
    link = backward.link(None if every_output else linked_outputs, inputs, variables, var_values,
                         wanted, guard(backward.f, backward.grad_fn, hidden))
    if transformed:
        apply = (_functorch_link_eagerly if torch.compiler.is_compiling()
                 else _FunctorchLink.apply)
        linked = apply(link, len(outputs), *outputs, *linked_inputs)
    elif dual:
        linked = DualLink.apply(link, outputs, *linked_inputs)
    else:
        linked = _Link.apply(link, outputs, *linked_inputs)
    for j, t in zip(linked_outputs, linked):
        result[j] = t
    return backward.rebuild(result)


def guard(f, grad_fn, hidden=None):
    """What the link checks before grad_fn runs (None: nothing): that grad_fn takes the hidden
    leaves f read (in `variables=`), and that the tensors its closure holds were not changed in
    place since the forward."""
    versions = closure_versions(grad_fn)
    if not hidden and not versions:
        return None

    def check():
        if hidden and not inspect_grad_fn(grad_fn).accepts_variables:
            raise hidden_leaves_error(f, grad_fn, hidden)
        if versions:
            check_versions(versions, f)

    return check
