"""One call that a transformation traces, as custom_vjp (`link.py`) and custom_jvp
(`forward_mode.py`) take it: its primals, f run on them inside the bound variable scope, and
grad_fn as the rule linked to them. Both entry points use it; what differs is explicit: on the
custom_vjp path the variables f assigns leave as extra outputs, on the custom_jvp path an
assignment is an error.
"""

from __future__ import annotations

import copy
import types
from typing import Any

import jax
import jax.numpy as jnp
from jax._src import core as _jax_core  # the current trace: no public API names it

from ... import _messages as msg, _tree
from ..._closure import tensors_reachable
from .tensors import being_differentiated, is_float, spec, zeros
from .scope import collects_losses, scope_mapping, variables_bound


def _closes_over_tracer(f) -> bool:
    """Whether f closes over a traced value (directly): then a transformation traces this call
    even with concrete arguments, and custom_vjp must see it (as an input, `Hidden`: under grad
    of jit, one being differentiated is refused by name instead of differentiating f's ops)."""
    for cell in getattr(f, "__closure__", None) or ():
        try:
            if isinstance(cell.cell_contents, jax.core.Tracer):
                return True
        except ValueError:  # an empty cell
            continue
    return False


def refuse_hidden_tracers(f: Any, received: Any) -> list[Any]:
    """Raises `msg.jax_hidden_tracer` where f reaches, through the objects it closes over (an
    attribute, an element of a list or dict; `_closure.tensors_reachable`), a tensor being
    differentiated that it did not receive (`received`: the call's own tensors). Inside the
    custom_vjp (custom_jvp) such a tensor of the enclosing transformation is unusable: jax
    raises its UnexpectedTracerError, or under jit lets it leak. grad_fn, defined inside f,
    reaches what f closes over, so it is covered too. Costs one walk of f's closure and its
    objects' attributes (tens of us for a closure over a Keras layer), on traced calls of an
    f that closes over something or is a bound method; other calls skip it.

    Returns (name, tracer) for the other float tracers it reaches so (a jit's, whose
    differentiation, if any, comes later: `tied_to_hidden`)."""
    if not (getattr(f, "__closure__", None) or getattr(f, "__self__", None) is not None):
        return []
    skip = {id(t) for t in received}
    reached = [(name, value) for name, value in tensors_reachable([f], _is_tracer)
               if id(value) not in skip]
    names = [name for name, value in reached if being_differentiated(value)]
    if names:
        raise msg.jax_hidden_tracer(f, list(dict.fromkeys(names)))
    return [(name, value) for name, value in reached if is_float(value)]


def tied_to_hidden(f: Any, primals: list[Any], hidden: list[Any]) -> list[Any]:
    """`primals` passed through an identity (a custom_jvp) that takes the tracers f reaches
    through objects (`hidden`: (name, tracer) from `refuse_hidden_tracers`) as inputs too: its
    JVP rule raises `msg.jax_hidden_tracer` naming those that carry a tangent. Under
    jax.grad(jax.jit(...)) that JVP runs before the custom_vjp's, which would raise jax's own
    CustomVJPException for the closed-over value; not differentiated, they change nothing. Only
    the float primals are tied (at least one is needed for the identity to be used)."""
    floats = [k for k, p in enumerate(primals) if is_float(p)]
    if not floats:
        return primals
    names = [name for name, _ in hidden]  # (None: found by jax's record, `UntiedTracers`)

    @jax.custom_jvp
    def tie(ps, _):
        return ps

    def tie_jvp(values, tangents):
        (ps, _), (dps, dhidden) = values, tangents
        carried = [name for name, t in zip(names, dhidden) if not isinstance(t, _SymbolicZero)]
        if carried:
            raise msg.jax_hidden_tracer(f, list(dict.fromkeys([n for n in carried if n])))
        return ps, [jnp.zeros_like(p) if isinstance(t, _SymbolicZero) else t
                    for p, t in zip(ps, dps)]

    tie.defjvp(tie_jvp, symbolic_zeros=True)
    tied = tie([primals[k] for k in floats], [t for _, t in hidden])
    primals = list(primals)
    for k, p in zip(floats, tied):
        primals[k] = p
    return primals


_SymbolicZero = jax.custom_derivatives.SymbolicZero


