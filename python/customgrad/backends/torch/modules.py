"""The torch modules a function reaches, and the tensors in their slots: one walk for the three
places that need them. A module's slots are where a call puts the tensors that stand for its
weights: `torch.func.functional_call` swaps parameters and buffers in, FSDP1 sets views of a flat
parameter, torch's forward-mode idiom sets dual tensors as plain attributes. The reverse walk
(`hidden_inputs`), the forward one (`forward_mode.hidden_tangents`) and the re-binding around
grad_fn (`rebinding`) all read them here, so they agree on what a module's weight is.

>>> import torch
>>> linear = torch.nn.Linear(2, 1)
>>> def f(x):
...     return linear(x)
>>> [(kind, name) for kind, name, *_ in slot_tensors(f)]
[('parameter', 'linear.weight'), ('parameter', 'linear.bias')]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..._closure import objects_of

if TYPE_CHECKING:
    from collections.abc import Iterator

_Module = torch.nn.Module
_Tensor = torch.Tensor


def modules_reached(*fns: Any) -> list[tuple[str, Any]]:
    """(name, module) for each torch module the functions reach, once: one they close over, name
    as a global or belong to (`self`), one held as an attribute of such an object (a Keras
    layer's `self.dense`), and their submodules."""
    found, seen = [], set()
    for label, obj in objects_of(*fns):
        if isinstance(obj, _Module):
            tops = [(label, obj)]
        else:
            tops = [(f"{label}.{key}", m) for key, m in (getattr(obj, "__dict__", None) or {}).items()
                    if isinstance(m, _Module)]
        for prefix, top in tops:
            for name, m in top.named_modules(prefix=prefix):
                if id(m) not in seen:
                    seen.add(id(m))
                    found.append((name, m))
    return found


def slot_tensors(*fns: Any) -> Iterator[tuple[str, str, dict, str, Any]]:
    """(kind, name, slots, key, tensor) for each tensor in a slot of the modules the functions
    reach (`modules_reached`): kind "parameter", "buffer" or "attribute" (a tensor set as a plain
    attribute), `slots[key] is tensor`."""
    for path, m in modules_reached(*fns):
        for kind, slots in (("parameter", m._parameters), ("buffer", m._buffers),
                            ("attribute", m.__dict__)):
            for key, t in slots.items():
                # (a parameter registered as None, as `Linear(bias=False)` does, is none)
                if isinstance(t, _Tensor):
                    yield kind, f"{path}.{key}", slots, key, t
