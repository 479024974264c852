"""JAX: built on jax.custom_vjp over the flat array leaves.

As in jax.custom_gradient, grad_fn is traced into a jaxpr inside the forward rule so that the
tensors it closes over become explicit residuals (with jax.make_jaxpr rather than
jax.closure_convert, whose strong per-function cache would keep every call's jaxpr and constants) (that is what makes jit, vmap and grad-of-grad
work). Keras variables are inputs too: inside a stateless scope (model.fit, stateless_call) their
values are tracers, so every traced float variable of the scope is passed to custom_vjp explicitly,
and f and grad_fn run in a scope that binds those variables to these inputs. Variables f assigns
in that scope (a SeedGenerator's state, a moving mean) leave custom_vjp as extra outputs and are
assigned in the caller's scope, so model.fit sees the updates.
"""

from __future__ import annotations

from contextlib import contextmanager

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import keras
import numpy as np
from keras import StatelessScope
from jax._src.interpreters.ad import JVPTracer, LinearizeTracer  # no public name tells AD tracers
from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope

from .. import _forward, _messages as msg
from .._call import rebuild
from .._spec import OutputSpec
from .._variables import recording


# capabilities (see _contract.py)
HAS_AUTODIFF = True
HAS_FAST_PATH = False
FORWARD_MODE_OPT_IN = True
_AD_TRACERS = (JVPTracer, LinearizeTracer)


def tensor_value(leaf):
    if isinstance(leaf, jax.Array):
        return leaf
    if isinstance(leaf, keras.Variable):
        return jnp.asarray(leaf.value)
    return None


def is_tensor(x) -> bool:
    return isinstance(x, jax.Array)


def is_float(x) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def zeros_like(x):
    return jnp.zeros(x.shape, x.dtype)


def sees_closures() -> bool:
    return True  # f's closure cells can be read while a call runs


def being_differentiated(x, closed_over=False) -> bool:
    """Whether `x` is traced by reverse- or forward-mode differentiation (jax.grad, jax.vjp,
    jax.jvp). Under jax.jit alone it is not; differentiation outside a jit (grad of jit) cannot
    be seen from inside it."""
    return isinstance(x, _AD_TRACERS)


def spec(x):
    return OutputSpec(tuple(x.shape), x.dtype, None, is_float(x))


def zeros(spec):
    return jnp.zeros(spec.shape, spec.dtype)


def convert(grad, like):
    if isinstance(grad, keras.Variable):
        grad = grad.value
    return jnp.asarray(grad)


def static_shape(x) -> tuple:
    return tuple(x.shape)


def cast_like(grad, like):
    if grad.dtype != like.dtype:
        grad = grad.astype(like.dtype)
    return grad


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


def _scope_mapping() -> dict | None:
    """The active stateless scope's mapping from id(variable) to value (None outside one)."""
    return get_stateless_scope().state_mapping if in_stateless_scope() else None


class _BoundScope(StatelessScope):
    """The stateless scope f and grad_fn run in: variable reads return this call's values, and
    the assignments made inside are kept (in order, with their variables) to be passed on."""

    def __init__(self, mapping: dict):
        super().__init__(initialize_variables=False)
        self.state_mapping = mapping
        self.updates = {}

    def add_update(self, update):
        super().add_update(update)
        self.updates[id(update[0])] = update


@contextmanager
def _variables_bound(mapping: dict | None, ids: list, values):
    """Variable reads inside the block return `values` for the variables `ids`; yields the
    scope (None outside a stateless scope).

    Keras's JAX trainer keeps variable values in a stateless scope (and purges the variables
    themselves during fit), so f and grad_fn must read the values this call was given: the
    custom_vjp inputs, not the outer trace's tracers.
    """
    if mapping is None:
        yield None
        return
    with _BoundScope({**mapping, **dict(zip(ids, values))}) as scope:
        yield scope


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


class _Inputs:
    """What a traced call passes to custom_vjp (or custom_jvp): the positional tensor leaves,
    then every traced floating-point variable value of the stateless scope (`mapping`).

    Tensors passed by keyword are closed over, not inputs: they get no gradient, and where one is
    differentiated from outside a jit (grad of jit), jax refuses the closed-over value instead of
    giving it a zero gradient (under jax.grad itself the core refused it)."""

    def __init__(self, arguments):
        self.mapping = mapping = _scope_mapping()
        candidates = [
            (key, value) for key, value in (mapping or {}).items()
            if isinstance(value, jax.core.Tracer) and is_float(value)
        ]
        self.tensor_values = list(arguments.tensor_values)
        self.positional = arguments.positional
        self.candidate_ids = [key for key, _ in candidates]
        self.primals = ([self.tensor_values[k] for k in self.positional]
                        + [value for _, value in candidates])
        self.traced = _closes_over_tracer(arguments.f) or any(
            isinstance(p, jax.core.Tracer) for p in self.primals + self.tensor_values)


