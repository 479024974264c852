"""grad_fn's call from TensorFlow's autodiff, through the call's `_call.Link`: the tape's
cotangents in, the gradients of the flat tensor components out (`gradients`); the grad function
tf.custom_gradient takes (`custom_gradient_grad`, and `graph_grad` where the op also takes the
tensors f reaches without receiving them positionally); and the one operation recorded on the tapes
whose backward is grad_fn (`record_on_tapes`).

grad_fn reads the variable values f read: inside Keras's stateless scope (`layer.stateless_call`)
f read the values the scope binds, but the tape calls grad_fn after the scope is gone, where a
read of `self.kernel` gives the stored value. The scope's values are kept (`stateless_values`)
and bound again around grad_fn's call, as the jax backend does.
"""

from __future__ import annotations

from typing import Any

from keras import StatelessScope
from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope
import tensorflow as tf
from tensorflow.python.eager import record  # no public API records an op with its own backward

from ... import _messages as msg
from ..._tracebacks import without_own_frames
from .composites import component, upstream_leaves
from .hidden_inputs import autodiff_gradients
from .variables import keras_variables_error


def stateless_values(reads: Any) -> dict[Any, Any] | None:
    """The variable values of the stateless scope f ran in (id(variable) -> value), for grad_fn
    to read the same; None outside one, or where f read no keras.Variable (the common call:
    nothing is looked up)."""
    if not reads.variables or not in_stateless_scope():
        return None
    return dict(get_stateless_scope().state_mapping)


class _Rebound(StatelessScope):
    """A stateless scope binding the values f read (see `stateless_values`) while grad_fn
    runs; it creates and initializes nothing."""

    def __init__(self, mapping: dict[Any, Any]):
        super().__init__(initialize_variables=False)
        self.state_mapping = mapping


def gradients(link: Any, cotangents: Any, bound: Any = None) -> Any:
    """grad_fn's call through `link` on the tape's cotangents (one per linked output): the
    gradients (flat components) of the inputs, then those of the variables the link wants;
    `bound`: the `stateless_values` f read, bound again while grad_fn runs. A grad_fn that trips
    on a keras.Variable among its `variables=` gets a CustomGradientError that says why (see
    `variables.py`)."""
    try:
        if bound is None:
            grads = link(upstream_leaves(link, cotangents))
        else:
            with _Rebound(bound):
                grads = link(upstream_leaves(link, cotangents))
    except (TypeError, AttributeError, ValueError) as error:
        explained = keras_variables_error(link.backward.f, link.variables, error)
        if explained is None:
            raise
        raise explained from error
    return [component(g) for g in grads]


def custom_gradient_grad(link: Any, bound: Any = None) -> Any:
    """The grad function handed to tf.custom_gradient for the call `link` links (`bound`: see
    `gradients`)."""

    def grad(*cotangents, variables=None):
        # TensorFlow passes `variables` when its own watcher saw any, integer ones included;
        # those are not among what f read for grad_fn, and get no gradient
        try:
            if variables is None:
                return gradients(link, cotangents, bound)
            grads = gradients(link.wanting(variables), cotangents, bound)
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's tape.gradient
            raise
        n_inputs = len(grads) - len(variables)
        return grads[:n_inputs], grads[n_inputs:]

    return grad


def graph_grad(link: Any, bound: Any, inputs: Any, hidden: Any, outputs: Any) -> Any:
    """`custom_gradient_grad` for an op that also takes `hidden`'s extra inputs (a
    `hidden_inputs.GraphHidden`; `inputs`: the call's tensors, `outputs`: f's outputs the op
    links): a stateless scope's value gets the gradient grad_fn returns for its keras.Variable
    in `variables=`; a keyword tensor autodiff's through f's own operations (grad_fn
    has none for it)."""
    scope = hidden.scope

    def grad(*cotangents, variables=None):
        wanted = [*scope, *(variables or ())]
        try:
            grads = gradients(link.wanting(wanted), cotangents, bound)
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's tape.gradient
            raise
        n_inputs = len(grads) - len(wanted)
        input_grads, scope_grads = grads[:n_inputs], grads[n_inputs:n_inputs + len(scope)]
        keyword = [k for k in hidden.keyword if input_grads[k] is None]
        targets = [inputs[k] for k in keyword]
        skip = {id(t) for t in targets}
        stop = [t for t in [*inputs, *scope] if id(t) not in skip]
        for k, g in zip(keyword, autodiff_gradients(outputs, cotangents, targets, stop)):
            input_grads[k] = g
        all_grads = [*input_grads, *scope_grads]
        if variables is None:
            return all_grads
        return all_grads, grads[n_inputs + len(scope):]

    return grad


def record_on_tapes(link: Any, outputs: Any, tape_inputs: Any, bound: Any = None) -> list[Any]:
    """Records one operation (`tape_inputs` and the reads of the link's variable values ->
    `outputs`, flat tensors of the outputs it links) on every active tape and forward
    accumulator, whose backward is grad_fn (`bound`: see `gradients`); returns the recorded
    outputs."""
    with record.stop_recording():
        # new tensors (no copy): an output that is an input, or a tensor some tape already
        # knows, must not get a second producer on the tape
        recorded = [tf.identity(o) for o in outputs]
    # reading a variable records the read (handle -> value), which connects its gradient
    inputs = list(tape_inputs) + [tf.convert_to_tensor(v) for v in link.variable_values]

    def backward_fn(*cotangents):
        try:
            return gradients(link, cotangents, bound)
        except Exception as error:
            without_own_frames(error)  # the traceback ends at the user's tape.gradient
            raise

    record.record_operation(f"customgrad_{msg.fn_name(link.backward.f)}", recorded, inputs,
                            backward_fn)
    return recorded
