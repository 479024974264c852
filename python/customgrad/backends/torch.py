"""PyTorch: f runs once with autograd on; its outputs are detached and re-attached to the inputs
through `_Link`, an autograd.Function whose backward is grad_fn.

Running f with autograd on (rather than inside autograd.Function.forward, which runs under
no_grad) keeps the tensors grad_fn closes over connected to the inputs, so double backward
(`create_graph=True`) differentiates grad_fn itself. Detaching the outputs drops every part of the
forward graph that grad_fn does not use.
"""

from __future__ import annotations

import contextlib
import sys

import keras
import torch

from torch._C._functorch import TransformType
from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
from torch.autograd import forward_ad

from .. import _forward, _messages as msg
from .._call import Call, check_gradients, plain_backward, plain_gradients
from .._convention import inspect_grad_fn, upstream_arguments
from .._spec import OutputSpec
from .._variables import recording


# capabilities (see _contract.py)
HAS_AUTODIFF = True
HAS_FAST_PATH = True
FORWARD_MODE_OPT_IN = False


def tensor_value(leaf):
    if isinstance(leaf, torch.Tensor):
        return leaf
    if isinstance(leaf, keras.Variable):
        return leaf.value
    return None


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def is_float(x) -> bool:
    return x.is_floating_point() or x.is_complex()


def sees_closures() -> bool:
    """Whether f's closure cells can be read now: not while torch.compile traces (dynamo then
    fails to load the cell inside f; a closed-over tensor is not checked there)."""
    return not torch.compiler.is_compiling()


def being_differentiated(x, closed_over=False) -> bool:
    """Whether autograd will differentiate tensor `x` (for a tensor f closes over: a computed
    one; a leaf tensor that requires grad, like an nn.Parameter, is a variable)."""
    return (isinstance(x, torch.Tensor) and x.requires_grad and torch.is_grad_enabled()
            and not (closed_over and x.is_leaf))


def spec(x):
    return OutputSpec(x.shape, x.dtype, x.device, x.is_floating_point() or x.is_complex())


def zeros(spec):
    return torch.zeros(spec.shape, dtype=spec.dtype, device=spec.device)


def convert(grad, like):
    if isinstance(grad, torch.Tensor):
        return grad
    if isinstance(grad, keras.Variable):
        return grad.value
    return torch.as_tensor(grad, dtype=like.dtype, device=like.device)


def static_shape(x) -> tuple:
    return x.shape  # a torch.Size, which is a tuple


def cast_like(grad, like):
    if grad.dtype != like.dtype:
        grad = grad.to(like.dtype)
    return grad


class _Link(torch.autograd.Function):
    """Returns the (detached) outputs f computed, attached to the inputs; backward calls grad_fn.

    The outputs come in as a Python list, not as tensor arguments: outputs that are not inputs
    of the Function need no view bookkeeping, which makes this about 7 us cheaper a call.
    """

    @staticmethod
    def forward(ctx, backward_fn, outputs, *inputs):
        ctx.backward_fn = backward_fn
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *cotangents):
        backward_fn = ctx.backward_fn
        if backward_fn is None:
            raise msg.torch_second_backward()
        if not torch.compiler.is_compiling() and not _keep_graph():
            # As autograd frees a node's saved tensors once it ran: grad_fn's closure (the
            # tensors it holds, often a previous layer's output) goes now, not when the whole
            # graph does; else one more activation is alive at the backward's peak.
            ctx.backward_fn = None
        return (None, None) + tuple(backward_fn(list(cotangents)))


_keep_graph = torch._C._autograd._get_current_graph_task_keep_graph
_THIS_MODULE = sys.modules[__name__]  # the backend helpers the core's checks use

# autograd.Function.apply binds arguments for setup_context and unwraps functorch tensors before
# it calls this; _Link has no setup_context, and the fast path runs without functorch transforms
_link_apply = super(torch.autograd.Function, _Link).apply


