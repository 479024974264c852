"""One call that a transformation traces, as custom_vjp (`link.py`) and custom_jvp
(`forward_mode.py`) take it: its primals, f run on them inside the bound variable scope, and
grad_fn as the rule linked to them. Both entry points use it; what differs is explicit: on the
custom_vjp path the variables f assigns leave as extra outputs, on the custom_jvp path an
assignment is an error.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ... import _messages as msg, _tree
from .tensors import is_float, spec, zeros
from .scope import collects_losses, scope_mapping, variables_bound


def _closes_over_tracer(f) -> bool:
    """Whether f closes over a traced value (directly): then a transformation traces this call
    even with concrete arguments, and custom_vjp must see it (under grad of jit, jax then
    refuses the closed-over value being differentiated instead of differentiating f's ops)."""
    for cell in getattr(f, "__closure__", None) or ():
        try:
            if isinstance(cell.cell_contents, jax.core.Tracer):
                return True
        except ValueError:  # an empty cell
            continue
    return False


def concrete(primals) -> bool:
    """Whether no transformation traces these primals (eager jax.grad hands over arrays)."""
    return not any(isinstance(p, jax.core.Tracer) for p in primals)


class Traced:
    """One call as custom_vjp (or custom_jvp) takes it.

    Its primals are the positional tensor leaves, then every traced floating-point variable value
    of the stateless scope. Tensors passed by keyword are closed over, not inputs: they get no
    gradient, and where one is differentiated from outside a jit (grad of jit), jax refuses the
    closed-over value instead of giving it a zero gradient (under jax.grad itself the core
    refused it).

    `traced` is False where nothing traces the call (concrete arrays, no traced closure): then no
    gradient can be asked of it, and the caller runs f directly.
    """

    def __init__(self, arguments, assignments_leave: bool):
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
        self.specs = [spec(p) for p in self.primals]
        self.collect_losses = collects_losses(mapping)  # a loss added inside f would be lost
        self.output = None  # the output's structure (of specs), once f ran
        self.assigned = []  # the variables f assigned, in the order their values follow

    def forward(self, primals) -> tuple[list, Rule]:
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
        variable_primals = primals[n_inputs:]
        f = self.arguments.f
        with variables_bound(self.mapping, self.variable_ids, variable_primals) as scope:
            _, out_leaves, backward = self.arguments.forward(values)
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
        self.positions = [j for j, o in enumerate(out_leaves) if isinstance(o, jax.Array)]
        self.leaves = out_leaves if len(self.positions) < len(out_leaves) else None
        arrays = [out_leaves[j] for j in self.positions]
        float_outputs = tuple(k for k, o in enumerate(arrays) if is_float(o))
        link = backward.link([self.positions[k] for k in float_outputs], self.positional,
                             wanted=variable_primals)
        rule = Rule(link, float_outputs, self.specs,
                    (self.mapping, self.variable_ids, variable_primals))
        return arrays + [jnp.asarray(value) for _, value in updates], rule

    def rebuild(self, arrays):
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

    def __init__(self, link, float_outputs: tuple, specs: list, binding: tuple):
        self.link, self.float_outputs, self.specs, self.binding = (
            link, float_outputs, specs, binding)

    def __call__(self, *cotangents) -> list:
        # grad_fn may read variables too (a closure over layer.kernel)
        with variables_bound(*self.binding) as scope:
            grads = self.link(cotangents)
        if scope is not None and scope.updates:
            raise msg.jax_grad_fn_assigned(self.link.backward.f, len(scope.updates))
        return [zeros(s) if g is None else g for g, s in zip(grads, self.specs) if s.floating]
