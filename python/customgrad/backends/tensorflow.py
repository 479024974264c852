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

from .. import _forward
from .._convention import fn_name, loss_in_forward_error
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


def being_differentiated(x, closed_over=False) -> bool:
    """Whether a gradient tape watches tensor `x` (variables are found by the tape's variable
    watching, not here)."""
    return isinstance(x, tf.Tensor) and pywrap_tfe.TFE_Py_TapeSetShouldRecordBackprop([x])


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


def call(inv):
    if not inv.tensor_values:
        inv.run_forward([])
        return inv.output

    # When a single non-persistent tape watches the inputs, nothing will ever differentiate
    # grad_fn, so the tape need not keep f's intermediates (tf.custom_gradient records them all:
    # 1.25x the memory of plain autodiff for a recomputing swish). Under nested or persistent
    # tapes they stay recorded, so second derivatives through grad_fn's closure stay correct.
    gradient_types = gradients_util.PossibleTapeGradientTypes(inv.tensor_values)
    first_order_only = gradient_types == gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER
    if tf.executing_eagerly():
        return _call_eager(inv, first_order_only)
    if _has_tangents(inv.tensor_values):
        return _call_graph_forward_mode(inv)

    @tf.custom_gradient
    def forward(*tensors):
        quiet = record.stop_recording() if first_order_only else contextlib.nullcontext()
        with recording() as rec, quiet:
            out_leaves, grad_fn = inv.run_forward(tensors)
        if rec.losses_added and gradient_types != gradients_util.POSSIBLE_GRADIENT_TYPES_NONE:
            raise _loss_error(inv)
        out_leaves = [tf.convert_to_tensor(o) for o in out_leaves]
        inv.release()
        variables, var_values = rec.variables, rec.raw_values

        def backward(cotangents):
            return inv.run_backward(grad_fn, cotangents, variables, var_values)

        if not variables:
            return out_leaves, lambda *cts: backward(cts)[0]

        def grad_with_variables(*cts, variables=None):
            input_grads, var_grads = backward(cts)
            by_id = {id(v): g for v, g in zip(var_values, var_grads)}
            return input_grads, [by_id.get(id(v)) for v in variables or ()]

        return out_leaves, grad_with_variables

    return inv.rebuild_output(forward(*inv.tensor_values))


def _call_eager(inv, first_order_only):
    """Runs f, then records one operation (inputs and read variables -> outputs) on every active
    tape; its backward calls grad_fn. Nothing but grad_fn's closure and the specs is kept."""
    quiet = record.stop_recording() if first_order_only else contextlib.nullcontext()
    with recording() as rec, quiet:
        out_leaves, grad_fn = inv.run_forward(inv.tensor_values)
    if not record.could_possibly_record():  # no tape: nothing to record
        return inv.output
    if _has_tangents(inv.tensor_values):
        _check_linear(inv, grad_fn, out_leaves, concrete=True)
    if rec.losses_added and first_order_only:
        raise _loss_error(inv)
    variables, var_values = rec.variables, rec.raw_values
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


def _has_tangents(tensors) -> bool:
    """Whether a tf.autodiff.ForwardAccumulator watches one of `tensors`."""
    return bool(pywrap_tfe.TFE_Py_PackJVPs(list(tensors))[1])


def _check_linear(inv, grad_fn, out_leaves, concrete):
    """Forward mode is derived from grad_fn: refuses a grad_fn that is not linear in upstream
    (marked, or, on concrete values, failing the probe)."""
    float_outputs = [o for o in out_leaves if tf.is_tensor(o) and is_float(o)]
    rule = None
    if concrete and len(float_outputs) == len(out_leaves) and all(
            o.dtype.is_floating and o.shape.is_fully_defined() for o in float_outputs):
        def rule(us):
            with record.stop_recording():
                grads = inv.run_backward(grad_fn, [tf.constant(u, o.dtype)
                                                   for u, o in zip(us, float_outputs)])[0]
            return [None if g is None else g.numpy() for g in grads]
    _forward.check_linear(inv.f, grad_fn, rule, [tuple(o.shape) for o in float_outputs])


def _call_graph_forward_mode(inv):
    """A call inside a tf.function under a tf.autodiff.ForwardAccumulator opened there.

    The accumulator would see tf.custom_gradient's IdentityN, not grad_fn: its JVP would be f's
    own derivative (NaN for log1pexp at 100) or zero. The outputs of tf.custom_gradient go
    through one more identity, which is recorded (inputs -> outputs) with grad_fn as its
    backward: the accumulator transposes it into the JVP, as it does in eager mode, and a tape
    inside the function uses grad_fn. The graph itself still carries tf.custom_gradient's
    gradient, for a tape outside the tf.function.
    """
    captured = {}

    @tf.custom_gradient
    def forward(*tensors):
        with recording() as rec:
            out_leaves, grad_fn = inv.run_forward(tensors)
        if rec.losses_added:
            raise _loss_error(inv)
        out_leaves = [tf.convert_to_tensor(o) for o in out_leaves]
        captured.update(grad_fn=grad_fn, rec=rec, out_leaves=out_leaves)
        variables, var_values = rec.variables, rec.raw_values

        def grad_with_variables(*cts, variables=None):
            input_grads, var_grads = inv.run_backward(grad_fn, cts, rec.variables, var_values)
            by_id = {id(v): g for v, g in zip(var_values, var_grads)}
            return input_grads, [by_id.get(id(v)) for v in variables or ()]

        if not variables:
            return out_leaves, lambda *cts: inv.run_backward(grad_fn, cts)[0]
        return out_leaves, grad_with_variables

    results = forward(*inv.tensor_values)
    grad_fn, rec = captured["grad_fn"], captured["rec"]
    _check_linear(inv, grad_fn, captured["out_leaves"], concrete=False)
    variables, var_values = rec.variables, rec.raw_values
    with record.stop_recording():
        outputs = [tf.identity(o) for o in results]
    inputs = list(inv.tensor_values) + [tf.convert_to_tensor(v) for v in var_values]

    def backward(*cotangents):
        input_grads, var_grads = inv.run_backward(grad_fn, cotangents, variables, var_values)
        return input_grads + (var_grads or [None] * len(variables))

    record.record_operation(f"customgrad_{fn_name(inv.f)}", outputs, inputs, backward)
    result = inv.rebuild_output(outputs)
    inv.release()
    return result


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
