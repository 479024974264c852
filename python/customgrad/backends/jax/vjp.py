"""What `customgrad.remat` and the gradient checker ask of jax beside a call: a VJP over flat
leaves, the inputs of a recomputation, and a scope in which float64 stays float64."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from .tensors import is_float

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager


def recomputation_inputs(leaves: list[Any]) -> list[Any]:
    # inside a compiled program XLA would merge the recomputation with the forward it equals
    # (common-subexpression elimination) and keep the intermediates after all; an optimization
    # barrier prevents that, as in jax.checkpoint
    arrays = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.Array)]
    leaves = list(leaves)
    for i, leaf in zip(arrays, jax.lax.optimization_barrier([leaves[i] for i in arrays])):
        leaves[i] = leaf
    return leaves


def vjp_flat(fn: Callable[..., Any], values: list[Any],
             reusable: bool = True) -> tuple[Sequence[Any], Callable[[list[Any]], list[Any]]]:
    """Runs fn(*values) -> output leaves; returns (outputs, back(cotangent leaves) -> grads).
    (A jax VJP function can always run again: `reusable` is for tensorflow's tape.)"""
    outputs, back = jax.vjp(lambda *v: fn(*v), *values)

    def backward(cotangents):  # one per output (the core filled in zeros: `_autodiff._filled`)
        cts = [
            None if o is None  # an output leaf None: an empty structure to jax, no cotangent
            else jnp.asarray(ct, o.dtype) if is_float(o)
            else np.zeros(o.shape, dtype=jax.dtypes.float0)
            for o, ct in zip(outputs, cotangents)
        ]
        return list(back(cts))

    return outputs, backward


def float64_scope() -> AbstractContextManager[Any]:
    """float64 arrays need JAX's x64 mode (off by default); scoped to the block."""
    return jax.enable_x64(True)
