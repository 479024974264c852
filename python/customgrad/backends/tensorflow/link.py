"""A call wired into TensorFlow's autodiff: in eager mode the call is recorded on the tapes as one
operation whose backward is grad_fn; in graphs (tf.function, also with jit_compile=True) it is
built on tf.custom_gradient over the flat tensor leaves.

Eager mode does not use tf.custom_gradient because its backward closure keeps the forward's
outputs alive until the tape is gone: one tensor per call more than plain autodiff holds, which
adds up over the layers of a network (a stack of 16 softplus calls peaked at 1.8x plain autodiff).
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.eager import record  # no public API stops recording on every tape
from tensorflow.python.ops import gradients_util  # ... or tells whether a tape is nested

from ... import _messages as msg
from .composites import (component, has_composite, refuse_other_composite_args,
                         refuse_other_composite_outputs, with_component)
from .forward_mode import call_graph_forward_mode, check_linear, has_tangents
from .grad_fn import custom_gradient_grad, record_on_tapes
from .hidden_inputs import probe, refuse_used, watched_reachable
from .tensors import being_differentiated, unwatched
from .variables import grad_fn_variables, loss_error


def call(arguments):
    return _call(arguments, tf_variables=False)


def call_with_tf_variables(arguments):
    """`call` for a function decorated with `tf_variables=True`: grad_fn's `variables=` holds
    the tf.Variables f read (a keras.Variable's `.value`), as tf.custom_gradient passes them."""
    return _call(arguments, tf_variables=True)


def _call(arguments, tf_variables):
    tape_inputs = arguments.tensor_values
    composite_inputs = has_composite(tape_inputs)
    if composite_inputs:
        refuse_other_composite_args(arguments)
        tape_inputs = [component(v) for v in tape_inputs]
    # When a single non-persistent tape watches the inputs, nothing will ever differentiate
    # grad_fn, so the tape need not keep f's intermediates (tf.custom_gradient records them all:
    # 1.25x the memory of plain autodiff for a recomputing swish): f then runs on `_unwatched`
    # copies of the inputs. Under nested or persistent tapes f runs on the inputs themselves and
    # its intermediates stay recorded, so second derivatives through grad_fn's closure stay
    # correct.
    gradient_types = gradients_util.PossibleTapeGradientTypes(tape_inputs)
    first_order_only = gradient_types == gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER
    if tf.executing_eagerly():
        return _call_eager(arguments, tape_inputs, first_order_only, tf_variables)
    if has_tangents(tape_inputs):
        if composite_inputs:
            raise msg.tf_composite_forward_mode(arguments.f)
        return call_graph_forward_mode(arguments, tf_variables)
    values = arguments.tensor_values
    link = out_leaves = None  # this call's, once f ran inside tf.custom_gradient

    @tf.custom_gradient
    def forward(*tensors):
        nonlocal link, out_leaves
        if first_order_only:
            tensors = unwatched(tensors)
        if composite_inputs:
            tensors = [with_component(v, t) for v, t in zip(values, tensors)]
        hidden = watched_reachable(arguments.f, tape_inputs)
        with probe(hidden) as tape:
            output, out_leaves, backward = arguments.forward(tensors)
        refuse_used(arguments.f, tape, hidden, out_leaves)
        refuse_other_composite_outputs(arguments.f, output, out_leaves)
        if (backward.reads.losses_added
                and gradient_types != gradients_util.POSSIBLE_GRADIENT_TYPES_NONE):
            raise loss_error(arguments.f)
        link = backward.link(tensor_positions(backward),
                             variables=grad_fn_variables(backward.reads, tf_variables))
        outputs = [tf.convert_to_tensor(component(out_leaves[j])) for j in link.outputs]
        return outputs, custom_gradient_grad(link)

    try:
        outputs = forward(*tape_inputs)
    except TypeError as error:
        # tf.custom_gradient refuses reference (TF1, non-resource) variables in f's graph with a
        # TypeError that names only its own decorator
        if "ResourceVariable" not in str(error):
            raise
        raise msg.tf_reference_variable(arguments.f) from error
    specs = link.backward.output_specs
    return _rebuild(link, out_leaves, outputs, [specs[j] for j in link.outputs])


def tensor_positions(backward) -> list:
    """The positions of f's output leaves that are tensors: the others (None) stay out of the
    autodiff, which takes tensors only, and get no gradient."""
    return [j for j, s in enumerate(backward.output_specs) if s is not None]


def _rebuild(link, leaves, outputs, like):
    """f's output with `outputs` (each a flat component, for the leaves the link linked, in
    order) in it; `like`: what each one was (a spec or a tensor), to rebuild ragged and sparse
    ones."""
    leaves = list(leaves)
    for j, o, t in zip(link.outputs, like, outputs):
        leaves[j] = with_component(o, t)
    return link.backward.rebuild(leaves)


def _recorded(leaves) -> bool:
    return any(isinstance(t, tf.Tensor) and being_differentiated(t) for t in leaves)


def _call_eager(arguments, tape_inputs, first_order_only, tf_variables):
    """Runs f, then records one operation (inputs and read variables -> outputs) on every active
    tape; its backward calls grad_fn. Nothing but grad_fn's closure and the specs is kept."""
    f = arguments.f
    if not record.could_possibly_record():  # no tape: nothing to record, no variable to find
        output, out_leaves = arguments.output(arguments.tensor_values)
        refuse_other_composite_outputs(f, output, out_leaves)
        return output
    values = arguments.tensor_values
    if first_order_only:
        values = [with_component(v, t) for v, t in zip(values, unwatched(tape_inputs))]
    hidden = watched_reachable(f, tape_inputs)
    with probe(hidden) as tape:
        output, out_leaves, backward = arguments.forward(values)
    refuse_used(f, tape, hidden, out_leaves)
    refuse_other_composite_outputs(f, output, out_leaves)
    reads = backward.reads
    if reads.losses_added and first_order_only:
        raise loss_error(f)
    if not reads.variables and _recorded(out_leaves) and (first_order_only
                                                          or not _recorded(tape_inputs)):
        # f ran on unwatched inputs (copies, or inputs no tape watches) and read no variable,
        # yet a tape records its outputs: f used a tensor being differentiated that it did not
        # receive (one computed from a variable before f ran, read through an object), whose
        # gradient would be dropped without a word
        raise msg.hidden_input(f)
    link = backward.link(tensor_positions(backward),
                         variables=grad_fn_variables(reads, tf_variables), wanted=reads.values)
    if has_tangents(tape_inputs):
        check_linear(link, out_leaves, True)
    if not arguments.tensor_values and not reads.variables:
        return output  # nothing to differentiate: f's ops stay recorded as they ran
    tensors = [out_leaves[j] for j in link.outputs]
    outputs = record_on_tapes(link, [component(o) for o in tensors], tape_inputs)
    return _rebuild(link, out_leaves, outputs, tensors)
