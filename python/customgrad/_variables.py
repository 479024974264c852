"""Which Keras variables a forward function reads (and whether it adds layer losses).

tf.custom_gradient finds the variables a function reads through TensorFlow's tape; JAX and PyTorch
have no such hook, and Keras's own custom_gradient silently drops their gradients there. Every read
of a `keras.Variable` (`layer.kernel` used in an op, `variable.value`) goes through
`Variable._maybe_autocast`, on every backend, so one small wrapper around that method records the
reads. A second one around `Layer.add_loss` counts the losses added, which a backend may not be
able to differentiate.
"""

from __future__ import annotations

import threading

_local = threading.local()
_installed = False
_install_lock = threading.Lock()


def _is_floating(dtype) -> bool:
    return "float" in str(dtype)


def install() -> None:
    """Wraps Variable._maybe_autocast once per process (idempotent)."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        from keras.src.backend.common.variables import Variable
        from keras.src.layers.layer import Layer

        original = Variable._maybe_autocast

        def _maybe_autocast(self, value):
            recorder = getattr(_local, "recorder", None)
            if recorder is not None:
                recorder.read(self, value)
            return original(self, value)

        original_add_loss = Layer.add_loss

        def add_loss(self, loss):
            recorder = getattr(_local, "recorder", None)
            while recorder is not None:
                recorder.losses_added += 1
                recorder = recorder.parent
            return original_add_loss(self, loss)

        Variable._maybe_autocast = _maybe_autocast
        Layer.add_loss = add_loss
        _installed = True


class recording:
    """Records the trainable floating-point variables f reads while `recording.call` runs it, and
    the value each read returned. Recordings nest: a read inside an inner custom-gradient call is
    also a read of the outer one. (A class with slots: it runs on every custom-gradient call.)

    >>> import keras
    >>> v = keras.Variable(1.0)
    >>> _, rec = recording.call(keras.ops.add, (v, 1.0))
    >>> rec.variables == [v]
    True
    """

    __slots__ = ("parent", "variables", "raw_values", "_seen", "losses_added")

    @classmethod
    def call(cls, f, args, kwargs=None) -> tuple:
        """(f(*args, **kwargs), the recording of its reads while f ran): one call, not a
        `with` block, which would enter two more functions on every custom-gradient call."""
        if not _installed:
            install()
        rec = cls.__new__(cls)  # as cls(), which dynamo traces through a longer polyfill
        rec.parent = getattr(_local, "recorder", None)
        rec.variables, rec.raw_values, rec._seen, rec.losses_added = (), (), None, 0
        _local.recorder = rec
        try:
            return (f(*args, **kwargs) if kwargs else f(*args)), rec
        finally:
            _local.recorder = rec.parent

    def read(self, variable, value):
        if self.parent is not None:
            self.parent.read(variable, value)
        if self._seen is None:
            self._seen, self.variables, self.raw_values = set(), [], []
        key = id(variable)
        if key not in self._seen and variable.trainable and _is_floating(variable.dtype):
            self._seen.add(key)
            self.variables.append(variable)
            self.raw_values.append(value)


def variable_name(variable) -> str:
    """How messages name a variable f read: a keras.Variable by its path, a tf.Variable by its
    name, a torch tensor (which has no name) by its shape.

    >>> import keras
    >>> variable_name(keras.Variable(1.0, name="scale"))
    'scale'
    """
    name = getattr(variable, "path", None) or getattr(variable, "name", None)
    if isinstance(name, str) and name:
        return name
    return f"a tensor of shape {tuple(variable.shape)}"

