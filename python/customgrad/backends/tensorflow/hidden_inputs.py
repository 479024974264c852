"""Tensors being differentiated that f reads without receiving them: computed from a variable
before f ran and read through an object (a layer's attribute, a namespace f closes over). Their
gradients would come from grad_fn, which has none for them: TensorFlow would drop them silently
(as tf.custom_gradient does). They are found before f runs, among the objects f reaches
(`watched_reachable`); f then runs under a tape that watches them, and one that f's outputs
depend on is refused by name (`refuse_used`). Where none is found, this costs one walk of f's
closure and its objects' attributes.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from ... import _messages as msg
from ..._closure import objects_of
from .tensors import being_differentiated


def watched_reachable(f, inputs) -> list:
    """(name, tensor) for the floating-point tensors a tape watches that f reaches through
    what it closes over, the globals it names or its `self`: one of those, an element of one
    that is a list, tuple or dict, or an attribute of one; `inputs` (the call's own tensors)
    left out."""
    skip = {id(t) for t in inputs}
    found = []
    for name, obj in objects_of(f):
        if isinstance(obj, tf.Tensor):  # a global (closed-over ones the core refuses first)
            items = [(name, obj)]
        elif isinstance(obj, (list, tuple, dict)):
            pairs = obj.items() if isinstance(obj, dict) else enumerate(obj)
            items = [(f"{name}[{key!r}]", value) for key, value in pairs
                     if isinstance(value, tf.Tensor)]
        else:
            attributes = getattr(obj, "__dict__", None) or {}
            items = [(f"{name}.{key}", value) for key, value in attributes.items()
                     if isinstance(value, tf.Tensor)]
        for label, tensor in items:
            if id(tensor) not in skip and tensor.dtype.is_floating \
                    and being_differentiated(tensor):
                skip.add(id(tensor))
                found.append((label, tensor))
    return found


def probe(candidates):
    """A tape that watches the candidates while f runs, or a null context where there are none
    (entered, it gives None)."""
    if not candidates:
        return contextlib.nullcontext()
    return _WatchingTape(candidates)


class _WatchingTape(tf.GradientTape):
    def __init__(self, candidates):
        super().__init__(watch_accessed_variables=False)
        self.candidates = [t for _, t in candidates]

    def __enter__(self):
        tape = super().__enter__()
        tape.watch(self.candidates)
        return tape


def refuse_used(f, tape, candidates, outputs) -> None:
    """Raises `msg.hidden_input` naming the first candidate f's outputs depend on (`tape`: the
    `probe` f ran under)."""
    targets = [o for o in outputs if isinstance(o, tf.Tensor) and o.dtype.is_floating]
    if not candidates or not targets:
        return
    grads = tape.gradient(targets, [t for _, t in candidates],
                          unconnected_gradients=tf.UnconnectedGradients.NONE)
    for (name, _), grad in zip(candidates, grads):
        if grad is not None:
            raise msg.hidden_input(f, through=name)
