"""NumPy: forward only. The numpy backend has no autodiff, so no gradient can be taken here;
the decorated function returns f's output and grad_fn is never called."""

from __future__ import annotations

import contextlib
from typing import Any

import keras
import numpy as np

from .._spec import TensorSpec


# capabilities (see _contract.py)
HAS_AUTODIFF = False
HAS_FAST_PATH = False
FORWARD_MODE_OPT_IN = False

__all__ = ["HAS_AUTODIFF", "HAS_FAST_PATH", "FORWARD_MODE_OPT_IN", "being_differentiated", "call",
           "float64_scope", "is_float", "is_tensor", "sees_closures", "spec", "tensor_value"]


def tensor_value(leaf: Any) -> Any:
    if isinstance(leaf, np.ndarray):
        return leaf
    if isinstance(leaf, keras.Variable):
        return leaf.value
    return None


def is_tensor(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def is_float(x: Any) -> bool:
    return np.issubdtype(x.dtype, np.inexact)


def sees_closures() -> bool:
    return True  # f's closure cells can be read while a call runs


def being_differentiated(x: Any, closed_over: bool = False) -> bool:
    return False  # no autodiff here


def spec(x: Any) -> Any:
    return TensorSpec(x.shape, x.dtype, None, is_float(x))


def call(arguments: Any) -> Any:
    return arguments.output(arguments.tensor_values)[0]


def float64_scope() -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()
