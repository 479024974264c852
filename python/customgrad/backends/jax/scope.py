"""Keras variables as inputs of a custom_vjp (custom_jvp): the stateless scope that binds them.

Keras's JAX trainer keeps variable values in a stateless scope (and purges the variables
themselves during fit), so f and grad_fn must read the values this call was given: the
custom_vjp inputs, not the outer trace's tracers.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from keras import StatelessScope
from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope


def scope_mapping() -> dict[Any, Any] | None:
    """The active stateless scope's mapping from id(variable) to value (None outside one)."""
    return get_stateless_scope().state_mapping if in_stateless_scope() else None


def collects_losses(mapping: dict[Any, Any] | None) -> bool:
    """Whether the caller collects the losses added in its stateless scope (model.fit)."""
    return mapping is not None and get_stateless_scope().collect_losses


class _BoundScope(StatelessScope):
    """The stateless scope f and grad_fn run in: variable reads return this call's values, and
    the assignments made inside are kept (in order, with their variables) to be passed on."""

    def __init__(self, mapping: dict[Any, Any]):
        super().__init__(initialize_variables=False)
        self.state_mapping = mapping
        self.updates = {}

    def add_update(self, update):
        super().add_update(update)
        self.updates[id(update[0])] = update


@contextmanager
def variables_bound(mapping: dict[Any, Any] | None, ids: list[Any], values: Any):
    """Variable reads inside the block return `values` for the variables `ids`; yields the
    scope (None outside a stateless scope, `mapping` None)."""
    if mapping is None:
        yield None
        return
    with _BoundScope({**mapping, **dict(zip(ids, values))}) as scope:
        yield scope
