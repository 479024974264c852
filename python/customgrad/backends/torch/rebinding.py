"""grad_fn sees the values f read: the values bound while f ran, bound again while grad_fn runs.

Two ways of calling a model bind values for the duration of a call only: Keras's
`layer.stateless_call` (a stateless scope: `self.kernel` reads its value) and
`torch.func.functional_call` (the module's parameters swapped for the given tensors). grad_fn runs
later, in the backward, once the call has ended; reading `self.kernel` or `self.w` there would
give the stored value, not the one f computed with, and a wrong gradient with no error. So the
link (`Rebound`) binds them again around grad_fn, as jax's link re-binds its scope
(`backends/jax/scope.py`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from keras import StatelessScope
from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope

from .modules import slot_tensors

if TYPE_CHECKING:
    from collections.abc import Callable


def _rebound(link, f, grad_fn, hidden):
    """`link`, calling grad_fn with what f read bound again (see the module's docstring), or
    `link` itself where nothing was bound only for the call (the common case: no stateless
    scope, no module f reaches with a tensor swapped in)."""
    mapping = dict(get_stateless_scope().state_mapping) if in_stateless_scope() else None
    slots = _module_slots(hidden or (), f, grad_fn)
    if mapping is None and not slots:
        return link
    return Rebound(link, mapping, slots)


# never traced: dynamo cannot read the objects f reaches (the link calls it only in eager mode,
# but dynamo resumes tracing after a graph break inside the eager call)
rebound: Callable[..., Any] = torch.compiler.disable(_rebound)


def swapped_in(module: Any) -> bool:
    """Whether a parameter slot of the module or of its submodules holds a tensor that is no
    nn.Parameter: one torch.func.functional_call swapped in for the call (a module's own
    parameters are nn.Parameters), which grad_fn reading `self.w` later would not see."""
    return any([not isinstance(t, torch.nn.Parameter) for m in module.modules()
                for t in m._parameters.values() if t is not None])


def _module_slots(hidden, *fns) -> list[Any]:
    """(slots, name, tensor) for each parameter or buffer slot of the torch modules the
    functions reach that held a hidden tensor while f ran, and each parameter slot holding a
    tensor swapped in (`swapped_in`; functional_call swaps them there), also one that does not
    require grad (grad_fn reading `self.w` still needs the value f used)."""
    ids = {id(t) for t in hidden}
    return [(slots, key, t) for kind, _, slots, key, t in slot_tensors(*fns)
            if kind != "attribute" and (id(t) in ids or (
                kind == "parameter" and not isinstance(t, torch.nn.Parameter)))]


class Rebound:
    """A `_call.Link` whose grad_fn runs with the values f read bound again: the stateless
    scope's values (`mapping`: id(variable) -> value) and the module slots of `_module_slots`.
    Called, and read (`backward`), as the link itself."""

    __slots__ = ("link", "backward", "mapping", "slots")
    link: Any  # a `_call.Link`
    backward: Any
    mapping: dict[Any, Any] | None
    slots: list[Any]

    def __init__(self, link: Any, mapping: Any, slots: Any) -> None:
        self.link, self.backward, self.mapping, self.slots = link, link.backward, mapping, slots

    def __call__(self, cotangents: Any, introspect: bool | None = None) -> list[Any]:
        with self._bound():
            return self.link(cotangents, introspect)

    @contextlib.contextmanager
    def _bound(self):
        swapped = []
        try:
            for slots, name, tensor in self.slots:
                current = slots.get(name)
                if current is not tensor:
                    swapped.append((slots, name, current))
                    slots[name] = tensor
            if self.mapping is None:
                yield
            else:
                scope = StatelessScope(initialize_variables=False)
                scope.state_mapping = dict(self.mapping)  # grad_fn's assignments stay in it
                with scope:
                    yield
        finally:
            for slots, name, current in reversed(swapped):
                slots[name] = current
