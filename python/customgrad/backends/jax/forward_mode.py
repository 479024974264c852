"""`call_forward_mode`: `call` for `custom_gradient(f, forward_mode=True)`, on jax.custom_jvp.

The JVP rule derives J v from grad_fn (the VJP of grad_fn, which is linear in the cotangent,
applied to v). jax then takes reverse mode by transposing that rule, which gives back grad_fn's
own computation: same values, so jax.grad, jax.jvp, jacfwd, jacrev and hessian all use grad_fn.
(jax allows custom_vjp or custom_jvp on one function, not both: hence the opt-in.) A custom_jvp
function has no way out for variable updates: f assigning a variable in a stateless scope is an
error.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ... import _forward
from .tensors import is_float, zeros
from .traced import HiddenTracers, Hoisted, Traced, concrete, direct_output


def call_forward_mode(arguments: Any) -> Any:
    traced = Traced(arguments, assignments_leave=False)
    if not traced.traced:  # as in `link.call`
        return direct_output(arguments, lambda: _traced_call(
            Traced(arguments, assignments_leave=False, traced=True)))
    return _traced_call(traced)


def _traced_call(traced: Traced) -> Any:
    """`call_forward_mode` of a call that a transformation traces."""
    specs = traced.specs
    floating_in = [k for k, s in enumerate(specs) if s.floating]

    @jax.custom_jvp
    def primal(*primals):
        return traced.forward(primals)[0]

    def primal_jvp(primals, tangents):
        out_leaves, rule = traced.forward(primals)
        float_outputs = rule.float_outputs

        def check_rule(us):  # grad_fn on concrete numpy cotangents, for the linearity check
            cotangents = [jnp.asarray(u, out_leaves[j].dtype) for u, j in zip(us, float_outputs)]
            return [np.asarray(g) for g in rule(*cotangents)]

        _forward.check_linear(rule.link.backward.f, rule.link.backward.grad_fn,
                              check_rule if concrete(primals) else None,
                              [out_leaves[j].shape for j in float_outputs])
        return out_leaves, derived_tangents(rule, out_leaves, float_outputs,
                                            [tangents[k] for k in floating_in],
                                            [specs[k] for k in floating_in])

    if traced.hidden:
        primal.defjvp(_refusing_hidden(traced, primal_jvp), symbolic_zeros=True)
    else:
        primal.defjvp(primal_jvp)
    try:
        return traced.rebuild(primal(*traced.primals))
    except HiddenTracers:  # jax's record: f used a jit's tracers it did not receive
        return traced.rebuild(_hoisted_call(traced))


def derived_tangents(rule: Any, out_leaves: Any, float_outputs: Any, tangents: Any,
                     specs: Any) -> list[Any]:
    """The output tangents J v: the VJP of the rule (grad_fn, linear in the cotangents) applied
    to the float inputs' `tangents` (None or a symbolic zero: zero)."""
    _, back = jax.vjp(rule, *[jnp.zeros_like(out_leaves[j]) for j in float_outputs])
    float_tangents = iter(back([_instantiate(t, s) for t, s in zip(tangents, specs)]))
    return [next(float_tangents) if is_float(o) else np.zeros(o.shape, dtype=jax.dtypes.float0)
            for o in out_leaves]


def _hoisted_call(traced: Any) -> Any:
    """`call_forward_mode` as a `Hoisted` one: f used tracers of a jit it did not receive."""
    hoisted = Hoisted(traced)
    specs, n_specs = traced.specs, len(traced.specs)
    floating_in = [k for k, s in enumerate(specs) if s.floating]

    @jax.custom_jvp
    def primal(*args):
        return hoisted.run(args)[0]

    def primal_jvp(args, tangents):
        hoisted.refuse_carried([not isinstance(t, jax.custom_derivatives.SymbolicZero)
                                for t in tangents[n_specs:]])
        out_leaves, residuals = hoisted.run(args)
        return out_leaves, derived_tangents(hoisted.rule(residuals), out_leaves,
                                            hoisted.float_outputs,
                                            [tangents[k] for k in floating_in],
                                            [specs[k] for k in floating_in])

    primal.defjvp(primal_jvp, symbolic_zeros=True)
    return primal(*hoisted.inputs)


def _refusing_hidden(traced, jvp):
    """The JVP rule, with symbolic zeros, of a custom_jvp whose last primals are the tracers f
    reads by keyword or closure (`traced.Hidden`): it refuses by name one that carries a tangent
    (grad of jit differentiating it), and leaves the others out of the JVP."""
    n = len(traced.specs)

    def jvp_(primals, tangents):
        for k, tangent in enumerate(tangents[n:]):
            if not isinstance(tangent, jax.custom_derivatives.SymbolicZero):
                raise traced.hidden.refusal(traced.arguments.f, k)
        return jvp(primals, [None if isinstance(t, jax.custom_derivatives.SymbolicZero) else t
                             for t in tangents[:n]])

    return jvp_


def _instantiate(tangent, spec_):
    """A tangent as an array of its primal's dtype (jax passes symbolic zeros as float0 or
    SymbolicZero in some paths)."""
    if isinstance(tangent, jax.Array) and tangent.dtype == spec_.dtype:
        return tangent
    if (getattr(tangent, "dtype", None) == jax.dtypes.float0 or tangent is None
            or isinstance(tangent, jax.custom_derivatives.SymbolicZero)):
        return zeros(spec_)
    return jnp.asarray(tangent, spec_.dtype)
