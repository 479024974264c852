"""`compiled_positional`: the fast path's kind of call (`fast_path.call_positional`) while
torch.compile traces, with as little Python as the call needs.

dynamo inlines every function on the path, at every call site, forward and backward (it traces
an autograd.Function's backward when it meets the Function), and the first step waits for it.
So this path makes no `_call` objects: `CompiledLink` holds f, grad_fn and the inputs' specs in
a tuple, and its backward calls grad_fn by the convention (`_convention.call_grad_fn`) and takes
its result as it is when it is one tensor per input of the input's shape and dtype
(`_returns.plain_gradients`); anything else goes through the general rules
(`_returns.checked_gradients`), named errors included. Loops rather than comprehensions: each
comprehension is one more frame for dynamo. `tests/python/test_compile.py` counts the frames.

As on the general path (`link.call`), f runs on its inputs detached (torch.compile does not
differentiate grad_fn: no double backward), a call that reaches a tensor requiring grad without
receiving it runs eagerly, where the autograd walk names it, and grad_fn's closure is not
version-checked (compiled graphs are functional).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch

from ..._call import Arguments, PositionalLink, recorded_reads
from ..._convention import call_grad_fn
from ..._returns import checked_gradients, plain_gradients
from ..._tracebacks import without_own_frames
from ..._variables import recording
from .link import compiled_link, reaches_hidden
from .tensors import is_tensor, plain_outputs

if TYPE_CHECKING:
    from collections.abc import Callable

# the package, whose names are the backend helpers the core's checks use
_BACKEND = sys.modules[__package__]

_Tensor = torch.Tensor


def compiled_positional(f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """f(*args) while torch.compile traces, for floating-point tensors that all require grad;
    None, before f runs, for another kind of call (the general path takes it). A call found to
    be of another kind after f ran goes on along the general path with what f returned.

    >>> import torch
    >>> compiled_positional(lambda n: (n, None), (2,)) is None  # not a tensor: the general path
    True
    >>> x = torch.ones(3)  # requires no grad: the general path
    >>> compiled_positional(lambda x: (2.0 * x, lambda dy: 2.0 * dy), (x,)) is None
    True
    """
    specs = []  # (shape, dtype) per input, for plain_gradients
    detached = []
    for a in args:
        if not (isinstance(a, _Tensor) and a.requires_grad
                and (dtype := a.dtype).is_floating_point):
            return None
        specs.append((a.shape, dtype, a.device))
        detached.append(a.detach())
    if reaches_hidden(f):
        return None  # the general path runs it eagerly
    result, rec = recording.call(f, detached)
    outputs = None if rec.variables else plain_outputs(result)
    if outputs is not None:
        for o in outputs:
            if o.requires_grad:  # f read a tensor that requires grad without receiving it
                outputs = None
                break
    if outputs is None:
        arguments = Arguments(f, args, {}, _BACKEND, tensors_only=True)
        return compiled_link(arguments, *arguments.accept(result, recorded_reads(rec)))
    container = None if isinstance(result[0], _Tensor) else type(result[0])
    linked = CompiledLink.apply((f, result[1], specs, container), outputs, *args)
    return linked[0] if container is None else container(linked)


class CompiledLink(torch.autograd.Function):
    """Returns f's outputs (computed on the inputs detached) attached to the inputs; backward
    calls grad_fn. `call`: (f, grad_fn, the inputs' (shape, dtype, device), the output's
    container: None for one tensor, else tuple or list)."""

    @staticmethod
    def forward(ctx: Any, call: tuple, outputs: list, *inputs: Any) -> Any:
        ctx.call = call
        return tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *cotangents: Any) -> Any:
        f, grad_fn, specs, container = ctx.call
        upstream = cotangents[0] if container is None else container(cotangents)
        try:
            result = call_grad_fn(grad_fn, f, upstream, upstream, (), False)
            grads = plain_gradients(result, specs, is_tensor)
            if grads is None:  # the general rules: conversions, None, zeros, named errors
                link = PositionalLink(f, grad_fn, _BACKEND, specs, len(cotangents), container)
                grads = checked_gradients(link.backward, result)[0]
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's backward()
            raise
        return (None, None, *grads)
