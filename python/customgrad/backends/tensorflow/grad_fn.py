"""grad_fn's call from TensorFlow's autodiff: the tape's cotangents in, the gradients of the
flat tensor components out (`gradients`); the grad function tf.custom_gradient takes
(`tf_grad_fn`); and the one operation recorded on the tapes whose backward is grad_fn
(`record_on_tapes`)."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.eager import record  # no public API records an op with its own backward

from ... import _messages as msg
from .composites import component, upstream_leaves
from .variables import keras_variables_error


def gradients(backward, cotangents, variables, var_values, wanted):
    """grad_fn's call: the gradients (flat components) of every tensor leaf of the arguments,
    then those of `wanted` (variable values). `variables` is what grad_fn receives (see
    `variables.py`); a grad_fn that trips on a keras.Variable among them gets a
    CustomGradientError that says why."""
    try:
        grads = backward.linked(cotangents, None, range(len(backward.input_specs)), variables,
                                var_values, wanted)
    except (TypeError, AttributeError, ValueError) as error:
        explained = keras_variables_error(backward.f, variables, error)
        if explained is None:
            raise
        raise explained from error
    return [component(g) for g in grads]


def tf_grad_fn(backward_fn, n_inputs):
    """The grad function handed to tf.custom_gradient: `backward_fn(cotangents, wanted)` returns
    the gradients of the `n_inputs` inputs, then those of the variables `wanted`."""

    def grad(*cts, variables=None):
        # TensorFlow passes `variables` when its own watcher saw any, integer ones included;
        # those are not among what f read for grad_fn, and get no gradient
        grads = backward_fn(cts, variables or ())
        if variables is None:
            return grads
        return grads[:n_inputs], grads[n_inputs:]

    return grad


def record_on_tapes(backward, outputs, tape_inputs, variables, var_values,
                    positions=None) -> list:
    """Records one operation (`tape_inputs` and the reads of `var_values` -> `outputs`, flat
    tensors, at `positions` among f's output leaves) on every active tape and forward
    accumulator, whose backward is grad_fn; returns the recorded outputs."""
    with record.stop_recording():
        # new tensors (no copy): an output that is an input, or a tensor some tape already
        # knows, must not get a second producer on the tape
        recorded = [tf.identity(o) for o in outputs]
    # reading a variable records the read (handle -> value), which connects its gradient
    inputs = list(tape_inputs) + [tf.convert_to_tensor(v) for v in var_values]

    def backward_fn(*cotangents):
        return gradients(backward, upstream_leaves(backward, cotangents, positions), variables,
                         var_values, var_values)

    record.record_operation(f"customgrad_{msg.fn_name(backward.f)}", recorded, inputs,
                            backward_fn)
    return recorded