class _FunctorchLink(torch.autograd.Function):
    """`_Link` in the form torch.func transforms need: forward without ctx, a function of its
    tensor arguments only (the outputs come in as tensors and leave as views), setup_context.

    Kept apart because binding arguments for setup_context costs about 40 us a call in eager
    mode, a third of the whole overhead of a small custom-gradient call.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(backward_fn, n_outputs, *tensors):
        return tuple(tensors[i].view_as(tensors[i]) for i in range(n_outputs))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.backward_fn, ctx.n_outputs = inputs[0], inputs[1]
        # for jvp: shapes only (holding the tensors would keep the inputs alive until backward)
        ctx.meta = [_meta(t) for t in inputs[2:]]

    @staticmethod
    def backward(ctx, *cotangents):
        grads = ctx.backward_fn(list(cotangents))
        return (None, None) + (None,) * ctx.n_outputs + tuple(grads)

    @staticmethod
    def jvp(ctx, _backward_fn, _n_outputs, *tangents):
        # (torch.func.jvp, jacfwd, hessian) the outputs' own tangents are f's derivative: unused
        if sum([i.key() == TransformType.Jvp for i in retrieve_all_functorch_interpreters()]) > 1:
            # torch runs an autograd.Function's jvp without differentiating it: forward over
            # forward (jacfwd(jacfwd(f))) would silently get a zero second derivative
            f = ctx.backward_fn.forward_info[0]
            raise msg.torch_forward_over_forward(f)
        n = ctx.n_outputs
        return _derived_jvp(ctx.backward_fn, ctx.meta[:n], ctx.meta[n:], tangents[n:])


def _requires_grad(t) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad


def call(arguments):
    dual = _has_tangents(arguments.tensor_values)
    start = None if torch.compiler.is_compiling() else _next_node_number()
    with recording() as rec:
        forward = arguments.forward(arguments.tensor_values)
    return _link(arguments, rec, *forward, start, dual=dual)


_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


def call_positional(f, args):
    """The path most eager calls take, in one pass: f(*args) on floating-point tensors that
    require grad (no keyword arguments: the caller checked), autograd on, no transform, f
    returning (a floating-point tensor or a flat tuple or list of them, grad_fn) and reading no
    variable. Returns None, before f runs, where a call is not of this kind: the general path
    takes it. A call found to be of another kind after f ran (a variable read, another kind of
    output) goes on along the general path with what f returned; f runs once either way.
    """
    if _is_compiling() or not _grad_enabled() or forward_ad._current_level >= 0 or (
            _functorch_active()):
        return None
    for a in args:
        if not (isinstance(a, _Tensor) and a.requires_grad and a.is_floating_point()):
            return None
    cells = getattr(f, "__closure__", None)
    if cells:
        for cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell: a name not assigned yet
                continue
            if isinstance(value, _Tensor) and value.requires_grad and not value.is_leaf:
                return None  # closed over and being differentiated: the general path refuses it
    start = _next_node_number()
    with recording() as rec:
        result = f(*args)
    output = result[0] if type(result) is tuple and len(result) == 2 else None
    if isinstance(output, _Tensor):
        outputs = [output]
        simple = output.is_floating_point()
    elif type(output) in (tuple, list) and output:
        outputs = list(output)
        simple = all([isinstance(o, _Tensor) and o.is_floating_point() for o in outputs])
    else:
        simple = False
    hidden = None
    if simple and not rec.variables and callable(result[1]):
        hidden = _hidden_leaves(outputs, args, (), start)
    if hidden is None or hidden:
        arguments = Call(f, args, {}, _THIS_MODULE, tensors_only=True)
        return _link(arguments, rec, *arguments.accept(result), start, hidden)
    grad_fn = result[1]
    container = None if isinstance(output, _Tensor) else type(output)  # tuple or list
    del result, output
    # what the backward needs of the arguments (the outputs' are the cotangents')
    in_specs = [OutputSpec(a.shape, a.dtype, a.device, True) for a in args]
    versions = _closure_versions(grad_fn)
    outputs = [o.detach() for o in outputs]  # the forward graph grad_fn does not use goes now

    def backward(cotangents):
        if versions:
            _check_versions(versions, f)
        upstream = cotangents[0] if container is None else container(cotangents)
        positional, keywords, _ = upstream_arguments(grad_fn, f, upstream, upstream)
        grads = grad_fn(*positional, **keywords)
        checked = plain_gradients(grads, in_specs, _THIS_MODULE)
        if checked is not None:
            return checked
        # the general rules (autograd hands over one cotangent per output, with that output's
        # shape, dtype and device)
        out_specs = [OutputSpec(c.shape, c.dtype, c.device, True) for c in cotangents]
        return check_gradients(plain_backward(f, grad_fn, _THIS_MODULE, in_specs, out_specs,
                                              container), grads)[0]

    # what Function.apply ends in, without its checks for the cases ruled out above
    linked = _link_apply(backward, outputs, *[_unwrap_if_dead(a) for a in args])
    return linked[0] if container is None else container(linked)


def _has_tangents(tensors) -> bool:
    """Whether a tensor is a dual tensor (torch.autograd.forward_ad) with a tangent. Such a
    tensor says requires_grad=False; the call is linked by `_DualLink`, whose jvp derives the
    JVP from grad_fn (f's own ops would give f's derivative: NaN for log1pexp at 100)."""
    if forward_ad._current_level < 0:  # no dual_level open: one module attribute read
        return False
    return any([isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None
                for t in tensors])


def _closure_versions(grad_fn) -> list:
    """(name, tensor, version) for each tensor grad_fn's closure holds.

    As autograd checks the tensors saved for backward, the backward checks that none of them was
    changed in place since the forward: grad_fn would compute with the new values, a wrong
    gradient and no error.
    """
    # compiled graphs are functional, and dynamo cannot read a closure's cells
    if torch.compiler.is_compiling():
        return []
    cells = getattr(grad_fn, "__closure__", None)
    if not cells:
        return []
    names = grad_fn.__code__.co_freevars
    return [
        (name, cell.cell_contents, cell.cell_contents._version)
        for name, cell in zip(names, cells)
        if _holds_tensor(cell)
    ]


def _holds_tensor(cell) -> bool:
    try:
        return isinstance(cell.cell_contents, torch.Tensor)
    except ValueError:  # an empty cell: a variable not assigned yet
        return False


def _check_versions(versions, f):
    for name, tensor, version in versions:
        if tensor._version != version:
            raise msg.torch_modified_in_place(f, name, tensor.shape, version, tensor._version)


def _link(arguments, rec, output, out_leaves, backward, start, hidden=None, dual=False):
    """Attaches the outputs of the forward f ran (with autograd on) to the inputs through
    `_Link`, whose backward runs grad_fn (`backward`, a `_call.Backward`); returns the output
    (f's `output`, when nothing needs grad).

    `start`: the number of the first autograd node f could have made (None under
    torch.compile, whose tracing has no autograd nodes to walk); `hidden`: the leaf tensors
    requiring grad that f read without receiving them (None: not looked for yet); `dual`: an
    input carries a forward-mode tangent, and `_DualLink` links every input."""
    if not torch.is_grad_enabled() and not dual:
        return output
    # Under torch.vmap a batched tensor says requires_grad=False even when the tensor it wraps
    # requires grad: under functorch transforms every differentiable input is linked.
    transformed = torch._C._are_functorch_transforms_active()
    values = arguments.tensor_values
    inputs = [
        k for k, (t, diff) in enumerate(zip(values, arguments.differentiable))
        if diff and (transformed or dual or t.requires_grad)
    ]
    variables, var_values = rec.variables, rec.raw_values
    if hidden is None and not transformed and start is not None:
        hidden = _hidden_leaves(out_leaves, values, var_values, start)
    if hidden:
        # routed like the keras.Variables f read: grad_fn gets them in variables=
        variables, var_values = variables + hidden, var_values + hidden
    linked_vars = [i for i, v in enumerate(var_values) if _requires_grad(v)] if var_values else ()
    if not inputs and not linked_vars:
        return output
    del output
    # detached: the parts of the forward graph grad_fn does not use are dropped now
    result, linked_outputs, outputs = [], [], []
    for j, o in enumerate(out_leaves):
        if isinstance(o, torch.Tensor):
            o = o.detach()
            if is_float(o):
                linked_outputs.append(j)
                outputs.append(o)
        result.append(o)
    del out_leaves
    n_outputs = len(result)
    # the common case: every output and every input linked, no variables
    every_output = len(linked_outputs) == n_outputs
    every_input = len(inputs) == len(values)
    linked_inputs = values if every_input else [values[k] for k in inputs]
    wanted = [var_values[i] for i in linked_vars]
    if wanted:
        linked_inputs = linked_inputs + wanted
    versions = _closure_versions(backward.grad_fn)

    def backward_fn(cotangents):  # holds the Backward (specs), not the arguments
        if hidden and not inspect_grad_fn(backward.grad_fn).accepts_variables:
            raise _hidden_leaves_error(backward.f, backward.grad_fn, hidden)
        if versions:
            _check_versions(versions, backward.f)
        return backward.linked(cotangents, None if every_output else linked_outputs, inputs,
                               variables, var_values, wanted)

    if transformed or dual:
        backward_fn.forward_info = (backward.f, backward.grad_fn)  # for the derived JVP
    if transformed:
        linked = _FunctorchLink.apply(backward_fn, len(outputs), *outputs, *linked_inputs)
    elif dual:
        linked = _DualLink.apply(backward_fn, outputs, *linked_inputs)
    else:
        linked = _Link.apply(backward_fn, outputs, *linked_inputs)
    for j, t in zip(linked_outputs, linked):
        result[j] = t
    return backward.rebuild(result)


_next_node_number = torch._C._autograd._get_sequence_nr  # of this thread's next autograd node
_AccumulateGrad = torch._C._functions.AccumulateGrad


def _hidden_leaves(outputs, inputs, known, start) -> list:
    """The leaf tensors that require grad (an nn.Parameter, a torch module's weights) that f's
    outputs were computed from without f receiving them: not `inputs`, not `known` (the
    keras.Variable values f read). Autograd would train them with no gradient from grad_fn.

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


def _hidden_leaves_error(f, grad_fn, hidden) -> msg.CustomGradientError:
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


class _DualLink(torch.autograd.Function):
    """`_Link` for inputs that carry forward-mode tangents (torch.autograd.forward_ad): its jvp
    derives the JVP from grad_fn. Only calls with dual tensors use it, so `_Link` stays as cheap
    as it was."""

    @staticmethod
    def forward(ctx, backward_fn, outputs, *inputs):
        ctx.backward_fn = backward_fn
        ctx.meta = ([_meta(o) for o in outputs], [_meta(t) for t in inputs])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *cotangents):
        return (None, None) + tuple(ctx.backward_fn(list(cotangents)))

    @staticmethod
    def jvp(ctx, _backward_fn, _outputs, *tangents):
        return _derived_jvp(ctx.backward_fn, *ctx.meta, tangents)


def _meta(t) -> tuple:
    return t.shape, t.dtype, t.device


def _derived_jvp(backward_fn, out_meta, in_meta, tangents):
    """J v for the input tangents `tangents` (None: zero): the VJP of the backward (grad_fn,
    linear in the cotangents) applied to them, through torch.func.vjp, which nests in every
    transform and keeps the result differentiable (reverse over forward)."""
    f, grad_fn = backward_fn.forward_info
    # the probe reads values: not under torch.func transforms (wrapped tensors) or compiling
    concrete = not (torch._C._are_functorch_transforms_active() or torch.compiler.is_compiling())
    _forward.check_linear(f, grad_fn, _numpy_rule(backward_fn, out_meta) if concrete else None,
                          [tuple(m[0]) for m in out_meta])

    def rule(*cotangents):
        grads = backward_fn(list(cotangents))
        return tuple(_zeros(m) if g is None else g for g, m in zip(grads, in_meta))

    _, back = torch.func.vjp(rule, *[_zeros(m) for m in out_meta])
    out = back(tuple(_zeros(m) if v is None else v for v, m in zip(tangents, in_meta)))
    return out[0] if len(out) == 1 else out


def _zeros(meta):
    return torch.zeros(meta[0], dtype=meta[1], device=meta[2])


def _numpy_rule(backward_fn, out_meta):
    """The backward on numpy cotangents, for the linearity probe."""
    if any(m[1].is_complex for m in out_meta):
        return None

    def rule(cotangents):
        with torch.no_grad():
            grads = backward_fn([torch.as_tensor(u, dtype=m[1], device=m[2])
                                 for u, m in zip(cotangents, out_meta)])
        return [None if g is None else g.detach().cpu().numpy() for g in grads]

    return rule


def ones_like(x):
    return torch.ones_like(x)


def recomputation_inputs(leaves):
    # the inputs still require grad from the forward: differentiated as they are, the
    # recomputation would keep a graph of the gradient, unless the backward itself is being
    # differentiated (create_graph=True)
    if torch.is_grad_enabled():
        return list(leaves)
    return [leaf.detach() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]


def vjp_flat(fn, values, reusable=True):
    """Runs fn(*values) -> output leaves with autograd on; returns (outputs, back(cotangents)).

    Inputs that already require grad (inside an outer grad) are used as they are and the backward
    builds a graph, so grad of grad works. The graph is kept after back either way (`reusable`
    is for tensorflow's tape).
    """
    if torch._C._are_functorch_transforms_active():
        return _functorch_vjp(fn, values)
    nested = any(v.requires_grad for v in values)
    with torch.enable_grad():
        inputs = [v if v.requires_grad else v.detach().requires_grad_(True) for v in values]
        outputs = fn(*inputs)

    def backward(cotangents):
        pairs = [
            (o, torch.zeros_like(o) if ct is None else torch.as_tensor(ct, dtype=o.dtype))
            for o, ct in zip(outputs, cotangents)
            if isinstance(o, torch.Tensor) and is_float(o) and o.requires_grad
        ]
        if not pairs:
            return [torch.zeros_like(v) for v in values]
        grads = torch.autograd.grad(
            [o for o, _ in pairs], inputs, grad_outputs=[c for _, c in pairs],
            retain_graph=True, create_graph=nested,
            allow_unused=True, materialize_grads=True,
        )
        return list(grads)

    return outputs, backward


def _functorch_vjp(fn, values):
    """vjp_flat inside torch.func transforms (torch.vmap: keras.ops.vectorized_map), where
    requires_grad_() is not allowed: through torch.func.vjp, for the floating-point outputs."""
    split = {}  # which outputs are floating-point, and the others as fn returned them

    def float_outputs(*inputs):
        outputs = fn(*inputs)
        keep = [isinstance(o, torch.Tensor) and is_float(o) for o in outputs]
        split["keep"], split["others"] = keep, {j: o for j, o in enumerate(outputs) if not keep[j]}
        return tuple(o for o, k in zip(outputs, keep) if k)

    floats, back = torch.func.vjp(float_outputs, *values)
    keep, floats = split["keep"], iter(floats)
    outputs = [next(floats) if k else split["others"][j] for j, k in enumerate(keep)]

    def backward(cotangents):
        cts = tuple(
            torch.zeros_like(o) if ct is None else torch.as_tensor(ct, dtype=o.dtype)
            for o, ct, k in zip(outputs, cotangents, keep) if k
        )
        if not cts:
            return [torch.zeros_like(v) for v in values]
        return list(back(cts))

    return outputs, backward


def float64_scope():
    return contextlib.nullcontext()
