"""Tensors being differentiated that f reads without receiving them: computed from a variable
before f ran and read through an object (a layer's attribute, a namespace f closes over). Their
gradients would come from grad_fn, which has none for them: TensorFlow would drop them silently
(as tf.custom_gradient does). They are found before f runs, among the objects f reaches
(`watched_reachable`); f then runs under a tape that watches them, and one that f's outputs
depend on is refused by name (`refuse_used`). Where none is found, this costs one walk of f's
closure and its objects' attributes. In a graph they are also found for a tape opened outside the
tf.function, which nothing inside can see (`GraphHidden`): they become extra inputs of the call's
op, with autodiff's gradients through f's own operations (`autodiff_gradients`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope
import tensorflow as tf

from ... import _messages as msg
from ..._closure import tensors_reachable
from .tensors import being_differentiated


def watched_reachable(f: Any, inputs: Any) -> list[Any]:
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


def probe(candidates: Any) -> Any:
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


def refuse_used(f: Any, tape: Any, candidates: Any, outputs: Any) -> None:
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


class GraphHidden:
    """The tensors of a graph that f reaches without receiving them positionally, which a tape
    opened outside the tf.function may differentiate although nothing inside can tell (the
    function is traced without it): tf.custom_gradient would cut their gradient path, so
    `_call_graph` makes them extra inputs of its op and gives each its gradient. `keyword`: the
    positions among the call's tensors of floating-point ones passed by keyword; `reached`:
    floating-point tensors of this graph in f's closure cells or reached through the objects f
    closes over (see `_closure.tensors_reachable`); `scope`: the values a stateless scope
    (`layer.stateless_call`) binds to keras.Variables, tensors of this graph (grad_fn gives the
    gradient of those f read, in `variables=`). The last two are the op's extra inputs, in that
    order."""

    __slots__ = ("keyword", "reached", "scope")
    keyword: list[int]
    reached: list[Any]
    scope: list[Any]

    def __init__(self, arguments: Any, tape_inputs: Any) -> None:
        graph = tf.compat.v1.get_default_graph()
        n_args = len(arguments.arg_is_tensor)
        self.keyword = [k for k, i in enumerate(arguments.tensor_index)
                        if i >= n_args and tape_inputs[k].dtype.is_floating]
        seen = {id(t) for t in tape_inputs}
        self.reached = _new_in_graph((t for _, t in tensors_reachable([arguments.f], _is_dense)),
                                     graph, seen)
        self.scope = (_new_in_graph(get_stateless_scope().state_mapping.values(), graph, seen)
                      if in_stateless_scope() else [])

    @property
    def extra_inputs(self) -> list[Any]:
        return self.reached + self.scope


def _new_in_graph(tensors, graph, seen) -> list[Any]:
    """The floating-point tensors of `graph` or of a graph enclosing it among `tensors` not in
    `seen` (ids, updated), the latter as `graph` captures them (the placeholders f's
    operations read)."""
    found = []
    for t in tensors:
        if id(t) in seen or not _symbolic_float(t):
            continue
        seen.add(id(t))
        if t.graph is graph:
            found.append(t)
        elif _encloses(t.graph, graph):
            captured = graph.capture(t)
            if id(captured) not in seen:
                seen.add(id(captured))
                found.append(captured)
    return found


def _symbolic_float(t) -> bool:
    # an eager tensor a tape watches is seen as differentiated while f runs (`watched_reachable`)
    return isinstance(t, tf.Tensor) and tf.is_symbolic_tensor(t) and t.dtype.is_floating


def _encloses(outer, graph) -> bool:
    """Whether `outer` is a graph `graph` is built inside (a tf.function's, around this one):
    a tensor of another graph (one a layer kept from an earlier trace) is not `graph`'s to
    read."""
    graph = getattr(graph, "outer_graph", None)
    while graph is not None:
        if graph is outer:
            return True
        graph = getattr(graph, "outer_graph", None)
    return False


def autodiff_gradients(outputs: Any, cotangents: Any, targets: Any, stop: Any) -> list[Any]:
    """Autodiff's gradients of `targets` through f's own operations (f ran on them in this
    graph), for the hidden tensors grad_fn has no gradient for: `outputs`, f's outputs the
    op linked, `cotangents` theirs; `stop`: the tensors whose gradients grad_fn gives, which
    the path must not go through again."""
    ys, grad_ys = [], []
    for y, ct in zip(outputs, cotangents):
        if y.dtype.is_floating:
            ys.append(y)
            grad_ys.append(tf.zeros_like(y) if ct is None else ct)
    if not ys or not targets:
        return [None] * len(targets)
    return tf.gradients(ys, targets, grad_ys=grad_ys, stop_gradients=stop,
                        unconnected_gradients=tf.UnconnectedGradients.NONE)