def call(arguments):
    inputs = _Inputs(arguments)
    if not inputs.traced:
        # Concrete arrays: no transformation is tracing this call, so no gradient can be asked
        # of it. Run f directly (faster, and its exceptions reach the caller untouched).
        return arguments.output(arguments.tensor_values)[0]
    mapping, tensor_values, positional = inputs.mapping, inputs.tensor_values, inputs.positional
    candidate_ids, primals = inputs.candidate_ids, inputs.primals
    n_inputs = len(positional)

    primal_specs = [spec(p) for p in primals]

    # a caller that collects losses (model.fit) would lose one added inside f
    collect_losses = mapping is not None and get_stateless_scope().collect_losses

    def bound(variable_values):
        return _variables_bound(mapping, candidate_ids, variable_values)

    assigned = []  # the variables f assigned, in the order their values follow the outputs
    structure = {}  # the output's structure (of specs), to rebuild it around custom_vjp's result

    def forward(*primals):
        # jax.grad of a Python or numpy scalar hands custom_vjp the scalar itself (a weakly
        # typed literal): f sees an array, as it would on the other backends
        primals = [p if isinstance(p, jax.Array) else jnp.asarray(p) for p in primals]
        values = list(tensor_values)
        for k, p in zip(positional, primals[:n_inputs]):
            values[k] = p
        with bound(primals[n_inputs:]) as scope, recording() as rec:
            _, out_leaves, backward = arguments.forward(values)
        if rec.losses_added and collect_losses:
            raise _loss_error(arguments.f)
        updates = list(scope.updates.values()) if scope is not None else []
        assigned[:] = [variable for variable, _ in updates]
        structure["output"] = backward.output
        out_leaves = [jnp.asarray(o) for o in out_leaves]
        return out_leaves, [jnp.asarray(value) for _, value in updates], backward, rec

    def primal(*primals):
        out_leaves, new_values, _, _ = forward(*primals)
        return out_leaves + new_values

    def fwd(*primals):
        out_leaves, new_values, backward, rec = forward(*primals)
        variables, var_values = rec.variables, rec.raw_values
        float_outputs = tuple(j for j, o in enumerate(out_leaves) if is_float(o))
        variable_primals = primals[n_inputs:]
        eager = not any(isinstance(p, jax.core.Tracer) for p in primals)
        del primals  # the rule must not hold the inputs (only specs): grad_fn keeps what it needs

        def rule(*cotangents):
            # grad_fn may read variables too (a closure over layer.kernel)
            with bound(variable_primals) as scope:
                grads = backward.linked(cotangents, float_outputs, positional, variables,
                                        var_values, variable_primals)
            if scope is not None and scope.updates:
                raise msg.jax_grad_fn_assigned(backward.f, len(scope.updates))
            return [
                zeros(p) if g is None else g
                for g, p in zip(grads, primal_specs)
                if p.floating
            ]

        outputs = out_leaves + new_values
        if eager:
            # Eager jax.grad calls fwd and bwd on concrete arrays: grad_fn can stay a Python
            # closure, and tracing it (about a millisecond a call) is not needed.
            return outputs, _Residuals(rule, [], float_outputs)
        examples = [jax.ShapeDtypeStruct(out_leaves[j].shape, out_leaves[j].dtype)
                    for j in float_outputs]
        traced = jax.make_jaxpr(rule)(*examples)
        return outputs, _Residuals(traced.jaxpr, traced.consts, float_outputs)

    def bwd(res, cotangents):
        grads = iter(res(*[cotangents[j] for j in res.float_outputs]))
        return tuple(
            next(grads) if p.floating else np.zeros(p.shape, dtype=jax.dtypes.float0)
            for p in primal_specs
        )

    f = jax.custom_vjp(primal)
    f.defvjp(fwd, bwd)
    results = f(*primals)
    n_outputs = len(results) - len(assigned)
    for variable, value in zip(assigned, results[n_outputs:]):
        variable.assign(value)  # into the caller's stateless scope
    return rebuild(structure["output"], results[:n_outputs])


def ones_like(x):
    return jnp.ones(x.shape, x.dtype)


def recomputation_inputs(leaves):
    # inside a compiled program XLA would merge the recomputation with the forward it equals
    # (common-subexpression elimination) and keep the intermediates after all; an optimization
    # barrier prevents that, as in jax.checkpoint
    arrays = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.Array)]
    leaves = list(leaves)
    for i, leaf in zip(arrays, jax.lax.optimization_barrier([leaves[i] for i in arrays])):
        leaves[i] = leaf
    return leaves


