"""What a call depends on without receiving it as an argument: the tensors that require grad
that f read without receiving them, a leaf (an nn.Parameter, a torch module's weights) or one
computed before f ran (a view of a flat parameter, as FSDP1 makes a module's weights). Autograd
would train them with no gradient from grad_fn, so they are found (`hidden_tensors`, a walk of
the autograd nodes f made) and routed to grad_fn like keras.Variables (a computed one then
passes its gradient on to where it came from), or refused by name (`hidden_leaves_error`,
`msg.torch_hidden_computed`).
"""

from __future__ import annotations

from typing import Any

import keras
import torch

from ... import _messages as msg
from ..._closure import objects_of, tensors_reachable
from .modules import slot_tensors

next_node_number = torch._C._autograd._get_sequence_nr  # of this thread's next autograd node
_AccumulateGrad = torch._C._functions.AccumulateGrad
_Tensor = torch.Tensor


def hidden_tensors(outputs: Any, inputs: Any, known: Any, start: Any, f: Any = None) -> list[Any]:
    """The tensors that require grad that f's outputs were computed from without f receiving
    them: not `inputs`, not `known` (the keras.Variable values f read). Leaves, and tensors
    computed before f ran that f reached through an object (a module's weight that is a view of
    a flat parameter); one of those that cannot be found among the objects `f` closes over is a
    CustomGradientError.

    Walks the autograd nodes f made (numbered `start` or later), from the outputs down to their
    leaves; the walk stops at nodes made before f ran, so it costs one step per op of f, and a
    node or two for f on plain tensors. (Written for speed: it runs on every call.) They come
    in the order f used them (a linear layer's weight, then its bias), as keras.Variables do.
    """
    stack, found = [], None
    for o in outputs:
        if isinstance(o, _Tensor) and o.requires_grad:
            node = o.grad_fn
            if node is None:  # f returned a leaf as it is
                found = [o] if found is None else found + [o]
            elif node._sequence_nr() >= start:  # else an input returned as it is
                stack.append(node)
    ends, seen = None, set()  # where the walk ends: {node: (number of its first user, node)}
    while stack:
        user = stack.pop()
        for node, _ in user.next_functions:
            if node is None:
                continue
            if type(node) is _AccumulateGrad:
                leaf = node.variable
                for t in inputs:
                    if t is leaf:
                        break
                else:
                    leaf = None
                if leaf is not None:  # an input's: received
                    continue
            elif node._sequence_nr() >= start:  # made by f: walked on
                if node not in seen:
                    seen.add(node)
                    stack.append(node)
                continue
            # a leaf f did not receive, or a node made before f ran (an input's own graph, or a
            # tensor f reached otherwise): the walk ends here
            if ends is None:
                ends = {}
            number = user._sequence_nr()
            if ends.get(node, (number,))[0] >= number:
                ends[node] = (number, node)
    if ends is not None:
        in_order = [node for _, node in sorted(ends.values(), key=lambda e: e[0])]
        earlier = [n for n in in_order if type(n) is not _AccumulateGrad]
        computed = _computed_before(earlier, inputs, known, f) if earlier else {}
        for node in in_order:  # leaves and computed tensors, in the order f used them
            t = node.variable if type(node) is _AccumulateGrad else computed.get(node)
            if t is not None:
                found = [t] if found is None else found + [t]
    if found is None:
        return []
    skip = {id(t) for t in inputs}
    skip.update(id(t) for t in known)
    hidden = []
    for t in found:
        if id(t) not in skip:
            skip.add(id(t))
            hidden.append(t)
    return hidden


def may_read_hidden(f: Any) -> bool:
    """Whether f reaches (see `_closure.tensors_reachable`, `modules.slot_tensors`) a tensor that
    requires grad, other than a keras.Variable's value (recorded when read). For
    torch.compile, whose tracing has no autograd nodes to walk: such a call runs eagerly, where
    the walk tells which of them f read."""
    keras_values = set()
    for _, obj in objects_of(f):
        if isinstance(obj, keras.Layer):
            keras_values.update(id(v._value) for v in obj.variables)
    return any(t.requires_grad and id(t) not in keras_values for _, t, _ in reachable(f))


def _computed_before(nodes, inputs, known, f) -> dict[Any, Any]:
    """{node: tensor} for the autograd nodes `nodes` (made before f ran), less those of the
    inputs and of the `known` values (a keras.Variable's value in a stateless scope, which
    `layer.stateless_call` computed before f ran):
    the tensors found among the objects f closes over or names (FSDP1 puts a module's weights
    there as views of its flat parameter). Raises, naming the ops, for one not found there."""
    own = {t.grad_fn for t in (*inputs, *known)
           if isinstance(t, torch.Tensor) and t.grad_fn is not None}
    nodes = [n for n in nodes if n not in own]
    if not nodes:
        return {}
    by_node = {}
    for name, t, weight in reachable(f):
        if t.grad_fn is not None:
            by_node.setdefault(t.grad_fn, (name, t, weight))
    missing = [n.name() for n in nodes if n not in by_node]
    if missing:
        raise msg.torch_hidden_computed(f, missing)
    for n in nodes:
        name, _, weight = by_node[n]
        if not weight:
            raise msg.hidden_input(f, through=name)
    return {n: by_node[n][1] for n in nodes}


def reachable(f: Any) -> list[tuple[str, Any, bool]]:
    """(name, tensor, whether it stands for a model's weight) for the tensors f reaches through
    the objects it closes over (`_closure.tensors_reachable`) and in the slots of the torch
    modules it reaches (`modules.slot_tensors`): the names that place them.

    A computed tensor f reads without receiving it stands for a weight, whose gradient grad_fn
    gives in `variables=` as a variable's, where a torch module holds it (a parameter or buffer,
    as `torch.func.functional_call` swaps them in, or a tensor attribute, as torch's
    forward-mode idiom sets dual tensors) or where it is a view of a leaf (FSDP1 makes a
    module's weights views of one flat parameter). Any other (`t = 2 * p`, computed from a
    tensor being differentiated) is refused, as on every backend: the autodiff's record names
    its node, not the tensor grad_fn would be handed, and grad_fn has no gradient for it."""
    held = [(name, t, True) for _, name, _, _, t in slot_tensors(f)]
    held_ids = {id(t) for _, t, _ in held}
    return held + [(name, t, _view_of_a_leaf(t)) for name, t in tensors_reachable([f], _is_tensor)
                   if id(t) not in held_ids]


def _view_of_a_leaf(t) -> bool:
    base = t._base if t._is_view() else None
    return base is not None and base.grad_fn is None and base.requires_grad


def _is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def hidden_leaves_error(f: Any, grad_fn: Any, hidden: Any) -> msg.CustomGradientError:
    names = _parameter_names(f, grad_fn)
    described = ", ".join(
        f"the parameter {names[id(t)]!r} (shape {tuple(t.shape)})" if id(t) in names
        else f"a tensor of shape {tuple(t.shape)}" for t in hidden
    )
    return msg.torch_hidden_leaves(f, grad_fn, described)


def _parameter_names(*fns) -> dict[Any, Any]:
    """id(parameter) -> its name, as `module.weight`, for the torch modules that the functions
    reach (`modules.modules_reached`: `self.dense.weight` of a Keras layer's); for messages."""
    names = {}
    for kind, name, _, _, t in slot_tensors(*fns):
        if kind == "parameter":
            names.setdefault(id(t), name)
    return names