def traced_constants() -> list[Any]:
    """The tracers among the constants of the jaxpr being traced now
    (`JaxprStackFrame.constvar_to_val`): jax's own record of the values of enclosing
    transformations a traced function used without receiving them, whatever Python route led
    there. Empty where no jaxpr is being traced; a few entries to read where one is."""
    trace = getattr(_jax_core.trace_ctx, "trace", None)
    constants = getattr(getattr(trace, "frame", None), "constvar_to_val", None)
    if not constants:
        return []
    return [v for v in list(constants.values()) if isinstance(v, jax.core.Tracer)]


class UntiedTracers(Exception):
    """Internal: f used float tracers of a jit (`tracers`) that none of the call's own checks
    saw, so they are not tied (`tied_to_hidden`); `Traced.called` ties them and applies the
    custom_vjp (custom_jvp) again. Never reaches the user."""

    def __init__(self, tracers: list[Any]) -> None:
        super().__init__("customgrad: untied tracers (internal)")
        self.tracers = tracers


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


class Hidden:
    """The float tracers f reaches without receiving them positionally: a tensor passed by
    keyword (`keywords`: its position among the tensor leaves, and the keyword) or a cell of f's
    own closure (`cells`: the cell's position, and its name). Under jax.grad itself the core
    refused one being differentiated; what reaches here is a tracer that jit (or vmap) traces,
    whose differentiation, if any, comes later (jax.grad of a jitted function).

    They become extra primals of the custom_vjp (custom_jvp), after the positional ones and the
    variables, and f reads those instead (`bind`). Closed over, jax would refuse one being
    differentiated with its own CustomVJPException before calling the forward rule (or, not
    differentiated, fail on the stale jit tracer); as a primal, the rule sees whether it is
    perturbed, refuses it by name (`refusal`), and else gives it a zero gradient. An object's
    attribute or element cannot be handled so (f would read another value only if the object
    were changed): `tied_to_hidden` refuses those."""

    keywords: list[tuple[int, str | None]]
    cells: list[tuple[int, str]]
    values: list[Any]
    specs: list[Any]

    def __init__(self, arguments: Any) -> None:
        f, kwargs = arguments.f, arguments.structure[1]
        positional = set(arguments.positional)
        self.keywords = [(k, _keyword_of(kwargs, arguments.leaves[arguments.tensor_index[k]]))
                         for k, value in enumerate(arguments.tensor_values)
                         if k not in positional and _float_tracer(value)]
        self.cells = []
        closure = getattr(f, "__closure__", None) or ()
        for i, (name, cell) in enumerate(zip(f.__code__.co_freevars if closure else (),
                                             closure)):
            try:
                if _float_tracer(cell.cell_contents):
                    self.cells.append((i, name))
            except ValueError:  # an empty cell
                continue
        self.values = ([arguments.tensor_values[k] for k, _ in self.keywords]
                       + [f.__closure__[i].cell_contents for i, _ in self.cells])
        self.specs = [spec(v) for v in self.values]

    def __bool__(self) -> bool:
        return bool(self.values)

    def refusal(self, f: Any, k: Any) -> Any:
        """The named error for the hidden primal `k` (in `values`' order) being differentiated."""
        if k < len(self.keywords):
            return msg.hidden_input(f, keyword=self.keywords[k][1])
        return msg.hidden_input(f, closed_over=self.cells[k - len(self.keywords)][1])

    def bind(self, arguments: Any, values: Any, primals: Any) -> Any:
        """(arguments, values) that make f read the hidden `primals` (in `values`' order): the
        keyword ones put in `values`, the cell ones in a copy of f whose cells hold them (with
        f's code, globals, name and defaults: messages name it as f)."""
        for (k, _), p in zip(self.keywords, primals):
            values[k] = p
        if self.cells:
            f = arguments.f
            func = getattr(f, "__func__", f)  # a bound method's function
            cells = list(func.__closure__)
            for (i, _), p in zip(self.cells, primals[len(self.keywords):]):
                cells[i] = types.CellType(p)
            g = types.FunctionType(func.__code__, func.__globals__, func.__name__,
                                   func.__defaults__, tuple(cells))
            g.__kwdefaults__, g.__qualname__ = func.__kwdefaults__, func.__qualname__
            arguments = copy.copy(arguments)
            arguments.f = g if func is f else types.MethodType(g, f.__self__)
        return arguments, values


