"""Tensors being differentiated that f reads without receiving them: computed from a variable
before f ran and read by any Python route (a layer's attribute, a namespace f closes over, an
attribute of an attribute, a bound method, a generator). Their gradients would come from grad_fn,
which has none for them: TensorFlow would drop them silently (as tf.custom_gradient does). They
are found in TensorFlow's own record of the operations f ran or built (`OpRecord`), not by walking
objects: one that a tape or accumulator differentiates is refused by name (`refuse_differentiated`;
the objects f closes over are walked only to name it). In a graph a tape opened outside the
tf.function cannot be seen while f is traced: the tensors f's outputs were computed from without
receiving them pass through one more identity that gives them autodiff's gradients through f's own
operations (`through_hidden`); those f receives by keyword or a stateless scope binds are the
op's extra inputs (`GraphHidden`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope
import tensorflow as tf
from tensorflow.python.framework import op_callbacks, ops  # TensorFlow's record of f's ops
# TensorFlow's own, also while customgrad.patch_tensorflow() puts customgrad's in tf.custom_gradient
from tensorflow.python.ops.custom_gradient import custom_gradient as tf_custom_gradient

from ... import _messages as msg
from ..._closure import tensors_reachable
from .tensors import being_differentiated


class OpRecord:
    """The operations f runs (eagerly) or builds (in a graph), recorded while f runs by a
    TensorFlow op callback: TensorFlow's own record of what f computed from what, which sees
    every tensor f's outputs were computed from, whatever Python route led f to it (an attribute
    of an attribute, a bound method, a generator...). (The tapes' own record cannot be read
    from Python, and whether an output is recorded does not tell a variable read from a hidden
    tensor.) It costs f's eager operations TensorFlow's Python callback path, only where a tape
    or accumulator could record them (else f runs plainly: `link._call_eager`)."""

    __slots__ = ("made", "start")

    def __init__(self) -> None:
        self.made: dict[int, tuple[Any, Any]] = {}  # id(output) -> (output, the op's inputs)
        # every tf.Tensor takes a number from this counter as it is made (`Tensor._id`, what the
        # tapes key on): a tensor numbered after it was made while f ran (a variable's read
        # value, which no op callback sees; a constant)
        self.start = ops.uid()

    def __call__(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        # (a graph's capture of an outer tensor is no value f computed; an op without outputs,
        # as a function call with none, is given None)
        if op_type != "Placeholder" and outputs:
            for o in outputs:
                self.made[id(o)] = (o, tuple(inputs))  # o kept: its id stays its own

    @contextlib.contextmanager
    def running(self):
        op_callbacks.add_op_callback(self)
        try:
            yield self
        finally:
            op_callbacks.remove_op_callback(self)

    def sources(self, outputs: Any, received: Any) -> list[Any]:
        """The floating-point tensors f's `outputs` were computed from (through floating-point
        tensors only: no gradient flows through an integer or a shape) that f did not compute
        and did not receive (`received`: its inputs, and the variable values it read)."""
        skip = {id(t) for t in received}
        stack = [o for o in outputs if isinstance(o, tf.Tensor)]
        seen, found = set(), []
        while stack:
            t = stack.pop()
            if id(t) in seen or not (t.dtype.is_floating or t.dtype.is_complex):
                continue
            seen.add(id(t))
            made = self.made.get(id(t))
            if made is not None:
                stack.extend(made[1])
            elif t._id < self.start or _captured(t):
                if not any([id(v) in skip for v in _outer(t)]):
                    found.append(t)
        return found


def _captured(t) -> bool:
    """Whether `t` is a graph's placeholder for a tensor of an outer graph (or a tf.function's
    argument) that f's operations read: made while f ran, but no value f computed."""
    return tf.is_symbolic_tensor(t) and t.op.type == "Placeholder"


def _outer(t) -> list[Any]:
    """`t`, and where it is a graph's capture of a tensor of an enclosing graph (a tf.cond
    branch's of the tf.function's), that tensor, and so on outwards."""
    found = [t]
    while tf.is_symbolic_tensor(t) and t.op.type == "Placeholder":
        outer = [ext for ext, internal in getattr(t.graph, "captures", ()) if internal is t]
        if not outer:
            break
        t = outer[0]
        found.append(t)
    return found


def refuse_differentiated(f: Any, sources: Any) -> None:
    """Raises `msg.hidden_input` for the first of `sources` (`OpRecord.sources`) that a tape or
    forward accumulator differentiates, named by where f reaches it where the objects f closes
    over tell (`_closure.tensors_reachable`: for the message only, once found)."""
    for t in sources:
        if any([being_differentiated(v) for v in _outer(t)]):
            names = {id(v): name for name, v in tensors_reachable([f], _is_dense)}
            raise msg.hidden_input(f, through=names.get(id(t)))


def _is_dense(x) -> bool:
    return isinstance(x, tf.Tensor)


def through_hidden(outputs: Any, f_outputs: Any, hidden: Any, stop: Any) -> list[Any]:
    """`outputs` (the op's, for f's outputs `f_outputs`) passed through one more identity that
    also takes `hidden`, tensors of the graph f's outputs were computed from without f receiving
    them (`OpRecord.sources`), and gives them autodiff's gradients through f's own operations
    (grad_fn has none for them): a tape outside the tf.function may differentiate them, which
    nothing inside can tell. `stop`: the tensors whose gradients grad_fn gives."""
    n = len(outputs)

    @tf_custom_gradient
    def identity(*tensors):
        def grad(*cotangents):
            return [*cotangents, *autodiff_gradients(f_outputs, cotangents, hidden, stop)]
        return [tf.identity(t) for t in tensors[:n]], grad

    return list(identity(*outputs, *hidden))


class GraphHidden:
    """The tensors of a graph that f receives other than positionally, which a tape opened
    outside the tf.function may differentiate although nothing inside can tell (the function is
    traced without it): tf.custom_gradient would cut their gradient path, so `_call_graph` gives
    each its gradient. `keyword`: the positions among the call's tensors of floating-point ones
    passed by keyword (autodiff's gradient through f's own operations, where grad_fn gives
    none); `scope`: the values a stateless scope (`layer.stateless_call`) binds to
    keras.Variables, tensors of this graph (grad_fn gives the gradient of those f read, in
    `variables=`), the op's extra inputs. Tensors f reads without receiving them at all are
    found by TensorFlow's record of f's operations (`OpRecord`, `through_hidden`)."""

    __slots__ = ("keyword", "scope")
    keyword: list[int]
    scope: list[Any]

    def __init__(self, arguments: Any, tape_inputs: Any) -> None:
        graph = tf.compat.v1.get_default_graph()
        n_args = len(arguments.arg_is_tensor)
        self.keyword = [k for k, i in enumerate(arguments.tensor_index)
                        if i >= n_args and tape_inputs[k].dtype.is_floating]
        seen = {id(t) for t in tape_inputs}
        self.scope = (_new_in_graph(get_stateless_scope().state_mapping.values(), graph, seen)
                      if in_stateless_scope() else [])

    @property
    def extra_inputs(self) -> list[Any]:
        return self.scope


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
