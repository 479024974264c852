"""A call wired into TensorFlow's autodiff: in eager mode the call is recorded on the tapes as one
operation whose backward is grad_fn; in graphs (tf.function, also with jit_compile=True) it is
built on tf.custom_gradient over the flat tensor leaves, and under a forward accumulator opened
in the graph also recorded on the tapes (`_call_graph`'s `forward_mode`). Every path runs f
through the one `_forward`, which holds every check of what f did.

Eager mode does not use tf.custom_gradient because its backward closure keeps the forward's
outputs alive until the tape is gone: one tensor per call more than plain autodiff holds, which
adds up over the layers of a network (a stack of 16 softplus calls peaked at 1.8x plain autodiff).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.eager import record  # no public API stops recording on every tape
from tensorflow.python.ops import gradients_util  # ... or tells whether a tape is nested
# TensorFlow's own, also while customgrad.patch_tensorflow() puts customgrad's in tf.custom_gradient
from tensorflow.python.ops.custom_gradient import custom_gradient as tf_custom_gradient

from ... import _messages as msg
from .composites import (component, has_composite, refuse_other_composite_args,
                         refuse_other_composite_outputs, with_component)
from .forward_mode import check_linear, has_tangents
from .grad_fn import custom_gradient_grad, graph_grad, record_on_tapes, stateless_values
from .hidden_inputs import GraphHidden, OpRecord, refuse_differentiated, through_hidden
from .tensors import unwatched
from .variables import grad_fn_variables, loss_error


def call(arguments: Any) -> Any:
    return _call(arguments, tf_variables=False)


def call_with_tf_variables(arguments: Any) -> Any:
    """`call` for a function decorated with `tf_variables=True`: grad_fn's `variables=` holds
    the tf.Variables f read (a keras.Variable's `.value`), as tf.custom_gradient passes them."""
    return _call(arguments, tf_variables=True)


def _call(arguments, tf_variables):
    tape_inputs = arguments.tensor_values
    composite_inputs = has_composite(tape_inputs)
    if composite_inputs:
        refuse_other_composite_args(arguments)
        tape_inputs = [component(v) for v in tape_inputs]
    if tf.executing_eagerly():
        return _call_eager(arguments, tape_inputs, tf_variables)
    forward_mode = has_tangents(tape_inputs)
    if forward_mode and composite_inputs:
        raise msg.tf_composite_forward_mode(arguments.f)
    return _call_graph(arguments, tape_inputs, composite_inputs, tf_variables, forward_mode)


def _forward(arguments, values, tape_inputs, tf_variables, refuse_losses, wanted):
    """Runs f on `values` through `arguments.forward`, with every check of what it did, for all
    paths: a tensor being differentiated that f used without receiving it (seen in TensorFlow's
    record of f's operations, `OpRecord`, whatever route led f to it), an output that is another
    composite tensor, a loss it added (`refuse_losses`: nothing would differentiate it).
    `tape_inputs`: the call's tensors as the tapes see them; `wanted`: whether the link gives the
    gradients of the variable values f read (the tapes' record) or not (tf.custom_gradient,
    which asks for them).
    Returns (f's output, its leaves, the link, `stateless_values`, the tensors not being
    differentiated now that f's outputs were computed from without f receiving them: in a graph,
    a tape outside the tf.function may differentiate them)."""
    f = arguments.f
    with OpRecord().running() as ops:
        output, out_leaves, backward = arguments.forward(values)
    reads = backward.reads
    sources = ops.sources(out_leaves, [*tape_inputs, *values, *reads.values])
    if sources:
        refuse_differentiated(f, sources)
    refuse_other_composite_outputs(f, output, out_leaves)
    if reads.losses_added and refuse_losses:
        raise loss_error(f)
    link = backward.link(tensor_positions(backward),
                         variables=grad_fn_variables(reads, tf_variables),
                         wanted=reads.values if wanted else ())
    return output, out_leaves, link, stateless_values(reads), sources


def _call_graph(arguments, tape_inputs, composite_inputs, tf_variables, forward_mode):
    """The call in a graph: tf.custom_gradient over the flat tensor leaves. f runs on the inputs
    themselves, as in tf.custom_gradient: `tf.gradients` can compute grad_fn under a tape that
    differentiates it again (second order), which copies no tape watches would cut off.

    `forward_mode` (a forward accumulator opened in the graph watches an input): the accumulator
    would see tf.custom_gradient's IdentityN, not grad_fn, and its JVP would be f's own
    derivative (NaN for log1pexp at 100) or zero; the outputs then go through one more identity,
    recorded (inputs -> outputs) with grad_fn as its backward, which the accumulator transposes
    into the JVP, as in eager mode. The graph still carries tf.custom_gradient's gradient, for a
    tape outside the tf.function. The same record links the values a stateless scope
    (`layer.stateless_call`) bound to the keras.Variables f read: tensors, not variables,
    which tf.custom_gradient would leave without a gradient.

    A tape outside the tf.function is invisible while f is traced: a tensor f reaches without
    receiving it positionally (by keyword, in its closure, through an object, a stateless
    scope's value) cannot be refused when that tape differentiates it, and tf.custom_gradient
    would cut its path. Those of this graph are extra inputs of the op (`GraphHidden`), which
    gives a scope's value grad_fn's gradient and the others autodiff's through f's own
    operations (`graph_grad`)."""
    values = arguments.tensor_values
    refuse_losses = (gradients_util.PossibleTapeGradientTypes(tape_inputs)
                     != gradients_util.POSSIBLE_GRADIENT_TYPES_NONE)
    link = out_leaves = bound = f_outputs = received = None  # this call's, once f ran
    sources = []
    hidden = GraphHidden(arguments, tape_inputs)
    extra = hidden.extra_inputs

    @tf_custom_gradient
    def forward(*tensors):
        nonlocal link, out_leaves, bound, f_outputs, sources, received
        flat = tensors = tensors[:len(tape_inputs)]  # f reads the extra inputs where they are
        received = [*tensors, *extra]
        if composite_inputs:
            tensors = [with_component(v, t) for v, t in zip(values, flat)]
        _, out_leaves, link, bound, sources = _forward(
            arguments, tensors, [*tape_inputs, *extra], tf_variables, refuse_losses,
            wanted=False)
        f_outputs = [tf.convert_to_tensor(component(out_leaves[j])) for j in link.outputs]
        if not (extra or hidden.keyword):
            return f_outputs, custom_gradient_grad(link, bound)
        return f_outputs, graph_grad(link, bound, flat, hidden, f_outputs)

    try:
        outputs = forward(*tape_inputs, *extra)
    except TypeError as error:
        # tf.custom_gradient refuses reference (TF1, non-resource) variables in f's graph with a
        # TypeError that names only its own decorator
        if "ResourceVariable" not in str(error):
            raise
        raise msg.tf_reference_variable(arguments.f) from error
    if sources:
        outputs = through_hidden(outputs, f_outputs, sources, received)
    if forward_mode:
        check_linear(link, out_leaves, concrete=False)
    if forward_mode or bound is not None:
        outputs = record_on_tapes(link.wanting(link.variable_values), outputs, tape_inputs,
                                  bound)
    specs = link.backward.output_specs
    return _rebuild(link, out_leaves, outputs, [specs[j] for j in link.outputs])


def tensor_positions(backward: Any) -> list[Any]:
    """The positions of f's output leaves that are tensors: the others (None) stay out of the
    autodiff, which takes tensors only, and get no gradient."""
    return backward.tensor_outputs


def _rebuild(link, leaves, outputs, like):
    """f's output with `outputs` (each a flat component, for the leaves the link linked, in
    order) in it; `like`: what each one was (a spec or a tensor), to rebuild ragged and sparse
    ones."""
    leaves = list(leaves)
    for j, o, t in zip(link.outputs, like, outputs):
        leaves[j] = with_component(o, t)
    return link.backward.rebuild(leaves)


def _call_eager(arguments, tape_inputs, tf_variables):
    """Runs f, then records one operation (inputs and read variables -> outputs) on every active
    tape; its backward calls grad_fn. Nothing but grad_fn's closure and the specs is kept."""
    f = arguments.f
    if not record.could_possibly_record():  # no tape: nothing to record, no variable to find
        output, out_leaves = arguments.output(arguments.tensor_values)
        refuse_other_composite_outputs(f, output, out_leaves)
        return output
    # When a single non-persistent tape watches the inputs (eager: no `tf.gradients` can
    # differentiate grad_fn), nothing will ever differentiate grad_fn, so the tape need not keep
    # f's intermediates (tf.custom_gradient records them all: 1.25x the memory of plain autodiff
    # for a recomputing swish): f then runs on `unwatched` copies of the inputs. Under nested or
    # persistent tapes f runs on the inputs themselves and its intermediates stay recorded, so
    # second derivatives through grad_fn's closure stay correct.
    first_order_only = (gradients_util.PossibleTapeGradientTypes(tape_inputs)
                        == gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER)
    values = arguments.tensor_values
    if first_order_only:
        values = [with_component(v, t) for v, t in zip(values, unwatched(tape_inputs))]
    output, out_leaves, link, bound, _ = _forward(arguments, values, tape_inputs, tf_variables,
                                               refuse_losses=first_order_only, wanted=True)
    if has_tangents(tape_inputs):
        check_linear(link, out_leaves, True)
    if not arguments.tensor_values and not link.variables:
        return output  # nothing to differentiate: f's ops stay recorded as they ran
    tensors = [out_leaves[j] for j in link.outputs]
    outputs = record_on_tapes(link, [component(o) for o in tensors], tape_inputs, bound)
    return _rebuild(link, out_leaves, outputs, tensors)