def _float_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer) and is_float(x)


def _keyword_of(kwargs: dict[Any, Any], leaf) -> str | None:
    """The keyword whose value holds `leaf` (by identity)."""
    for key, value in kwargs.items():
        if any(v is leaf for v in _tree.flatten(value)):
            return key
    return None


def concrete(primals: Any) -> bool:
    """Whether no transformation traces these primals (eager jax.grad hands over arrays)."""
    return not any(isinstance(p, jax.core.Tracer) for p in primals)


class Traced:
    """One call as custom_vjp (or custom_jvp) takes it.

    Its primals are the positional tensor leaves, then every traced floating-point variable value
    of the stateless scope (`specs` are theirs); then the float tracers f reaches by keyword or
    as a cell of its closure (`hidden`, a `Hidden`, or None where there are none).

    `traced` is False where nothing traces the call (concrete arrays, no traced closure): then no
    gradient can be asked of it, and the caller runs f directly.
    """

    arguments: Any  # a `_call.Arguments`
    assignments_leave: bool
    mapping: dict[Any, Any] | None
    tensor_values: list[Any]
    positional: Any
    variable_ids: list[Any]
    primals: list[Any]
    traced: bool
    specs: list[Any]
    hidden: Hidden | None
    tied: list[Any]
    collect_losses: bool
    output: Any
    assigned: list[Any]
    positions: Any
    leaves: list[Any] | None

    def __init__(self, arguments: Any, assignments_leave: bool) -> None:
        self.arguments = arguments
        self.assignments_leave = assignments_leave  # else an assignment in f is an error
        self.mapping = mapping = scope_mapping()
        variables = [
            (key, value) for key, value in (mapping or {}).items()
            if isinstance(value, jax.core.Tracer) and is_float(value)
        ]
        self.tensor_values = list(arguments.tensor_values)
        self.positional = arguments.positional
        self.variable_ids = [key for key, _ in variables]
        self.primals = ([self.tensor_values[k] for k in self.positional]
                        + [value for _, value in variables])
        self.traced = _closes_over_tracer(arguments.f) or any(
            isinstance(p, jax.core.Tracer) for p in self.primals + self.tensor_values)
        if not self.traced:
            return
        reached = refuse_hidden_tracers(arguments.f, self.primals + self.tensor_values)
        self.specs = [spec(p) for p in self.primals]
        self.hidden = None  # calls with no keyword and no closure skip the search
        if arguments.structure[1] or getattr(arguments.f, "__closure__", None):
            self.hidden = Hidden(arguments) or None
        if self.hidden:
            self.primals = self.primals + self.hidden.values
            reached = [(n, v) for n, v in reached if all(v is not h for h in self.hidden.values)]
        if reached:
            self.primals = tied_to_hidden(arguments.f, self.primals, reached)
        self.tied = [value for _, value in reached]
        self.collect_losses = collects_losses(mapping)  # a loss added inside f would be lost
        self.output = None  # the output's structure (of specs), once f ran
        self.assigned = []  # the variables f assigned, in the order their values follow

    def forward(self, primals: Any) -> tuple[list[Any], Rule]:
        """Runs f on these primals inside the bound variable scope. Returns the leaves the
        custom_vjp (custom_jvp) function outputs: f's output leaves, then the new values of the
        variables f assigned (`self.assigned`); and the rule linked to this run."""
        # jax.grad of a Python or numpy scalar hands custom_vjp the scalar itself (a weakly
        # typed literal): f sees an array, as it would on the other backends
        primals = [p if isinstance(p, jax.Array) else jnp.asarray(p) for p in primals]
        n_inputs = len(self.positional)
        values = list(self.tensor_values)
        for k, p in zip(self.positional, primals[:n_inputs]):
            values[k] = p
        variable_primals = primals[n_inputs:len(self.specs)]
        arguments = self.arguments
        if self.hidden:
            arguments, values = self.hidden.bind(arguments, values, primals[len(self.specs):])
        f = self.arguments.f
        before = len(traced_constants())
        try:
            with variables_bound(self.mapping, self.variable_ids, variable_primals) as scope:
                _, out_leaves, backward = arguments.forward(values)
        except jax.errors.UnexpectedTracerError as error:
            # jax's own record of the trace: f used a tracer of the enclosing transformation
            # that it did not receive, by whatever route (the walk above sees one level only)
            raise msg.jax_hidden_tracer(f, []) from error
        # ... or, where a jaxpr is being traced (under jit), made it a constant of that jaxpr:
        # one being differentiated is refused now; a jit's own is no error (jax.jit alone
        # takes it) but is tied, so that a grad of the jit refuses it by name
        used = traced_constants()[before:]  # (the constants only grow, in order)
        if used:
            self.refuse_or_tie(used)
        updates = list(scope.updates.values()) if scope is not None else []
        if updates and not self.assignments_leave:
            raise msg.jax_forward_mode_assigned(f, len(updates))
        if backward.reads.losses_added and self.collect_losses:
            raise msg.loss_in_forward(
                f, "on jax inside a stateless scope (model.fit) such a loss cannot leave the "
                "custom gradient, and grad_fn does not define its gradient")
        self.output = backward.output
        self.assigned = [variable for variable, _ in updates]
        # leaves that are no arrays (None, a string) stay out of custom_vjp, which takes arrays
        # only, and get no gradient: `rebuild` puts them back
        self.positions = backward.tensor_outputs
        self.leaves = out_leaves if len(self.positions) < len(out_leaves) else None
        arrays = [out_leaves[j] for j in self.positions]
        floating = set(backward.float_outputs)
        float_outputs = tuple(k for k, j in enumerate(self.positions) if j in floating)
        link = backward.link(backward.float_outputs, self.positional,
                             wanted=variable_primals)
        rule = Rule(link, float_outputs, self.specs,
                    (self.mapping, self.variable_ids, variable_primals))
        return arrays + [jnp.asarray(value) for _, value in updates], rule

    def refuse_or_tie(self, used: list[Any]) -> None:
        """Raises for the tracers f used without receiving them (`used`, jax's record): the
        named error for one being differentiated, `UntiedTracers` for a jit's float tracers
        not tied yet."""
        f = self.arguments.f
        if any([being_differentiated(v) for v in used]):
            raise msg.jax_hidden_tracer(f, [])
        untied = [v for v in used if is_float(v) and all([v is not t for t in self.tied])]
        if untied:
            raise UntiedTracers(untied)

    def called(self, custom: Any) -> Any:
        """`custom(*self.primals)`: the custom_vjp (custom_jvp) function of this call applied;
        where f used a jit's tracers that no check before f ran saw (`UntiedTracers`), applied
        again with those tied (f is traced twice then)."""
        try:
            return custom(*self.primals)
        except UntiedTracers as found:
            self.primals = tied_to_hidden(self.arguments.f, self.primals,
                                          [(None, t) for t in found.tracers])
            self.tied = [*self.tied, *found.tracers]
            return custom(*self.primals)

    def rebuild(self, arrays: Any) -> Any:
        """f's output with `arrays` (what custom_vjp returned for f's array leaves) in it."""
        if self.leaves is None:
            return _tree.unflatten(self.output, list(arrays))
        leaves = list(self.leaves)
        for j, a in zip(self.positions, arrays):
            leaves[j] = a
        return _tree.unflatten(self.output, leaves)


class Rule:
    """grad_fn as the autodiff rule of one run of f: cotangents of the float outputs ->
    gradients of the float primals (zeros where grad_fn gave none).

    It holds the call's `Link` (which gradient goes where), the positions of the float outputs
    among the arrays custom_vjp outputs, the primals' specs and the variable binding grad_fn
    runs in; not the primals, nor the call: grad_fn keeps what it needs.
    """

    link: Any  # a `_call.Link`
    float_outputs: tuple[int, ...]
    specs: list[Any]
    binding: tuple[Any, ...]

    def __init__(self, link: Any, float_outputs: tuple[int, ...], specs: list[Any],
                 binding: tuple[Any, ...]) -> None:
        self.link, self.float_outputs, self.specs, self.binding = (
            link, float_outputs, specs, binding)

    def __call__(self, *cotangents: Any) -> list[Any]:
        # grad_fn may read variables too (a closure over layer.kernel)
        with variables_bound(*self.binding) as scope:
            grads = self.link(cotangents)
        if scope is not None and scope.updates:
            raise msg.jax_grad_fn_assigned(self.link.backward.f, len(scope.updates))
        return [zeros(s) if g is None else g for g, s in zip(grads, self.specs) if s.floating]
