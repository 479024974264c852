"""What customgrad's own transforms need of TensorFlow: the VJP of a function (`customgrad.grad`,
`vjp`, the gradient checker), the inputs of remat's recomputation, and the float64 scope of the
gradient checker.

>>> import tensorflow as tf
>>> outputs, back = vjp_flat(lambda x: [x * x], [tf.constant(3.0)])
>>> float(back([tf.constant(1.0)])[0])
6.0
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import tensorflow as tf
from tensorflow.python.framework.composite_tensor import CompositeTensor

from ... import _messages as msg
from .composites import SUPPORTED, component, with_component
from .tensors import is_float

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def recomputation_inputs(leaves: list[Any]) -> list[Any]:
    return list(leaves)  # the recomputation's tape watches its own inputs: nothing to cut


def vjp_flat(fn: Callable[..., Any], values: list[Any],
             reusable: bool = True) -> tuple[Sequence[Any], Callable[[list[Any]], list[Any]]]:
    """Runs fn(*values) -> output leaves under a tape; returns (outputs, back(cotangents)).

    The tape is persistent only when back may run more than once: under a persistent (or nested)
    tape TensorFlow drops custom gradients, tf.custom_gradient's too, of calls inside
    tf.cond/tf.while_loop branches of a tf.function and inside a tf.function called under it.
    A ragged or sparse value is differentiated through its (flat) values, and its gradient is
    ragged or sparse, with its structure.
    """
    for v in values:
        if isinstance(v, CompositeTensor) and not isinstance(
                v, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
            raise msg.tf_vjp_composite(v, SUPPORTED)
    sources = [component(v) for v in values]
    with tf.GradientTape(persistent=reusable) as tape:
        for v in sources:
            tape.watch(v)
        outputs = fn(*values)

    def backward(cotangents):  # one per output (the core filled in zeros: `_autodiff._filled`)
        pairs = [
            (component(o), tf.cast(component(ct), o.dtype))
            for o, ct in zip(outputs, cotangents)
            if tf.is_tensor(o) and is_float(o)
        ]
        if not pairs:
            grads = [tf.zeros_like(v) for v in sources]
        else:
            grads = tape.gradient(
                [o for o, _ in pairs], sources, output_gradients=[c for _, c in pairs],
                unconnected_gradients=tf.UnconnectedGradients.ZERO,
            )
        return [g if v is s else with_component(v, tf.convert_to_tensor(g))
                for v, s, g in zip(values, sources, grads)]

    return outputs, backward


def float64_scope() -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()
