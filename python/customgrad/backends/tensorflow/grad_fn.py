"""grad_fn's call from TensorFlow's autodiff: the tape's cotangents in, the gradients of the
flat tensor components out (`gradients`), and the grad function tf.custom_gradient takes
(`tf_grad_fn`)."""

from __future__ import annotations

from .composites import component
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
