"""Dense TensorFlow values as customgrad sees them: which leaves are tensors, their values and
specs, and the conversions of what grad_fn returns. Ragged and sparse tensors are in
`composites.py`, which builds on this module.

>>> import tensorflow as tf
>>> dense_spec(tf.ones((2, 3)))
TensorSpec(shape=(2, 3), dtype=<dtype: 'float32'>)
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from tensorflow.python import pywrap_tfe  # ... or tells whether a forward accumulator watches
from tensorflow.python.eager import record  # no public API stops recording on every tape
from tensorflow.python.framework.composite_tensor import CompositeTensor

from ..._spec import TensorSpec


def tensor_value(leaf: Any) -> Any:
    if isinstance(leaf, tf.Tensor):  # eager and symbolic tensors: checked first, it is cheap
        return leaf
    if isinstance(leaf, keras.Variable):
        return tf.convert_to_tensor(leaf.value)
    if isinstance(leaf, tf.Variable):
        return tf.convert_to_tensor(leaf)
    if tf.is_tensor(leaf):
        return leaf
    return None


def is_tensor(x: Any) -> bool:
    # tf.Tensor first: tf.is_tensor alone is slow (an isinstance check against a Protocol)
    if isinstance(x, tf.Tensor):
        return True
    if isinstance(x, CompositeTensor):
        # other composites (tf.IndexedSlices, extension types) are refused by name in `call`
        return isinstance(x, (tf.RaggedTensor, tf.SparseTensor))
    return tf.is_tensor(x)


def is_float(x: Any) -> bool:
    return x.dtype.is_floating or x.dtype.is_complex


def being_differentiated(x: Any, closed_over: bool = False) -> bool:
    """Whether a gradient tape or a forward accumulator watches tensor `x` (variables are found
    by the tape's variable watching, not here). Accumulators count: a tangent that reaches f other
    than through a positional argument would be dropped as a tape's gradient would."""
    # one C call that asks the tapes and the accumulators (0: none watches x)
    return isinstance(x, tf.Tensor) and pywrap_tfe.TFE_Py_TapeSetPossibleGradientTypes([x]) != 0


def dense_spec(x: Any) -> TensorSpec:
    """The spec of a dense tensor."""
    shape, dtype = x.shape, x.dtype
    dims = tuple(shape.as_list()) if shape.rank is not None else ()
    # under tf.function shapes may be partly unknown: keep the (small) runtime shape then
    runtime = None if shape.is_fully_defined() else tf.shape(x)
    return TensorSpec(dims, dtype, None, dtype.is_floating or dtype.is_complex, runtime)


def dims(shape: Any) -> tuple[Any, ...]:
    """A TensorShape as a tuple (None: an unknown dimension; () for an unknown rank)."""
    return tuple(shape.as_list()) if shape.rank is not None else ()


def convert(grad: Any, like: Any) -> Any:
    if isinstance(grad, keras.Variable):
        grad = grad.value
    if tf.is_tensor(grad):
        return grad
    return tf.convert_to_tensor(grad, dtype=like.dtype)


def static_shape(x: Any) -> tuple[int | None, ...]:
    if isinstance(x, TensorSpec):
        return x.shape
    shape = x.shape
    return tuple(shape.as_list()) if shape.rank is not None else ()


def cast_like(grad: Any, like: Any) -> Any:
    if grad.dtype != like.dtype:
        grad = tf.cast(grad, like.dtype)
    return grad


def ones_like(x: Any) -> Any:
    return tf.ones_like(x)


def unwatched(tensors: Any) -> list[Any]:
    """The tensors (flat components), as new tensors of the same buffers (nothing is copied)
    that no tape or accumulator watches.

    f runs on them where nothing will differentiate its intermediates: the tapes that watch the
    call's inputs do not record f's operations on them, while a tape f opens itself and watches
    them with records them as it does under tf.custom_gradient. (Stopping all recording while f
    runs would silence that tape too: TensorFlow stops every tape on the thread at once, and has
    no API that lists the tapes to stop only those.) Variables f reads are still seen by the
    tapes that watch accessed variables, as under tf.custom_gradient; what they record of f is
    dropped when f's tensors go, and never reaches the gradient, which comes from grad_fn.
    """
    if tf.executing_eagerly():
        # a new handle on the same device shares the buffer; unlike tf.identity (an op, six
        # times the cost) it is recorded nowhere
        return [t._copy_nograd(device_name=t.device) for t in tensors]
    with record.stop_recording():
        return [tf.identity(t) for t in tensors]
