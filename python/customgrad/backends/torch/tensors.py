"""What a torch tensor is to the core: its value, kind, spec, zeros, conversions and casts."""

from __future__ import annotations

import contextlib
from typing import Any

import keras
import torch

from ..._spec import TensorSpec
from .forward_mode import tangent_test


def tensor_value(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return leaf
    if isinstance(leaf, keras.Variable):
        return leaf.value
    return None


def is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def is_float(x: Any) -> bool:
    return x.is_floating_point() or x.is_complex()


def sees_closures() -> bool:
    """Whether f's closure cells and grad_fn's keyword defaults can be read now: not while
    torch.compile traces (dynamo then fails to load the cell inside f, and breaks its graph on
    a function's __kwdefaults__; a closed-over tensor is not checked there)."""
    return not torch.compiler.is_compiling()


def being_differentiated(x: Any, closed_over: bool = False) -> bool:
    """Whether autograd will differentiate tensor `x` (for a tensor f closes over: a computed
    one; a leaf tensor that requires grad, like an nn.Parameter, is a variable), or `x` carries
    a forward-mode tangent (whose JVP grad_fn, which has no gradient for it, could not give)."""
    if not isinstance(x, torch.Tensor):
        return False
    if x.requires_grad and torch.is_grad_enabled() and not (closed_over and x.is_leaf):
        return True
    carries = tangent_test()
    return carries is not None and carries(x)


def spec(x: Any) -> Any:
    return TensorSpec(x.shape, x.dtype, x.device, x.is_floating_point() or x.is_complex())


def zeros(spec: Any) -> Any:
    return torch.zeros(spec.shape, dtype=spec.dtype, device=spec.device)


def zeros_like(x: Any) -> Any:
    return torch.zeros_like(x)


def convert(grad: Any, like: Any) -> Any:
    if isinstance(grad, torch.Tensor):
        return grad
    if isinstance(grad, keras.Variable):
        return grad.value
    return torch.as_tensor(grad, dtype=like.dtype, device=like.device)


def static_shape(x: Any) -> tuple[int | None, ...]:
    return x.shape  # a torch.Size, which is a tuple


def cast_like(grad: Any, like: Any) -> Any:
    if grad.dtype != like.dtype:
        grad = grad.to(like.dtype)
    return grad


def ones_like(x: Any) -> Any:
    return torch.ones_like(x)


def float64_scope() -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()


def watching_reads() -> contextlib.AbstractContextManager[Any] | None:
    """No watcher: torch has no variables of its own; the keras.Variables f reads are recorded
    by the core, and the tensors it reads without receiving them are found by `hidden_inputs`."""
    return None


def plain_outputs(result: Any) -> list[Any] | None:
    """The output leaves where f returned (a floating-point tensor or a flat tuple or list of
    them, grad_fn), the kind of call the fast paths link; None for any other result.
    (Loops, not comprehensions: each comprehension is one more frame dynamo inlines.)"""
    if not (type(result) is tuple and len(result) == 2 and callable(result[1])):
        return None
    output = result[0]
    if isinstance(output, torch.Tensor):
        return [output] if output.dtype.is_floating_point else None
    if type(output) not in (tuple, list) or not output:
        return None
    for o in output:
        if not (isinstance(o, torch.Tensor) and o.dtype.is_floating_point):
            return None
    return list(output)
