"""PyTorch: f runs once with autograd on; its outputs are detached and re-attached to the inputs
through an autograd.Function whose backward is grad_fn.

Running f with autograd on (rather than inside autograd.Function.forward, which runs under
no_grad) keeps the tensors grad_fn closes over connected to the inputs, so double backward
(`create_graph=True`) differentiates grad_fn itself. Detaching the outputs drops every part of the
forward graph that grad_fn does not use.

This package is the backend's face: the names of the contract (`backends/_contract.py`), and
nothing else. Behind it, one module per concern:

* `tensors`: what a torch tensor is to the core (specs, zeros, conversions, dtype checks).
* `link`: the general call (`call`): f's outputs linked to its inputs through the call's
  `_call.Link`, and what the link checks before grad_fn runs (`guard`: the hidden parameters
  grad_fn must take, the tensors its closure holds, unchanged in place since the forward).
* `functions`: the autograd.Functions whose backward is the link.
* `fast_path`: `call_positional`, the eager call on positional tensors, in one pass.
* `compiled`: that kind of call while torch.compile traces, with as little Python as it needs
  (dynamo inlines every function on the path at every call site).
* `hidden_inputs`: what a call depends on without receiving it: the parameters f reads (the
  autograd walk that finds them, and their names for messages).
* `rebinding`: grad_fn sees the values f read (a stateless scope's, the parameters
  `torch.func.functional_call` swapped in), bound again while it runs.
* `forward_mode`: dual tensors (torch.autograd.forward_ad) and the JVP derived from grad_fn;
  the tangents f reaches other than as arguments, and the JVP rule under hessian.
* `replicas`: one device's gradient norm, from one rank of DDP or FSDP.
* `vjp`: `vjp_flat` and `recomputation_inputs`, for customgrad.vjp/jvp, the gradient checker
  and remat.
"""

from __future__ import annotations

from .fast_path import call_positional
from .link import call
from .replicas import one_device_sum_of_squares
from .tensors import (
    being_differentiated,
    cast_like,
    convert,
    float64_scope,
    is_float,
    is_tensor,
    ones_like,
    sees_closures,
    spec,
    static_shape,
    tensor_value,
    watching_reads,
    zeros,
    zeros_like,
)
from .vjp import recomputation_inputs, vjp_flat

# capabilities (see _contract.py)
HAS_AUTODIFF = True
HAS_FAST_PATH = True
FORWARD_MODE_OPT_IN = False

__all__ = [
    "HAS_AUTODIFF", "HAS_FAST_PATH", "FORWARD_MODE_OPT_IN",
    "being_differentiated", "call", "call_positional", "cast_like", "convert", "float64_scope",
    "is_float", "is_tensor", "one_device_sum_of_squares", "ones_like", "recomputation_inputs",
    "sees_closures", "spec", "static_shape", "tensor_value", "vjp_flat", "watching_reads", "zeros",
    "zeros_like",
]