def vjp_flat(fn, values, reusable=True):
    """Runs fn(*values) -> output leaves; returns (outputs, back(cotangent leaves) -> grads).
    (A jax VJP function can always run again: `reusable` is for tensorflow's tape.)"""
    outputs, back = jax.vjp(lambda *v: fn(*v), *values)

    def backward(cotangents):
        cts = [
            (zeros_like(o) if ct is None else jnp.asarray(ct, o.dtype))
            if is_float(o) else np.zeros(o.shape, dtype=jax.dtypes.float0)
            for o, ct in zip(outputs, cotangents)
        ]
        return list(back(cts))

    return outputs, backward


def float64_scope():
    """float64 arrays need JAX's x64 mode (off by default); scoped to the block."""
    return jax.enable_x64(True)


def _loss_error(f):
    return msg.loss_in_forward(
        f, "on jax inside a stateless scope (model.fit) such a loss cannot leave the custom "
        "gradient, and grad_fn does not define its gradient")


def call_forward_mode(arguments):
    """`call` for `custom_gradient(f, forward_mode=True)`: built on jax.custom_jvp, whose JVP rule
    derives J v from grad_fn (the VJP of grad_fn, which is linear in the cotangent, applied to
    v). jax then takes reverse mode by transposing that rule, which gives back grad_fn's own
    computation: same values, so jax.grad, jax.jvp, jacfwd, jacrev and hessian all use grad_fn.
    (jax allows custom_vjp or custom_jvp on one function, not both: hence the opt-in.)"""
    inputs = _Inputs(arguments)
    if not inputs.traced:
        return arguments.output(arguments.tensor_values)[0]  # nothing can differentiate it
    mapping, tensor_values, positional = inputs.mapping, inputs.tensor_values, inputs.positional
    candidate_ids, primals = inputs.candidate_ids, inputs.primals
    n_inputs = len(positional)
    primal_specs = [spec(p) for p in primals]
    structure = {}  # the output's structure (of specs), to rebuild it around custom_jvp's result

    def forward(primals):
        primals = [p if isinstance(p, jax.Array) else jnp.asarray(p) for p in primals]
        values = list(tensor_values)
        for k, p in zip(positional, primals[:n_inputs]):
            values[k] = p
        with _variables_bound(mapping, candidate_ids, primals[n_inputs:]) as scope, \
                recording() as rec:
            _, out_leaves, backward = arguments.forward(values)
        if scope is not None and scope.updates:
            raise msg.jax_forward_mode_assigned(arguments.f, len(scope.updates))
        if rec.losses_added and mapping is not None and get_stateless_scope().collect_losses:
            raise _loss_error(arguments.f)
        structure["output"] = backward.output
        return [jnp.asarray(o) for o in out_leaves], backward, rec, primals[n_inputs:]

    @jax.custom_jvp
    def primal(*primals):
        return forward(primals)[0]

    @primal.defjvp
    def primal_jvp(primals, tangents):
        out_leaves, backward, rec, variable_primals = forward(primals)
        float_outputs = [j for j, o in enumerate(out_leaves) if is_float(o)]
        floating_in = [k for k, p in enumerate(primal_specs) if p.floating]

        def rule(*cotangents):  # cotangents of the float outputs -> grads of the float inputs
            with _variables_bound(mapping, candidate_ids, variable_primals):
                grads = backward.linked(cotangents, float_outputs, positional, rec.variables,
                                        rec.raw_values, variable_primals)
            return [zeros(primal_specs[k]) if grads[k] is None else grads[k] for k in floating_in]

        concrete = not any(isinstance(p, jax.core.Tracer) for p in primals)
        _forward.check_linear(
            backward.f, backward.grad_fn,
            (lambda us: [np.asarray(g) for g in rule(*[jnp.asarray(u, out_leaves[j].dtype)
                                                       for u, j in zip(us, float_outputs)])])
            if concrete else None,
            [out_leaves[j].shape for j in float_outputs])
        _, back = jax.vjp(rule, *[jnp.zeros_like(out_leaves[j]) for j in float_outputs])
        float_tangents = back([_instantiate(tangents[k], primal_specs[k]) for k in floating_in])
        float_tangents = iter(float_tangents)
        out_tangents = [next(float_tangents) if is_float(o)
                        else np.zeros(o.shape, dtype=jax.dtypes.float0) for o in out_leaves]
        return out_leaves, out_tangents

    results = primal(*primals)
    return rebuild(structure["output"], results)


def _instantiate(tangent, spec_):
    """A tangent as an array of its primal's dtype (jax passes symbolic zeros as float0 or
    SymbolicZero in some paths)."""
    if isinstance(tangent, jax.Array) and tangent.dtype == spec_.dtype:
        return tangent
    if getattr(tangent, "dtype", None) == jax.dtypes.float0 or tangent is None:
        return zeros(spec_)
    return jnp.asarray(tangent, spec_.dtype)
