"""Which Keras variables a forward function reads.

tf.custom_gradient finds the variables a function reads through TensorFlow's tape; JAX and PyTorch
have no such hook, and Keras's own custom_gradient silently drops their gradients there. Every read
of a `keras.Variable` (`layer.kernel` used in an op, `variable.value`) goes through
`Variable._maybe_autocast`, on every backend, so one small wrapper around that method records the
reads.
"""

from __future__ import annotations

import threading

_local = threading.local()
_installed = False
_install_lock = threading.Lock()


class Recorder:
    """Records the trainable floating-point variables read while it is active, and the value
    each read returned. Recorders nest: a read inside an inner custom-gradient call is also a
    read of the outer one.
    """

    __slots__ = ("parent", "variables", "raw_values", "_seen")

    def __init__(self, parent: "Recorder | None"):
        self.parent = parent
        self.variables: list = []
        self.raw_values: list = []
        self._seen: set[int] = set()

    def read(self, variable, value):
        if self.parent is not None:
            self.parent.read(variable, value)
        key = id(variable)
        if key not in self._seen and variable.trainable and _is_floating(variable.dtype):
            self._seen.add(key)
            self.variables.append(variable)
            self.raw_values.append(value)


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

        original = Variable._maybe_autocast

        def _maybe_autocast(self, value):
            recorder = getattr(_local, "recorder", None)
            if recorder is not None:
                recorder.read(self, value)
            return original(self, value)

        Variable._maybe_autocast = _maybe_autocast
        _installed = True


class recording:
    """Records variable reads inside the block (a class, not a generator: it runs on every
    custom-gradient call, and a generator-based context manager costs several microseconds).

    >>> import keras
    >>> v = keras.Variable(1.0)
    >>> with recording() as rec:
    ...     _ = keras.ops.add(v, 1.0)
    >>> rec.variables == [v]
    True
    """

    __slots__ = ("_parent",)

    def __enter__(self) -> Recorder:
        if not _installed:
            install()
        self._parent = getattr(_local, "recorder", None)
        recorder = _local.recorder = Recorder(self._parent)
        return recorder

    def __exit__(self, *exc_info) -> None:
        _local.recorder = self._parent


def current_recorder() -> Recorder | None:
    return getattr(_local, "recorder", None)
