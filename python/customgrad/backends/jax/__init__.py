"""JAX: built on jax.custom_vjp over the flat array leaves (jax.custom_jvp for forward_mode=True).

This module is the backend's face: the names the contract (`backends/_contract.py`) asks for.
Behind it, one module per concern:

* `tensors.py`: what the core asks of an array (its spec, zeros, conversions, whether it is
  being differentiated).
* `scope.py`: Keras variables as inputs. Inside a stateless scope (model.fit, stateless_call)
  their values are tracers, so every traced float variable of the scope is passed to custom_vjp
  explicitly, and f and grad_fn run in a scope that binds those variables to these inputs.
* `traced.py`: one call that a transformation traces: its primals, f run on them in the bound
  scope, and grad_fn as the rule linked to them; shared by both entry points. It refuses by
  name a tensor being differentiated that f reaches through an object it closes over
  (`refuse_hidden_tracers`): inside the custom_vjp jax could not use it. Under grad of jit, where
  such a tensor is only a jit tracer while f runs, it is refused by name when the outer grad
  differentiates it, not by jax's CustomVJPException: a keyword or closure-cell tensor becomes an
  extra input f reads instead (`Hidden`); where jax's record (the jaxpr's constants) shows that
  f used one by another route, the call is traced once into a jaxpr that takes it as an input
  (`Hoisted`), whose rules evaluate that jaxpr rather than run f again.
* `link.py`: `call`, on custom_vjp. As in jax.custom_gradient, grad_fn is traced into a jaxpr
  inside the forward rule so that the tensors it closes over become explicit residuals (that is
  what makes jit, vmap and grad-of-grad work). Variables f assigns (a SeedGenerator's state, a
  moving mean) leave custom_vjp as extra outputs and are assigned in the caller's scope, so
  model.fit sees the updates.
* `forward_mode.py`: `call_forward_mode`, on custom_jvp, whose JVP rule is derived from grad_fn.
* `vjp.py`: what `customgrad.remat` and the gradient checker ask of jax (`vjp_flat`,
  `recomputation_inputs`, `float64_scope`).
"""

from .tensors import (being_differentiated, cast_like, convert, is_float, is_tensor,
                     one_device_sum_of_squares, ones_like,
                     sees_closures, spec, static_shape, tensor_value, watching_reads, zeros,
                     zeros_like)
from .forward_mode import call_forward_mode
from .link import call
from .vjp import float64_scope, recomputation_inputs, vjp_flat

# jax removes the frames of the paths it knows from the tracebacks of exceptions that leave its
# transformations (JAX_TRACEBACK_FILTERING): customgrad's too, as the other backends' entry
# points remove them themselves (`_tracebacks`)
from ..._tracebacks import register_with_jax

register_with_jax()

# capabilities (see _contract.py)
HAS_AUTODIFF = True
HAS_FAST_PATH = False
FORWARD_MODE_OPT_IN = True

__all__ = [
    "HAS_AUTODIFF", "HAS_FAST_PATH", "FORWARD_MODE_OPT_IN",
    "being_differentiated", "call", "call_forward_mode", "cast_like", "convert", "float64_scope",
    "is_float", "is_tensor", "one_device_sum_of_squares", "ones_like", "recomputation_inputs",
    "sees_closures", "spec", "static_shape", "tensor_value", "vjp_flat", "watching_reads",
    "zeros", "zeros_like",
]
