"""TensorFlow: in eager mode the call is recorded on the tapes as one operation whose backward is
grad_fn; in graphs (tf.function, also with jit_compile=True) it is built on tf.custom_gradient over
the flat tensor leaves. customgrad adds the calling convention, the structures and the checks.

This module is the backend contract's face (`backends/_contract.py`): every name the core reads
is defined or imported here. Behind it, one module per concern:

* `tensors.py`: dense values (which leaves are tensors, their specs, conversions, unwatched
  copies of the inputs f runs on where nothing differentiates its intermediates);
* `composites.py`: tf.RaggedTensor and tf.SparseTensor, one value for f and grad_fn and one
  tensor (the one that carries its gradient) for the tape;
* `variables.py`: the variables f reads, which grad_fn receives (keras.Variables, or their
  tf.Variables with `tf_variables=True`), and the losses it adds;
* `link.py`: `call`, the call wired into the tapes (eager) or tf.custom_gradient (graphs);
* `grad_fn.py`: grad_fn's call from TensorFlow's autodiff;
* `forward_mode.py`: JVPs (tf.autodiff.ForwardAccumulator) derived from grad_fn;
* `replicas.py`: one device's gradient norm, from one replica of a tf.distribute strategy;
* `vjp.py`: what customgrad's own transforms need (`vjp_flat`, remat's inputs, float64).

>>> import tensorflow as tf
>>> spec(tf.ragged.constant([[1.0], [2.0, 3.0]])).describe_as
'tf.RaggedTensor'
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from .composites import CompositeSpec, RaggedSpec, SparseSpec, component, with_component
from .link import call, call_with_tf_variables
from .replicas import one_device_sum_of_squares
from .tensors import (being_differentiated, cast_like, convert, dense_spec, is_float, is_tensor,
                      ones_like, static_shape, tensor_value)
from .variables import watching_reads
from .vjp import float64_scope, recomputation_inputs, vjp_flat

__all__ = ["HAS_AUTODIFF", "HAS_FAST_PATH", "FORWARD_MODE_OPT_IN", "being_differentiated",
           "call", "call_with_tf_variables", "cast_like", "convert", "float64_scope", "is_float",
           "is_tensor", "one_device_sum_of_squares", "ones_like", "recomputation_inputs",
           "sees_closures", "spec", "static_shape", "tensor_value", "vjp_flat", "watching_reads",
           "zeros", "zeros_like"]

# capabilities (see _contract.py)
HAS_AUTODIFF = True
HAS_FAST_PATH = False
FORWARD_MODE_OPT_IN = False


def sees_closures() -> bool:
    return True  # f's closure cells can be read while a call runs


def spec(x: Any) -> Any:
    if not isinstance(x, tf.Tensor):
        if isinstance(x, tf.RaggedTensor):
            return RaggedSpec(x)
        if isinstance(x, tf.SparseTensor):
            return SparseSpec(x)
    return dense_spec(x)


def zeros_like(x: Any) -> Any:
    return with_component(x, tf.zeros_like(component(x)))


def zeros(spec: Any) -> Any:
    if isinstance(spec, CompositeSpec):
        return spec.rebuild(zeros(spec.values))
    shape = spec.shape if spec.runtime_shape is None else spec.runtime_shape
    return tf.zeros(shape, dtype=spec.dtype)
