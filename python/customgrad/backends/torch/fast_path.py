"""`call_positional`: the path most eager calls take, in one pass (the contract's fast path).

Eager torch calls cost microseconds, so the general path's bookkeeping (`link.call`) shows; this
path checks up front that a call is of the plain kind, runs f once, and links its outputs
without the general path's structure handling.
"""

from __future__ import annotations

import sys

import torch

from torch.autograd import forward_ad

from ..._call import Call, check_gradients, plain_backward, plain_gradients
from ..._convention import upstream_arguments
from ..._spec import OutputSpec
from ..._variables import recording
from .hidden_inputs import check_versions, closure_versions, hidden_leaves, next_node_number
from .link import link, link_apply

# the package, whose names are the backend helpers the core's checks use
_BACKEND = sys.modules[__package__]

_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


def call_positional(f, args):
    """The path most eager calls take, in one pass: f(*args) on floating-point tensors that
    require grad (no keyword arguments: the caller checked), autograd on, no transform, f
    returning (a floating-point tensor or a flat tuple or list of them, grad_fn) and reading no
    variable. Returns None, before f runs, where a call is not of this kind: the general path
    takes it. A call found to be of another kind after f ran (a variable read, another kind of
    output) goes on along the general path with what f returned; f runs once either way.
    """
    if _is_compiling() or not _grad_enabled() or forward_ad._current_level >= 0 or (
            _functorch_active()):
        return None
    for a in args:
        if not (isinstance(a, _Tensor) and a.requires_grad and a.is_floating_point()):
            return None
    cells = getattr(f, "__closure__", None)
    if cells:
        for cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell: a name not assigned yet
                continue
            if isinstance(value, _Tensor) and value.requires_grad and not value.is_leaf:
                return None  # closed over and being differentiated: the general path refuses it
    start = next_node_number()
    with recording() as rec:
        result = f(*args)
    output = result[0] if type(result) is tuple and len(result) == 2 else None
    if isinstance(output, _Tensor):
        outputs = [output]
        simple = output.is_floating_point()
    elif type(output) in (tuple, list) and output:
        outputs = list(output)
        simple = all([isinstance(o, _Tensor) and o.is_floating_point() for o in outputs])
    else:
        simple = False
    hidden = None
    if simple and not rec.variables and callable(result[1]):
        hidden = hidden_leaves(outputs, args, (), start)
    if hidden is None or hidden:
        arguments = Call(f, args, {}, _BACKEND, tensors_only=True)
        return link(arguments, rec, *arguments.accept(result), start, hidden)
    grad_fn = result[1]
    container = None if isinstance(output, _Tensor) else type(output)  # tuple or list
    del result, output
    # what the backward needs of the arguments (the outputs' are the cotangents')
    in_specs = [OutputSpec(a.shape, a.dtype, a.device, True) for a in args]
    versions = closure_versions(grad_fn)
    outputs = [o.detach() for o in outputs]  # the forward graph grad_fn does not use goes now

    def backward(cotangents):
        if versions:
            check_versions(versions, f)
        upstream = cotangents[0] if container is None else container(cotangents)
        positional, keywords, _ = upstream_arguments(grad_fn, f, upstream, upstream)
        grads = grad_fn(*positional, **keywords)
        checked = plain_gradients(grads, in_specs, _BACKEND)
        if checked is not None:
            return checked
        # the general rules (autograd hands over one cotangent per output, with that output's
        # shape, dtype and device)
        out_specs = [OutputSpec(c.shape, c.dtype, c.device, True) for c in cotangents]
        return check_gradients(plain_backward(f, grad_fn, _BACKEND, in_specs, out_specs,
                                              container), grads)[0]

    # what Function.apply ends in, without its checks for the cases ruled out above
    linked = link_apply(backward, outputs, *[_unwrap_if_dead(a) for a in args])
    return linked[0] if container is None else container(linked)
