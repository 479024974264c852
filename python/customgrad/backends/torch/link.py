"""The general call (`call`) and the link: f's outputs, detached, re-attached to the inputs
through an autograd.Function (`functions.py`; `forward_mode.DualLink` for dual tensors) whose
backward calls the call's `_call.Link`, which `guard` checks first: that grad_fn takes the
hidden tensors f read, and, as autograd checks the tensors saved for backward, that none of the
tensors grad_fn's closure holds was changed in place since the forward (`version_guard`)."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..._convention import inspect_grad_fn
from .forward_mode import DualLink, has_tangents, hidden_tangents, primals, tangent_test
from .functions import LinkFunction, functorch_link, functorch_link_eagerly
from ... import _messages as msg
from .hidden_inputs import hidden_tensors, hidden_leaves_error, may_read_hidden, next_node_number
from .rebinding import rebound

def _requires_grad(t) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad


def call(arguments: Any) -> Any:
    if torch.compiler.is_compiling() and reaches_hidden(arguments.f):
        return _eager_call(arguments)  # a graph break: the walk below tells what f read
    values = arguments.tensor_values
    if torch.compiler.is_compiling():
        # f runs on the inputs detached: torch.compile does not differentiate grad_fn (no
        # double backward)
        received = [t.detach() if _requires_grad(t) else t for t in values]
        return compiled_link(arguments, *arguments.forward(received))
    dual = has_tangents(values)
    start = next_node_number()
    received = primals(values)  # (after `start`: the autograd walk sees their views as f's)
    return link(arguments, *arguments.forward(received), start, dual=dual, received=received)


# evaluated by dynamo as it traces (it cannot read closure cells itself), its answer a constant
reaches_hidden = torch.compiler.assume_constant_result(may_read_hidden)
_eager_call = torch.compiler.disable(call, reason=(
    "customgrad: f reaches a tensor that requires grad without receiving it (an attribute, a "
    "list or dict element, a parameter); only the eager walk of the autograd nodes f makes tells "
    "whether f read it, for grad_fn's variables=, so the call runs eagerly. Pass such tensors "
    "to f positionally to compile it whole."))


def compiled_link(arguments: Any, output: Any, out_leaves: Any, backward: Any) -> Any:
    """`link` while torch.compile traces, for what f returned run on its inputs detached. An
    output that requires grad then tells that f read a tensor that requires grad without
    receiving it, which tracing has no autograd nodes to find: the call then runs eagerly, where
    they are found (f's traced ops go unused)."""
    if any([_requires_grad(o) for o in out_leaves]) and not any(
            [_requires_grad(t) for t in backward.reads.values]):
        return _eager_call(arguments)
    return link(arguments, output, out_leaves, backward, None)


def link(arguments: Any, output: Any, out_leaves: Any, backward: Any, start: Any,
         hidden: Any = None, dual: bool = False, received: Any = None) -> Any:
    """Attaches the outputs of the forward f ran (with autograd on) to the inputs through
    `LinkFunction`, whose backward runs grad_fn (through `backward.link(...)`, a `_call.Link`); returns
    the output (f's `output`, when nothing needs grad).

    `start`: the number of the first autograd node f could have made (None under
    torch.compile, whose tracing has no autograd nodes to walk); `hidden`: the leaf tensors
    requiring grad that f read without receiving them (None: not looked for yet); `dual`: an
    input carries a forward-mode tangent, and `DualLink` links every input; `received`: the
    tensors f ran on, where they are not the inputs (`forward_mode.primals`)."""
    # forward mode: whether a tensor carries a tangent (None: none can)
    carries = None if torch.compiler.is_compiling() else tangent_test()
    if not torch.is_grad_enabled() and not dual and carries is None:
        return output
    # Under torch.vmap a batched tensor says requires_grad=False even when the tensor it wraps
    # requires grad: under functorch transforms every differentiable input is linked.
    transformed = torch._C._are_functorch_transforms_active()
    values = arguments.tensor_values
    inputs = [
        k for k, (t, diff) in enumerate(zip(values, arguments.differentiable))
        if diff and (transformed or dual or t.requires_grad)
    ]
    variables, var_values = backward.reads.variables, backward.reads.values
    if hidden is None and start is not None:
        hidden = hidden_tensors(out_leaves, values, var_values, start, arguments.f)
    if carries is not None:
        more = hidden_tangents(arguments.f, backward.grad_fn, carries, values,
                               [*var_values, *(hidden or ())])
        if more:
            hidden = [*(hidden or ()), *more]
        elif not any([carries(t) for t in (*(values if received is None else received),
                                           *var_values, *(hidden or ()))]) and any(
                [carries(o) for o in out_leaves]):
            # forward mode's own record: f's outputs carry a tangent that none of what f
            # received or read carries, so f read one the walk above did not find
            raise msg.torch_hidden_tangent(arguments.f, backward.grad_fn, [])
    if hidden:
        # routed like the keras.Variables f read: grad_fn gets them in variables=
        variables, var_values = [*variables, *hidden], [*var_values, *hidden]
    wanted = [v for v in var_values if _requires_grad(v)  # the variables autograd differentiates
              or (carries is not None and carries(v))]
    if carries is not None and not transformed and not dual:  # tangents through variables only
        dual = any([carries(v) for v in wanted])
    if not inputs and not wanted:
        return output
    del output
    # detached: the parts of the forward graph grad_fn does not use are dropped now
    result = [o.detach() if isinstance(o, torch.Tensor) else o for o in out_leaves]
    del out_leaves
    linked_outputs = backward.float_outputs
    outputs = [result[j] for j in linked_outputs]
    every_output = len(linked_outputs) == len(result)
    linked_inputs = values if len(inputs) == len(values) else [values[k] for k in inputs]
    if wanted:
        linked_inputs = linked_inputs + wanted
    link = backward.link(None if every_output else linked_outputs, inputs, variables, var_values,
                         wanted, guard(backward.f, backward.grad_fn, hidden))
    if not torch.compiler.is_compiling():
        link = rebound(link, backward.f, backward.grad_fn, hidden)
    if transformed:
        apply = (functorch_link_eagerly if torch.compiler.is_compiling()
                 else functorch_link)
        linked = apply(link, len(outputs), *outputs, *linked_inputs)
    elif dual:
        linked = DualLink.apply(link, outputs, *linked_inputs)
    else:
        linked = LinkFunction.apply(link, outputs, *linked_inputs)
    for j, t in zip(linked_outputs, linked):
        result[j] = t
    return backward.rebuild(result)


def guard(f: Any, grad_fn: Any, hidden: Any = None) -> Any:
    """What the link checks before grad_fn runs (None: nothing): that grad_fn takes the hidden
    leaves f read (in `variables=`), and `version_guard`'s check (eager calls only)."""
    unchanged = None if torch.compiler.is_compiling() else version_guard(f, grad_fn)
    if hidden:
        return _hidden_guard(f, grad_fn, hidden, unchanged)
    return unchanged


def _hidden_guard(f, grad_fn, hidden, unchanged):
    def check():
        if not inspect_grad_fn(grad_fn).accepts_variables:
            raise hidden_leaves_error(f, grad_fn, hidden)
        if unchanged is not None:
            unchanged()

    return check


def version_guard(f: Any, grad_fn: Any) -> Any:
    """The check that none of the tensors grad_fn's closure holds was changed in place since
    now (None where it holds none): grad_fn would compute with the changed values, a wrong
    gradient and no error, where autograd refuses a saved tensor changed so. Eager calls only
    (compiled graphs are functional, and dynamo cannot read a closure's cells). Runs on every
    eager call: a partial, which costs less than a closure.

    >>> def scale(x, t):
    ...     return x * t, lambda dy: dy * t
    >>> x, t = torch.ones(2), torch.ones(2)
    >>> check = version_guard(scale, scale(x, t)[1])
    >>> check()  # t unchanged: nothing to say
    >>> _ = t.mul_(2.0)
    >>> check()
    Traceback (most recent call last):
    ...
    RuntimeError: customgrad.custom_gradient: `t`, a tensor the grad_fn of `scale` uses ...
    >>> version_guard(scale, lambda dy: dy) is None  # a grad_fn that holds no tensor
    True
    """
    cells = getattr(grad_fn, "__closure__", None)
    if not cells:
        return None
    # (name, tensor, its version now), for `check_versions`. (The cells are read here rather
    # than through `_closure.closure_cells`: this runs on every eager call, and the helper's
    # call and list cost ~1% of a step, cachegrind-counted.)
    versions = []
    for name, cell in zip(grad_fn.__code__.co_freevars, cells):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: a variable not assigned yet
            continue
        if isinstance(value, torch.Tensor):
            versions.append((name, value, value._version))
    return functools.partial(check_versions, versions, f) if versions else None


def check_versions(versions: Any, f: Any) -> None:
    """Raises if a tensor of `version_guard`'s list was changed in place since."""
    for name, tensor, version in versions:
        if tensor._version != version:
            raise msg.torch_modified_in_place(f, name, tensor.shape, version, tensor._version)
