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

import keras

from ... import _messages as msg
from ..._messages import CustomGradientError


def variables_read(rec, watcher, arguments, tf_variables=False) -> tuple[list, list]:
    """The variables f read, without duplicates, and their raw values: the trainable
    floating-point keras.Variables Keras recorded (`rec`), in the order of their first read, then
    the trainable floating-point tf.Variables (a tf.Module's, or any other) TensorFlow's variable
    watcher saw, as tf.custom_gradient finds them. A tf.Variable's raw value is itself, and a
    tf.Variable passed to f as an argument is no hidden read. grad_fn gets the variables as they
    are: a keras.Variable, not the tf.Variable it holds, unless `tf_variables`: then the
    variables are the raw values, the tf.Variables tf.custom_gradient passes.

    >>> import keras, tensorflow as tf
    >>> from tensorflow.python.eager import record
    >>> from customgrad._variables import recording
    >>> v, k = tf.Variable(2.0), keras.Variable(1.0)
    >>> with record.VariableWatcher() as watcher, recording() as rec:
    ...     _ = v * 3.0 + k
    >>> variables_read(rec, watcher, ())[0] == [k, v]
    True
    >>> variables_read(rec, watcher, (), tf_variables=True)[0] == [k.value, v]
    True
    """
    watched = watcher.watched_variables()
    if not watched:
        return rec.raw_values if tf_variables else rec.variables, rec.raw_values
    variables, values = list(rec.variables), list(rec.raw_values)
    # a keras.Variable's raw value is the tf.Variable TensorFlow watched
    known = {id(v) for v in values}
    known.update(id(leaf) for leaf in arguments)
    for v in watched:  # TensorFlow watches trainable variables only
        if id(v) not in known and (v.dtype.is_floating or v.dtype.is_complex):
            known.add(id(v))
            variables.append(v)
            values.append(v)
    return values if tf_variables else variables, values


def keras_variables_error(f, variables, error) -> CustomGradientError | None:
    """The CustomGradientError for a grad_fn of `f` that raised `error` on the keras.Variables
    in `variables` where it expected tf.Variables (code written for tf.custom_gradient); None
    when `error` is not that."""
    names = [v.path for v in variables if isinstance(v, keras.Variable)]
    # Python's and TensorFlow's words for a keras.Variable where a tf.Variable was expected
    if names and "'Variable'" in str(error) and not isinstance(error, CustomGradientError):
        return msg.tf_keras_variables_in_grad_fn(f, error, names)
    return None


def loss_error(f):
    # f ran on unwatched copies of the inputs (or inside tf.custom_gradient's graph function): a
    # loss it added has no path to the inputs, so its gradient would be silently zero
    return msg.loss_in_forward(
        f, "on tensorflow the ops of f are not recorded for the gradient tape that watches "
        "it, so that loss would get no gradient")
