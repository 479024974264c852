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
from ..._closure import tensors_reachable
from .tensors import being_differentiated


def watched_reachable(f, inputs) -> list:
    """(name, tensor) for the floating-point tensors a tape watches that f reaches (see
    `_closure.tensors_reachable`); `inputs` (the call's own tensors) left out."""
    skip = {id(t) for t in inputs}
    found = []
    for name, tensor in tensors_reachable([f], _is_dense):
        if id(tensor) not in skip and tensor.dtype.is_floating and being_differentiated(tensor):
            skip.add(id(tensor))
            found.append((name, tensor))
    return found


def _is_dense(x) -> bool:
    return isinstance(x, tf.Tensor)


def probe(candidates):
    """A tape that watches the candidates while f runs, or a null context where there are none
    (entered, it gives None)."""
    if not candidates:
        return contextlib.nullcontext()
    return _watching([t for _, t in candidates])


@contextlib.contextmanager
def _watching(tensors):
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(tensors)
        yield tape


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
