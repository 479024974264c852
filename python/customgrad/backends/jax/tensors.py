"""What the core asks of a jax array: whether it is one, whether it is floating-point or being
differentiated, its spec, zeros and ones like it, a gradient converted to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import keras
from jax._src.interpreters.ad import JVPTracer, LinearizeTracer  # no public name tells AD tracers

from ..._spec import TensorSpec

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

_AD_TRACERS = (JVPTracer, LinearizeTracer)


def tensor_value(leaf: Any) -> Any:
    if isinstance(leaf, jax.Array):
        return leaf
    if isinstance(leaf, keras.Variable):
        return jnp.asarray(leaf.value)
    return None


def is_tensor(x: Any) -> bool:
    return isinstance(x, jax.Array)


def is_float(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def zeros_like(x: Any) -> Any:
    return jnp.zeros_like(x)  # inside jax.shard_map: varying over x's mesh axes, as x is


def ones_like(x: Any) -> Any:
    return jnp.ones_like(x)  # (the seed of customgrad.grad's VJP: its type is the loss's)


def one_device_sum_of_squares(local: Any) -> Any:
    """`local` itself: Keras's distributions on jax (DataParallel, ModelParallel, also across
    processes) run one program over global arrays, so the sum is one device's already. (Inside
    `jax.shard_map` an array is one shard; there, reduce with `jax.lax.psum` yourself.)"""
    return local


def sees_closures() -> bool:
    return True  # f's closure cells can be read while a call runs


def being_differentiated(x: Any, closed_over: bool = False) -> bool:
    """Whether `x` is traced by reverse- or forward-mode differentiation (jax.grad, jax.vjp,
    jax.jvp). Under jax.jit alone it is not; differentiation outside a jit (grad of jit) cannot
    be seen from inside it."""
    return isinstance(x, _AD_TRACERS)


def spec(x: Any) -> Any:
    return TensorSpec(tuple(x.shape), x.dtype, None, is_float(x))


def zeros(spec: Any) -> Any:
    return jnp.zeros(spec.shape, spec.dtype)


def convert(grad: Any, like: Any) -> Any:
    if isinstance(grad, keras.Variable):
        grad = grad.value
    return jnp.asarray(grad)


def static_shape(x: Any) -> tuple[int | None, ...]:
    return tuple(x.shape)


def cast_like(grad: Any, like: Any) -> Any:
    if grad.dtype != like.dtype:
        grad = grad.astype(like.dtype)
    return grad


def watching_reads() -> AbstractContextManager[Any] | None:
    """No watcher: jax has no variables of its own; the keras.Variables f reads are recorded by
    the core."""
    return None
