"""Forward mode (tf.autodiff.ForwardAccumulator) derived from grad_fn.

In eager mode the call is recorded on the tapes as one operation whose backward is grad_fn (see
`link.py`), which an accumulator transposes into the JVP; this module holds whether an
accumulator watches, the check that grad_fn is linear in its upstream, and the call inside a
tf.function under an accumulator opened there.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python import pywrap_tfe  # ... or tells whether a forward accumulator watches
from tensorflow.python.eager import record  # no public API stops recording on every tape

from ... import _forward
from .grad_fn import custom_gradient_grad, record_on_tapes
from .tensors import is_float
from .variables import grad_fn_variables, loss_error


def has_tangents(tensors) -> bool:
    """Whether a tf.autodiff.ForwardAccumulator watches one of `tensors`."""
    return bool(pywrap_tfe.TFE_Py_PackJVPs(list(tensors))[1])


def check_linear(link, out_leaves, concrete):
    """Forward mode is derived from grad_fn: refuses a grad_fn that is not linear in upstream
    (marked, or, on concrete values, failing the probe, which calls grad_fn through `link` as
    the backward does: with the variables f read)."""
    backward = link.backward
    float_outputs = [o for o in out_leaves if tf.is_tensor(o) and is_float(o)]
    rule = None
    if concrete and len(float_outputs) == len(out_leaves) and all(
            o.dtype.is_floating and o.shape.is_fully_defined() for o in float_outputs):
        n_inputs = len(backward.input_specs)

        def rule(us):
            with record.stop_recording():
                grads = link([tf.constant(u, o.dtype) for u, o in zip(us, float_outputs)])
            return [None if g is None else g.numpy() for g in grads[:n_inputs]]
    _forward.check_linear(backward.f, backward.grad_fn, rule,
                          [tuple(o.shape) for o in float_outputs])


def call_graph_forward_mode(arguments, tf_variables):
    """A call inside a tf.function under a tf.autodiff.ForwardAccumulator opened there.

    The accumulator would see tf.custom_gradient's IdentityN, not grad_fn: its JVP would be f's
    own derivative (NaN for log1pexp at 100) or zero. The outputs of tf.custom_gradient go
    through one more identity, which is recorded (inputs -> outputs) with grad_fn as its
    backward: the accumulator transposes it into the JVP, as it does in eager mode, and a tape
    inside the function uses grad_fn. The graph itself still carries tf.custom_gradient's
    gradient, for a tape outside the tf.function.
    """
    link = out_leaves = None  # this call's, once f ran inside tf.custom_gradient

    @tf.custom_gradient
    def forward(*tensors):
        nonlocal link, out_leaves
        _, out_leaves, backward = arguments.forward(tensors)
        if backward.reads.losses_added:
            raise loss_error(arguments.f)
        out_leaves = [tf.convert_to_tensor(o) for o in out_leaves]
        link = backward.link(variables=grad_fn_variables(backward.reads, tf_variables))
        return out_leaves, custom_gradient_grad(link)

    results = forward(*arguments.tensor_values)
    check_linear(link, out_leaves, concrete=False)
    outputs = record_on_tapes(link.wanting(link.variable_values), results,
                              arguments.tensor_values)
    return link.backward.rebuild(outputs)
