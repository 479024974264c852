"""grad_fn's call from TensorFlow's autodiff, through the call's `_call.Link`: the tape's
cotangents in, the gradients of the flat tensor components out (`gradients`); the grad function
tf.custom_gradient takes (`custom_gradient_grad`); and the one operation recorded on the tapes
whose backward is grad_fn (`record_on_tapes`)."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.eager import record  # no public API records an op with its own backward

from ... import _messages as msg
from .composites import component, upstream_leaves
from .variables import keras_variables_error


def gradients(link, cotangents):
    """grad_fn's call through `link` on the tape's cotangents (one per linked output): the
    gradients (flat components) of the inputs, then those of the variables the link wants. A
    grad_fn that trips on a keras.Variable among its `variables=` gets a CustomGradientError
    that says why (see `variables.py`)."""
    try:
        grads = link(upstream_leaves(link, cotangents))
    except (TypeError, AttributeError, ValueError) as error:
        explained = keras_variables_error(link.backward.f, link.variables, error)
        if explained is None:
            raise
        raise explained from error
    return [component(g) for g in grads]


def custom_gradient_grad(link):
    """The grad function handed to tf.custom_gradient for the call `link` links."""

    def grad(*cotangents, variables=None):
        # TensorFlow passes `variables` when its own watcher saw any, integer ones included;
        # those are not among what f read for grad_fn, and get no gradient
        if variables is None:
            return gradients(link, cotangents)
        grads = gradients(link.wanting(variables), cotangents)
        n_inputs = len(grads) - len(variables)
        return grads[:n_inputs], grads[n_inputs:]

    return grad


def record_on_tapes(link, outputs, tape_inputs) -> list:
    """Records one operation (`tape_inputs` and the reads of the link's variable values ->
    `outputs`, flat tensors of the outputs it links) on every active tape and forward
    accumulator, whose backward is grad_fn; returns the recorded outputs."""
    with record.stop_recording():
        # new tensors (no copy): an output that is an input, or a tensor some tape already
        # knows, must not get a second producer on the tape
        recorded = [tf.identity(o) for o in outputs]
    # reading a variable records the read (handle -> value), which connects its gradient
    inputs = list(tape_inputs) + [tf.convert_to_tensor(v) for v in link.variable_values]

    def backward_fn(*cotangents):
        return gradients(link, cotangents)

    record.record_operation(f"customgrad_{msg.fn_name(link.backward.f)}", recorded, inputs,
                            backward_fn)
    return recorded
