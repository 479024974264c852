"""What a call depends on without receiving it as an argument.

* The leaf tensors that require grad (an nn.Parameter, a torch module's weights) that f read:
  autograd would train them with no gradient from grad_fn, so they are found (`hidden_leaves`,
  a walk of the autograd nodes f made) and routed to grad_fn like keras.Variables, or refused
  by name (`hidden_leaves_error`).
* The tensors grad_fn's closure holds: as autograd checks the tensors saved for backward, the
  backward checks that none was changed in place since the forward (`closure_versions`,
  `check_versions`).
"""

from __future__ import annotations

import torch

from ... import _messages as msg

next_node_number = torch._C._autograd._get_sequence_nr  # of this thread's next autograd node
_AccumulateGrad = torch._C._functions.AccumulateGrad


def hidden_leaves(outputs, inputs, known, start) -> list:
    """The leaf tensors that require grad that f's outputs were computed from without f
    receiving them: not `inputs`, not `known` (the keras.Variable values f read).

    Walks the autograd nodes f made (numbered `start` or later), from the outputs down to their
    leaves; the walk stops at nodes made before f ran, so it costs one step per op of f, and a
    node or two for f on plain tensors. A tensor made outside f and closed over is not a leaf
    here: it is not followed. (Written for speed: it runs on every call.)
    """
    stack, found = [], None
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.requires_grad:
            node = o.grad_fn
            if node is None:  # f returned a leaf as it is
                found = [o] if found is None else found + [o]
            elif node._sequence_nr() >= start:  # else an input returned as it is
                stack.append(node)
    seen = set()
    while stack:
        for node, _ in stack.pop().next_functions:
            if node is None or node in seen:
                continue
            seen.add(node)
            if type(node) is _AccumulateGrad:
                leaf = node.variable
                for t in inputs:
                    if t is leaf:
                        break
                else:
                    found = [leaf] if found is None else found + [leaf]
            elif node._sequence_nr() >= start:
                stack.append(node)
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


def hidden_leaves_error(f, grad_fn, hidden) -> msg.CustomGradientError:
    names = _parameter_names(f, grad_fn)
    described = ", ".join(
        f"the parameter {names[id(t)]!r} (shape {tuple(t.shape)})" if id(t) in names
        else f"a tensor of shape {tuple(t.shape)}" for t in hidden
    )
    return msg.torch_hidden_leaves(f, grad_fn, described)


def _parameter_names(*fns) -> dict:
    """id(parameter) -> its name, as `module.weight`, for the torch modules that the functions
    close over or name as globals (directly, or as an attribute of an object such as a Keras
    layer: `self.dense.weight`); for messages."""
    objects = []  # (name in the function, object)
    for fn in fns:
        code = getattr(fn, "__code__", None)
        if code is None:
            continue
        for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                objects.append((name, cell.cell_contents))
            except ValueError:  # an empty cell
                pass
        scope = getattr(fn, "__globals__", {})
        objects.extend((name, scope[name]) for name in code.co_names if name in scope)
    names = {}
    for label, obj in objects:
        if isinstance(obj, torch.nn.Module):
            modules = [(label, obj)]
        else:
            attributes = getattr(obj, "__dict__", None) or {}
            modules = [(f"{label}.{key}", m) for key, m in attributes.items()
                       if isinstance(m, torch.nn.Module)]
        for prefix, module in modules:
            for name, p in module.named_parameters():
                names.setdefault(id(p), f"{prefix}.{name}")
    return names


def closure_versions(grad_fn) -> list:
    """(name, tensor, version) for each tensor grad_fn's closure holds, for `check_versions`:
    grad_fn would compute with values changed in place, a wrong gradient and no error."""
    # compiled graphs are functional, and dynamo cannot read a closure's cells
    if torch.compiler.is_compiling():
        return []
    cells = getattr(grad_fn, "__closure__", None)
    if not cells:
        return []
    versions = []
    for name, cell in zip(grad_fn.__code__.co_freevars, cells):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: a variable not assigned yet
            continue
        if isinstance(value, torch.Tensor):
            versions.append((name, value, value._version))
    return versions


def check_versions(versions, f):
    """Raises if a tensor of `closure_versions` was changed in place since."""
    for name, tensor, version in versions:
        if tensor._version != version:
            raise msg.torch_modified_in_place(f, name, tensor.shape, version, tensor._version)
