"""TensorFlow: in eager mode the call is recorded on the tapes as one operation whose backward is
grad_fn; in graphs (tf.function, also with jit_compile=True) it is built on tf.custom_gradient over
the flat tensor leaves. customgrad adds the calling convention, the structures and the checks.

Eager mode does not use tf.custom_gradient because its backward closure keeps the forward's
outputs alive until the tape is gone: one tensor per call more than plain autodiff holds, which
adds up over the layers of a network (a stack of 16 softplus calls peaked at 1.8x plain autodiff).
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf
from tensorflow.python import pywrap_tfe  # ... or tells whether a forward accumulator watches
from tensorflow.python.eager import record  # no public API stops recording on every tape
from tensorflow.python.ops import gradients_util  # ... or tells whether a tape is nested

from .._convention import fn_name, forward_mode_error, loss_in_forward_error
from .._core import OutputSpec
from .._variables import recording


call_tensors = None  # no separate path for calls on plain tensors


def tensor_value(leaf):
    if isinstance(leaf, tf.Tensor):  # eager and symbolic tensors: checked first, it is cheap
        return leaf
    if isinstance(leaf, keras.Variable):
        return tf.convert_to_tensor(leaf.value)
    if isinstance(leaf, tf.Variable):
        return tf.convert_to_tensor(leaf)
    if tf.is_tensor(leaf):
        return leaf
    return None


def is_tensor(x) -> bool:
    # tf.Tensor first: tf.is_tensor alone is slow (an isinstance check against a Protocol)
    return isinstance(x, tf.Tensor) or tf.is_tensor(x)


def is_float(x) -> bool:
    return x.dtype.is_floating or x.dtype.is_complex


def spec(x):
    shape, dtype = x.shape, x.dtype
    dims = tuple(shape.as_list()) if shape.rank is not None else ()
    # under tf.function shapes may be partly unknown: keep the (small) runtime shape then
    runtime = None if shape.is_fully_defined() else tf.shape(x)
    return OutputSpec(dims, dtype, None, dtype.is_floating or dtype.is_complex, runtime)


def zeros(spec):
    shape = spec.shape if spec.runtime_shape is None else spec.runtime_shape
    return tf.zeros(shape, dtype=spec.dtype)


def convert(grad, like):
    if isinstance(grad, keras.Variable):
        grad = grad.value
    if tf.is_tensor(grad):
        return grad
    return tf.convert_to_tensor(grad, dtype=like.dtype)


def static_shape(x) -> tuple:
    if isinstance(x, OutputSpec):
        return x.shape
    shape = x.shape
    return tuple(shape.as_list()) if shape.rank is not None else ()


def cast_like(grad, like):
    if grad.dtype != like.dtype:
        grad = tf.cast(grad, like.dtype)
    return grad


def _variables_read(rec, watcher, arguments) -> tuple[list, list]:
    """The variables f read, without duplicates, and their raw values: the trainable
    floating-point keras.Variables Keras recorded (`rec`), in the order of their first read, then
    the trainable floating-point tf.Variables (a tf.Module's, or any other) TensorFlow's variable
    watcher saw, as tf.custom_gradient finds them. A tf.Variable's raw value is itself, and a
    tf.Variable passed to f as an argument is no hidden read.

    >>> import tensorflow as tf
    >>> v = tf.Variable(2.0)
    >>> with record.VariableWatcher() as watcher, recording() as rec:
    ...     _ = v * 3.0
    >>> _variables_read(rec, watcher, ())[0] == [v]
    True
    """
    watched = watcher.watched_variables()
    if not watched:
        return rec.variables, rec.raw_values
    variables, values = list(rec.variables), list(rec.raw_values)
    # a keras.Variable's raw value is the tf.Variable TensorFlow watched
    known = {id(v) for v in values}
    known.update(id(leaf) for leaf in arguments)
    for v in watched:  # TensorFlow watches trainable variables only
        if id(v) not in known and (v.dtype.is_floating or v.dtype.is_complex):
            known.add(id(v))
            variables.append(v)
            values.append(v)
    return variables, values


def call(inv):
    # When a single non-persistent tape watches the inputs, nothing will ever differentiate
    # grad_fn, so the tape need not keep f's intermediates (tf.custom_gradient records them all:
    # 1.25x the memory of plain autodiff for a recomputing swish). Under nested or persistent
    # tapes they stay recorded, so second derivatives through grad_fn's closure stay correct.
    gradient_types = gradients_util.PossibleTapeGradientTypes(inv.tensor_values)
    first_order_only = gradient_types == gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER
    if tf.executing_eagerly():
        return _call_eager(inv, first_order_only)
    _refuse_inner_accumulator(inv)

    @tf.custom_gradient
    def forward(*tensors):
        quiet = record.stop_recording() if first_order_only else contextlib.nullcontext()
        with record.VariableWatcher() as watcher, recording() as rec, quiet:
            out_leaves, grad_fn = inv.run_forward(tensors)
        if rec.losses_added and gradient_types != gradients_util.POSSIBLE_GRADIENT_TYPES_NONE:
            raise _loss_error(inv)
        out_leaves = [tf.convert_to_tensor(o) for o in out_leaves]
        variables, var_values = _variables_read(rec, watcher, inv.leaves)
        inv.release()

        def backward(cotangents):
            return inv.run_backward(grad_fn, cotangents, variables, var_values)

        def grad(*cts, variables=None):
            # TensorFlow passes `variables` when its own watcher saw any, integer ones included;
            # those are not among what f read for grad_fn, and get no gradient
            input_grads, var_grads = backward(cts)
            if variables is None:
                return input_grads
            by_id = {id(v): g for v, g in zip(var_values, var_grads)}
            return input_grads, [by_id.get(id(v)) for v in variables]

        return out_leaves, grad

    return inv.rebuild_output(forward(*inv.tensor_values))


def _call_eager(inv, first_order_only):
    """Runs f, then records one operation (inputs and read variables -> outputs) on every active
    tape; its backward calls grad_fn. Nothing but grad_fn's closure and the specs is kept."""
    if not record.could_possibly_record():  # no tape: nothing to record, no variable to find
        inv.run_forward(inv.tensor_values)
        return inv.output
    quiet = record.stop_recording() if first_order_only else contextlib.nullcontext()
    with record.VariableWatcher() as watcher, recording() as rec, quiet:
        out_leaves, grad_fn = inv.run_forward(inv.tensor_values)
    if rec.losses_added and first_order_only:
        raise _loss_error(inv)
    variables, var_values = _variables_read(rec, watcher, inv.leaves)
    if not inv.tensor_values and not variables:
        return inv.output  # nothing to differentiate: f's ops stay recorded as they ran
    with record.stop_recording():
        # new tensors (no copy): an output that is an input, or a tensor some tape already
        # knows, must not get a second producer on the tape
        outputs = [tf.identity(o) for o in out_leaves]
    del out_leaves
    # reading a variable records the read (handle -> value), which connects its gradient
    inputs = list(inv.tensor_values) + [tf.convert_to_tensor(v) for v in var_values]

    def backward(*cotangents):
        input_grads, var_grads = inv.run_backward(grad_fn, cotangents, variables, var_values)
        return input_grads + (var_grads or [None] * len(variables))

    record.record_operation(f"customgrad_{fn_name(inv.f)}", outputs, inputs, backward)
    result = inv.rebuild_output(outputs)
    inv.release()
    return result


def _refuse_inner_accumulator(inv):
    """A tf.autodiff.ForwardAccumulator opened inside a tf.function sees tf.custom_gradient's
    IdentityN, not grad_fn: its JVP is f's own derivative (or zero, when f ran unrecorded).
    In eager mode the recorded operation's backward is transposed, and an accumulator around a
    tf.function call transposes the function's gradient: both use grad_fn."""
    _, tangents = pywrap_tfe.TFE_Py_PackJVPs(list(inv.tensor_values))
    if tangents:
        raise forward_mode_error(
            inv.f, "a tf.autodiff.ForwardAccumulator opened inside a tf.function",
            "Open the accumulator in eager mode (around the tf.function call, or with no "
            "tf.function), where its JVP is computed from grad_fn, or use a GradientTape.")


def _loss_error(inv):
    # f ran unrecorded (or inside tf.custom_gradient's graph function): a loss it added has no
    # path to the inputs, so its gradient would be silently zero
    return loss_in_forward_error(
        inv.f, "on tensorflow the ops of f are not recorded for the gradient tape that watches "
        "it, so that loss would get no gradient")


def ones_like(x):
    return tf.ones_like(x)


def vjp_flat(fn, values, reusable=True):
    """Runs fn(*values) -> output leaves under a tape; returns (outputs, back(cotangents)).

    The tape is persistent only when back may run more than once: under a persistent (or nested)
    tape TensorFlow drops custom gradients, tf.custom_gradient's too, of calls inside
    tf.cond/tf.while_loop branches of a tf.function and inside a tf.function called under it.
    """
    with tf.GradientTape(persistent=reusable) as tape:
        for v in values:
            tape.watch(v)
        outputs = fn(*values)

    def backward(cotangents):
        pairs = [
            (o, tf.zeros_like(o) if ct is None else tf.cast(ct, o.dtype))
            for o, ct in zip(outputs, cotangents)
            if tf.is_tensor(o) and is_float(o)
        ]
        if not pairs:
            return [tf.zeros_like(v) for v in values]
        return tape.gradient(
            [o for o, _ in pairs], list(values), output_gradients=[c for _, c in pairs],
            unconnected_gradients=tf.UnconnectedGradients.ZERO,
        )

    return outputs, backward


def float64_scope():
    return contextlib.nullcontext()
