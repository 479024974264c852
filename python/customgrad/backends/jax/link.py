"""`call`: one call linked into jax's autodiff with jax.custom_vjp over the flat array leaves.

As in jax.custom_gradient, grad_fn is traced into a jaxpr inside the forward rule so that the
tensors it closes over become explicit residuals (with `traced.rule_jaxpr`, jax's tracer
itself, rather than jax.closure_convert, whose strong per-function cache would keep every call's
jaxpr and constants, or jax.make_jaxpr, which traces a jit of the rule): that is what makes jit,
vmap and grad-of-grad work. Variables f assigns in its stateless scope (a SeedGenerator's state,
a moving mean) leave custom_vjp as extra outputs and are assigned in the caller's scope, so
model.fit sees the updates.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np

from ... import _messages as msg
from .tensors import zeros
from .traced import HiddenTracers, Hoisted, Traced, concrete, direct_output, rule_jaxpr


@jax.tree_util.register_pytree_node_class
class _Residuals:
    """What the backward needs: the rule (static) and the tensors it closes over (children).

    Under tracing the rule is grad_fn traced into a jaxpr and `consts` are its constants; in
    eager mode (nothing traces the forward) it is the Python rule itself, with no constants.
    """

    def __init__(self, rule, consts, float_outputs):
        self.rule, self.consts, self.float_outputs = rule, consts, float_outputs

    def tree_flatten(self):
        return tuple(self.consts), (self.rule, self.float_outputs)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(aux[0], list(children), aux[1])

    def __call__(self, *cotangents):
        if callable(self.rule):
            return self.rule(*cotangents)
        return jax_core.jaxpr_as_fun(jax_core.ClosedJaxpr(self.rule, self.consts))(*cotangents)


def call(arguments: Any) -> Any:
    traced = Traced(arguments, assignments_leave=True)
    if not traced.traced:
        # Concrete arrays: no transformation traces f's inputs, so run f directly (faster, and
        # its exceptions reach the caller untouched), unless f's output says otherwise.
        return direct_output(arguments, lambda: _traced_call(
            Traced(arguments, assignments_leave=True, traced=True)))
    return _traced_call(traced)


def _traced_call(traced: Traced) -> Any:
    """`call` of a call that a transformation traces."""
    arguments = traced.arguments
    specs = traced.specs

    def primal(*primals):
        return traced.forward(primals)[0]

    def fwd(*primals):
        outputs, rule = traced.forward(primals)
        if concrete(primals):
            # Eager jax.grad calls fwd and bwd on concrete arrays: grad_fn can stay a Python
            # object, and tracing it (about a millisecond a call) is not needed.
            return outputs, _Residuals(rule, [], rule.float_outputs)
        # traced on the outputs' abstract values, which keep what a shape and dtype lose:
        # inside jax.shard_map, which mesh axes a value varies over (else grad_fn's upstream
        # would be invariant, and combining it with a varying forward tensor is an error)
        jaxpr, consts = rule_jaxpr(rule, [jax.typeof(outputs[j]) for j in rule.float_outputs])
        return outputs, _Residuals(jaxpr, consts, rule.float_outputs)

    def bwd(res, cotangents):
        grads = iter(res(*[cotangents[j] for j in res.float_outputs]))
        return tuple(next(grads) if s.floating else _no_gradient(s) for s in specs)

    f = jax.custom_vjp(primal)
    if traced.hidden:
        f.defvjp(*_refusing_hidden(traced, fwd, bwd), symbolic_zeros=True)
    else:
        f.defvjp(fwd, bwd)
    try:
        try:
            results = f(*traced.primals)
        except HiddenTracers:  # jax's record: f used a jit's tracers it did not receive
            results = hoisted_call(traced, bwd)
    except TypeError as error:
        if "forward-mode autodiff (jvp) to a custom_vjp" not in str(error):
            raise
        raise msg.jax_forward_mode_needs_opt_in(arguments.f, error) from error
    n_outputs = len(results) - len(traced.assigned)
    for variable, value in zip(traced.assigned, results[n_outputs:]):
        variable.assign(value)  # into the caller's stateless scope
    return traced.rebuild(results[:n_outputs])


def hoisted_call(traced: Traced, bwd: Any) -> Any:
    """`call` as a `Hoisted` one: f used tracers of a jit that it did not receive. `bwd`:
    `call`'s, the gradients of the call's own primals."""
    hoisted = Hoisted(traced)
    n_specs = len(traced.specs)

    def primal(*args):
        return hoisted.run(args)[0]

    def fwd(*args):
        hoisted.refuse_carried([a.perturbed for a in args[n_specs:]])
        outputs, residuals = hoisted.run([a.value for a in args])
        return outputs, _Residuals(hoisted.rule_jaxpr, residuals, hoisted.float_outputs)

    def bwd_(res, cotangents):
        return bwd(res, _instantiated(cotangents)) + tuple(
            zeros(s) if s.floating else _no_gradient(s) for s in hoisted.specs)

    call = jax.custom_vjp(primal)
    call.defvjp(fwd, bwd_, symbolic_zeros=True)
    return call(*hoisted.inputs)


def _no_gradient(s):
    """The cotangent of an input that is not floating point."""
    return np.zeros(s.shape, dtype=jax.dtypes.float0)


def _instantiated(cotangents):
    """The cotangents of a custom_vjp with symbolic zeros, a symbolic zero as an array."""
    return [jnp.zeros(c.shape, c.dtype) if isinstance(c, jax.custom_derivatives.SymbolicZero)
            else c for c in cotangents]


def _refusing_hidden(traced, fwd, bwd):
    """fwd and bwd for a custom_vjp with symbolic zeros whose last primals are the tracers f
    reads by keyword or closure (`traced.Hidden`): fwd refuses by name one being
    differentiated (`perturbed`, which only symbolic zeros tell), bwd gives the others a zero
    gradient."""
    n = len(traced.specs)
    hidden = traced.hidden

    def fwd_(*primals):
        for k, p in enumerate(primals[n:]):
            if p.perturbed:
                raise hidden.refusal(traced.arguments.f, k)
        return fwd(*[p.value for p in primals])

    def bwd_(res, cotangents):
        return bwd(res, _instantiated(cotangents)) + tuple(zeros(s) for s in hidden.specs)

    return fwd_, bwd_
