"""One call that a transformation traces, as custom_vjp (`link.py`) and custom_jvp
(`forward_mode.py`) take it: its primals, f run on them inside the bound variable scope, and
grad_fn as the rule linked to them. Both entry points use it; what differs is explicit: on the
custom_vjp path the variables f assigns leave as extra outputs, on the custom_jvp path an
assignment is an error.
"""

from __future__ import annotations

import copy
import inspect
import types
from typing import Any

import jax
import jax.numpy as jnp
import jax.extend.core as _jax_core_ext
from jax._src import api_util as _api_util, linear_util as _lu
from jax._src import core as _jax_core  # the current trace: no public API names it
from jax._src.interpreters import partial_eval as _pe

from ... import _messages as msg, _tree
from ..._closure import closure_cells, tensors_reachable
from .tensors import being_differentiated, is_float, spec, zeros
from .scope import collects_losses, scope_mapping, variables_bound


def _closes_over_tracer(f) -> bool:
    """Whether f closes over a traced value (directly): then a transformation traces this call
    even with concrete arguments, and custom_vjp must see it (as an input, `Hidden`: under grad
    of jit, one being differentiated is refused by name instead of differentiating f's ops)."""
    for _, _, value in closure_cells(f):
        if isinstance(value, jax.core.Tracer):
            return True
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
    differentiation, if any, comes later: `Hoisted`), to name them in messages."""
    if not (getattr(f, "__closure__", None) or getattr(f, "__self__", None) is not None):
        return []
    skip = {id(t) for t in received}
    reached = [(name, value) for name, value in tensors_reachable([f], _is_tracer)
               if id(value) not in skip]
    names = [name for name, value in reached if being_differentiated(value)]
    if names:
        raise msg.jax_hidden_tracer(f, list(dict.fromkeys(names)))
    return [(name, value) for name, value in reached if is_float(value)]


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


# grad_fn's rule takes the cotangents positionally: its debug info is made from this signature
# rather than read off each call's rule
_RULE_SIGNATURE = inspect.Signature(
    [inspect.Parameter("cotangents", inspect.Parameter.VAR_POSITIONAL)])


def rule_jaxpr(rule: Any, avals: list[Any]) -> tuple[Any, list[Any]]:
    """(jaxpr, consts): `rule` (cotangents -> a list of arrays) traced on `avals`, the values it
    closes over (the forward's tensors grad_fn holds) as the constants, as
    `jax.make_jaxpr(rule)(*avals)` gives them. Made with jax's tracer directly: make_jaxpr
    builds and traces a jit of the rule, three times the work, once per call site of every
    traced custom-gradient call (`_private_apis.py`).

    >>> jaxpr, consts = rule_jaxpr(lambda dy: [2.0 * dy], [jax.core.ShapedArray((3,), "float32")])
    >>> (len(jaxpr.eqns), consts)
    (1, [])
    """
    debug = _api_util.debug_info("customgrad grad_fn", rule, avals, {},
                                 sourceinfo=getattr(rule, "__qualname__", "grad_fn"),
                                 signature=_RULE_SIGNATURE)
    jaxpr, _, consts = _pe.trace_to_jaxpr_dynamic(_lu.wrap_init(rule, debug_info=debug),
                                                  list(avals))
    return jaxpr, consts


class HiddenTracers(Exception):
    """Internal: f used tracers of a jit that it did not receive; the caller makes the call
    again as a `Hoisted` one, which takes them as inputs. Never reaches the user."""


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
    were changed): such a call is made a `Hoisted` one."""

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
        cells = [(i, name, value) for i, name, value in closure_cells(f) if _float_tracer(value)]
        self.cells = [(i, name) for i, name, _ in cells]
        self.values = ([arguments.tensor_values[k] for k, _ in self.keywords]
                       + [value for _, _, value in cells])
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


class Hoisted:
    """A traced call where f used tracers of a jit that it did not receive, through whatever
    object (jax's record: `HiddenTracers`): f and grad_fn traced once into a jaxpr, whose
    constants that are tracers (those values, and what grad_fn closes over) are passed to the
    custom_vjp (custom_jvp) as inputs after the call's primals (`inputs`), and whose rules
    evaluate the jaxpr (`run`) instead of running f again. Run again (as a grad of the jit runs
    the rules), f would read the first trace's tracers from its objects (jax's "No constant
    handler" TypeError); closed over, one the grad differentiates would end in jax's
    CustomVJPException. As inputs, the rules see which are differentiated: `refuse_carried`
    names them; the others get a zero gradient (`specs`: theirs, after the `Hidden` ones)."""

    def __init__(self, traced: Traced) -> None:
        self.traced = traced
        layout = {}  # what tracing the forward tells: its outputs' count, grad_fn's jaxpr

        def forward(*primals):
            outputs, rule = traced.forward(primals)
            jaxpr, consts = rule_jaxpr(rule, [jax.typeof(outputs[j]) for j in rule.float_outputs])
            layout.update(n_out=len(outputs), rule=jaxpr, float_outputs=rule.float_outputs)
            return [*outputs, *consts]

        traced.hoisting = True
        closed = jax.make_jaxpr(forward)(*traced.primals)
        self.jaxpr, consts = closed.jaxpr, list(closed.consts)
        self.at = [k for k, c in enumerate(consts) if isinstance(c, jax.core.Tracer)]
        self.tracers = [consts[k] for k in self.at]
        for k in self.at:
            consts[k] = None  # (not kept: `run` gets them as inputs)
        self.consts = consts
        self.n_out, self.rule_jaxpr = layout["n_out"], layout["rule"]
        self.float_outputs = layout["float_outputs"]
        self.inputs = [*traced.primals, *self.tracers]
        self.specs = [*(traced.hidden.specs if traced.hidden else ()),
                      *[spec(t) for t in self.tracers]]

    def run(self, args: Any) -> tuple[list[Any], list[Any]]:
        """(f's output leaves, the constants of grad_fn's jaxpr `rule_jaxpr`) for `inputs`."""
        n = len(self.traced.primals)
        values = list(self.consts)
        for k, v in zip(self.at, args[n:]):
            values[k] = v
        out = _jax_core_ext.jaxpr_as_fun(_jax_core_ext.ClosedJaxpr(self.jaxpr, values))(
            *args[:n])
        return out[:self.n_out], out[self.n_out:]

    def rule(self, residuals: list[Any]) -> Any:
        """grad_fn's jaxpr with these constants, as a function of the cotangents."""
        return _jax_core_ext.jaxpr_as_fun(_jax_core_ext.ClosedJaxpr(self.rule_jaxpr, residuals))

    def refuse_carried(self, carried: list[bool]) -> None:
        """Raises the named error where one of the inputs after the call's positional ones and
        variables (`carried`, in `inputs`' order from there) is being differentiated."""
        traced = self.traced
        n_hidden = len(traced.primals) - len(traced.specs)
        if not any(carried):
            return
        k = carried.index(True)
        if k < n_hidden:  # a keyword or closure cell (`Hidden`)
            raise traced.hidden.refusal(traced.arguments.f, k)
        raise msg.jax_hidden_tracer(traced.arguments.f,
                                    traced.names_of([self.tracers[k - n_hidden]]))


def direct_output(arguments: Any, traced_call: Any) -> Any:
    """f's output where nothing traces its inputs (concrete arrays, no traced closure cell), f
    run directly. An output that is traced all the same is jax's own record that f used a
    value of an enclosing transformation without receiving it, by whatever route (an object's
    attribute, a bound method, a generator): one being differentiated is refused by name, as
    on every backend (else autodiff would take its gradient through f's own operations, which
    the custom gradient replaces); a jit's or vmap's makes the call again as a traced one
    (`traced_call()`, which hoists it), so that a differentiation of it later is refused too."""
    output, leaves = arguments.output(arguments.tensor_values)
    used = [leaf for leaf in leaves if isinstance(leaf, jax.core.Tracer)]
    if not used:
        return output
    if any([being_differentiated(u) for u in used]):
        refuse_hidden_tracers(arguments.f, arguments.tensor_values)  # names it where it can
        raise msg.jax_hidden_tracer(arguments.f, [])
    return traced_call()


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
    reached: list[Any]
    hoisting: bool
    collect_losses: bool
    output: Any
    assigned: list[Any]
    positions: Any
    leaves: list[Any] | None

    def __init__(self, arguments: Any, assignments_leave: bool, traced: bool = False) -> None:
        """`traced`: the call is traced although nothing shows it yet (`direct_output`)."""
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
        self.traced = traced or _closes_over_tracer(arguments.f) or any(
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
        self.reached = reached  # (name, tracer): a jit's tracers f reaches through objects
        self.hoisting = False  # f traced for `Hoisted`: the tracers it used become inputs
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
        # takes it), but the call is made again in a way that takes it (`HiddenTracers`)
        used = traced_constants()[before:]  # (the constants only grow, in order)
        if used:
            self.refuse_hidden(used)
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

    def refuse_hidden(self, used: list[Any]) -> None:
        """Raises for the tracers f used without receiving them (`used`, jax's record): the
        named error for one being differentiated, `HiddenTracers` for a jit's (unless they
        are being hoisted)."""
        if any([being_differentiated(v) for v in used]):
            raise msg.jax_hidden_tracer(self.arguments.f, self.names_of(used))
        if not self.hoisting:
            raise HiddenTracers

    def names_of(self, tracers: list[Any]) -> list[str]:
        """The names the walk of f's objects gives these tracers (`reached`), where it does."""
        return [name for name, value in self.reached if any([value is t for t in tracers])]

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
