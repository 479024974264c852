"""`call_positional`: the path most eager calls take, in one pass (the contract's fast path);
while torch.compile traces, `compiled.compiled_positional`.

Eager torch calls cost microseconds, so the general path's bookkeeping (`link.call`) shows; this
path checks up front that a call is of the plain kind, runs f once, and links its outputs
without the general path's structure handling.
"""

from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING, Any

import torch

from torch.autograd import forward_ad

from ..._call import Arguments, PositionalLink, recorded_reads
from ..._variables import recording
from .hidden_inputs import hidden_tensors, next_node_number
from .compiled import compiled_positional
from .tensors import plain_outputs
from .functions import link_apply
from .link import link, version_guard
from .rebinding import swapped_in

if TYPE_CHECKING:
    from collections.abc import Callable

# the package, whose names are the backend helpers the core's checks use
_BACKEND = sys.modules[__package__]

_Tensor = torch.Tensor
_Module = torch.nn.Module
_detach = operator.methodcaller("detach")
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


def call_positional(f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """The path most eager calls take, in one pass: f(*args) on floating-point tensors that
    require grad (no keyword arguments: the caller checked), autograd on, no transform, f
    returning (a floating-point tensor or a flat tuple or list of them, grad_fn) and reading no
    variable or hidden parameter. Returns None, before f runs, where a call is not of this kind:
    the general path takes it. A call found to be of another kind after f ran goes on along the
    general path with what f returned; f runs once either way.

    (Written for speed, in one function: it runs on every eager call.)
    """
    # admission, before f runs: autograd on, no transform, no dual level, every argument a
    # floating-point tensor that requires grad, and no tensor being differentiated in f's
    # closure (the general path refuses it)
    if not _grad_enabled() or forward_ad._current_level >= 0 or _functorch_active():
        return None
    if _is_compiling():
        return compiled_positional(f, args)
    specs = []  # (shape, dtype, device) per input, for the link's checks of grad_fn's result
    for a in args:
        if not (isinstance(a, _Tensor) and a.requires_grad
                and (dtype := a.dtype).is_floating_point):
            return None
        specs.append((a.shape, dtype, a.device))
    owner = getattr(f, "__self__", None)  # a bound method's module, swapped in: as a cell's
    if isinstance(owner, _Module) and swapped_in(owner):
        return None
    for cell in getattr(f, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: a name not assigned yet
            continue
        if isinstance(value, _Tensor) and value.requires_grad and not value.is_leaf:
            return None
        if isinstance(value, _Module) and swapped_in(value):  # grad_fn must see them again
            return None
    start = next_node_number()
    # torch has no read watcher (`watching_reads()` is None): this is `run_reading`
    result, rec = recording.call(f, args)
    # f's outputs where they are of this path's kind (a variable read: none)
    outputs = None if rec.variables else plain_outputs(result)
    hidden = None if outputs is None else hidden_tensors(outputs, args, (), start, f)
    if hidden is None or hidden:
        arguments = Arguments(f, args, {}, _BACKEND, tensors_only=True)
        return link(arguments, *arguments.accept(result, recorded_reads(rec)), start, hidden)
    output, grad_fn = result
    del result
    container = None if isinstance(output, _Tensor) else type(output)  # tuple or list
    del output
    call_link = PositionalLink(f, grad_fn, _BACKEND, specs, len(outputs), container,
                               version_guard(f, grad_fn))  # `link.guard`, with no hidden leaves
    outputs = list(map(_detach, outputs))  # the forward graph grad_fn does not use goes now
    # what Function.apply ends in, without its checks for the cases ruled out above
    linked = link_apply(call_link, outputs, *map(_unwrap_if_dead, args))
    return linked[0] if container is None else container(linked)
