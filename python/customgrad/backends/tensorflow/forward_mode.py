"""Forward mode (tf.autodiff.ForwardAccumulator) derived from grad_fn.

The call is recorded on the tapes as one operation whose backward is grad_fn (see `link.py`: in
eager mode always, in a graph where an accumulator opened there watches an input), which an
accumulator transposes into the JVP; this module holds whether an accumulator watches and the
check that grad_fn is linear in its upstream.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python import pywrap_tfe  # ... or tells whether a forward accumulator watches
from tensorflow.python.eager import record  # no public API stops recording on every tape

from ... import _forward
from .tensors import is_float


def has_tangents(tensors: Any) -> bool:
    """Whether a tf.autodiff.ForwardAccumulator watches one of `tensors`."""
    return bool(pywrap_tfe.TFE_Py_PackJVPs(list(tensors))[1])


def check_linear(link: Any, out_leaves: Any, concrete: Any) -> None:
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
