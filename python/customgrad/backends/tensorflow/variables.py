"""What f touches besides its arguments: the variables it reads, which grad_fn receives in
`variables=`, and the losses it adds.

grad_fn receives the keras.Variables f read as they are, the objects a backend-agnostic grad_fn
compares with its layer's own (`variables == [self.kernel]`), where tf.custom_gradient passes the
tf.Variables they hold, the objects TensorFlow's APIs take (GradientTape.watch, `.ref()` compared
with `tape.watched_variables()`). No object is both, and nothing tells which kind of code a
grad_fn is: code written for tf.custom_gradient opts in (`custom_gradient(f,
tf_variables=True)`: `variables=` holds the tf.Variables); if it did not, and trips on a
keras.Variable, it gets a CustomGradientError that says so, caused by the original error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras
from tensorflow.python.eager import record  # no public API watches variable reads

from ... import _messages as msg
from ..._messages import CustomGradientError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager


def watching_reads() -> AbstractContextManager[Any] | None:
    """TensorFlow's variable watcher, which the core opens around f beside Keras's recorder: it
    sees the trainable tf.Variables f reads (a tf.Module's, or any other), as tf.custom_gradient
    finds them. grad_fn gets the keras.Variables first, in the order of their first read, then
    the tf.Variables no keras.Variable holds; a tf.Variable's raw value is itself.

    >>> import keras, tensorflow as tf
    >>> from customgrad import _call
    >>> from customgrad.backends import tensorflow as backend
    >>> v, k = tf.Variable(2.0), keras.Variable(1.0)
    >>> _, reads = _call.run_reading(backend, lambda: v * 3.0 + k, ())
    >>> reads.variables == [k, v], reads.values == [k.value, v]
    (True, True)
    """
    return record.VariableWatcher()


def grad_fn_variables(reads: Any, tf_variables: bool) -> list[Any]:
    """What grad_fn receives in `variables=`: the variables f read as they are, or, with
    `tf_variables`, their raw values (the tf.Variables tf.custom_gradient passes)."""
    return reads.values if tf_variables else reads.variables


def keras_variables_error(f: Any, variables: Any, error: Any) -> CustomGradientError | None:
    """The CustomGradientError for a grad_fn of `f` that raised `error` on the keras.Variables
    in `variables` where it expected tf.Variables (code written for tf.custom_gradient); None
    when `error` is not that."""
    names = [v.path for v in variables if isinstance(v, keras.Variable)]
    # Python's and TensorFlow's words for a keras.Variable where a tf.Variable was expected
    if names and "'Variable'" in str(error) and not isinstance(error, CustomGradientError):
        return msg.tf_keras_variables_in_grad_fn(f, error, names)
    return None


def loss_error(f: Any) -> Any:
    # f ran on unwatched copies of the inputs (or inside tf.custom_gradient's graph function): a
    # loss it added has no path to the inputs, so its gradient would be silently zero
    return msg.loss_in_forward(
        f, "on tensorflow the ops of f are not recorded for the gradient tape that watches "
        "it, so that loss would get no gradient")
