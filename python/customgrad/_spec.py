"""`TensorSpec`: what a backward needs of a tensor (an input or an output), without its memory.

A leaf module (it imports nothing of customgrad), so that the backend modules can build specs
without importing the entry point.

>>> TensorSpec((2, 3), "float32", None, True)
TensorSpec(shape=(2, 3), dtype=float32)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


class TensorSpec:
    """What the backward needs of a tensor: shape (static, None for unknown dims), dtype, device,
    float or not, and for partly unknown shapes the runtime shape (a small tensor).

    A plain class with slots: one is made per input and output of every call, and a frozen
    dataclass costs three times as much to build.
    """

    __slots__ = ("shape", "dtype", "device", "floating", "runtime_shape")
    shape: tuple[int | None, ...]
    dtype: Any  # the backend's dtype object
    device: Any
    floating: bool
    runtime_shape: Any  # a small tensor, or None
    describe_as: str = "tensor"  # in error messages
    # Specs of structured tensors (TensorFlow's ragged and sparse tensors) check a gradient
    # themselves: check_gradient(grad, who, where) -> the gradient, or a GradFnResultError.
    check_gradient: Callable[[Any, str, str], Any] | None = None

    def __init__(self, shape: tuple[int | None, ...], dtype: Any, device: Any, floating: bool,
                 runtime_shape: Any = None) -> None:
        self.shape, self.dtype, self.device = shape, dtype, device
        self.floating, self.runtime_shape = floating, runtime_shape

    def __repr__(self) -> str:
        return f"TensorSpec(shape={tuple(self.shape)}, dtype={self.dtype})"


