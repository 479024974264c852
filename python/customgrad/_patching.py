"""`patch_keras` / `unpatch_keras`: Keras's own custom gradients (and, on tensorflow, its remat)
made customgrad's; `patch_tensorflow` / `unpatch_tensorflow`: `tf.custom_gradient`, as libraries
written for TensorFlow read it, made customgrad's. Both opt-in and reversible, by one mechanism
(`_Patch`)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, ClassVar, Self

import keras

from . import _messages as msg
from ._core import backend_module, custom_gradient
from ._remat import remat

# Every module attribute Keras binds `keras.ops.custom_gradient` under: the function itself, the
# package that re-exports it (`keras.src.ops`, which quantizers.py and the int8/int4/float8 paths
# of Dense and EinsumDense call as `ops.custom_gradient`), and the two public API modules.
OPS_BINDINGS = ("keras.src.ops.core", "keras.src.ops", "keras.ops", "keras._tf_keras.keras.ops")
# Also the active backend's `core` module (keras.src.backend.core): `custom_gradient`, which the
# original keras.ops.custom_gradient calls (so a reference taken before patching is covered too),
# and on tensorflow `remat`, which keras.remat and keras.RematScope call.

def _keras_targets() -> list:
    """(module, attribute, replacement) for everything patch_keras replaces."""
    targets = [(importlib.import_module(name), "custom_gradient", custom_gradient)
               for name in OPS_BINDINGS]
    core = importlib.import_module("keras.src.backend").core
    targets.append((core, "custom_gradient", custom_gradient))
    if keras.backend.backend() == "tensorflow":
        targets.append((core, "remat", remat))
    return targets


class _Patch:
    """Replaces attributes of modules (`_targets()`: (module, attribute, replacement)) on
    construction, and puts back the very objects that were there on `_restore()` or at the end of
    a `with` block that patched. Each subclass keeps its own `_originals`, which is also its
    "patched" flag: patching again while patched does nothing."""

    _originals: ClassVar[dict[tuple[str, str], Any]]
    _targets: ClassVar[staticmethod]

    def __init__(self) -> None:
        self._patched_here = not self._originals
        if not self._patched_here:
            return  # already patched: a no-op
        targets = self._targets()
        for module, attribute, _ in targets:
            self._originals[module.__name__, attribute] = getattr(module, attribute)
        for module, attribute, replacement in targets:
            setattr(module, attribute, replacement)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # a block that found the modules patched already leaves them patched
        if self._patched_here:
            self._restore()

    @classmethod
    def _restore(cls) -> None:
        while cls._originals:
            (name, attribute), original = cls._originals.popitem()
            setattr(importlib.import_module(name), attribute, original)


class patch_keras(_Patch):
    """Makes Keras use customgrad's `custom_gradient` (and, on tensorflow, `customgrad.remat`)
    until `unpatch_keras()`, or for the block when used as a context manager.

    It replaces `custom_gradient` in `keras.src.ops.core`, `keras.src.ops`, `keras.ops` and
    `keras._tf_keras.keras.ops` (every name Keras binds `keras.ops.custom_gradient` under; Keras's
    quantizers and the int8, int4 and float8 paths of Dense and EinsumDense call it at each call,
    so they take customgrad's), and in the active backend's `keras.src.backend.core` (which the
    original calls). On tensorflow it also replaces `remat` there, so `keras.remat` and
    `keras.RematScope` (built on `tf.recompute_grad`, which refuses the keyword arguments of a
    layer call in a compiled function) run through `customgrad.remat`. Nothing else changes.
    A function decorated before the patch keeps the decorator it got. Patching again while
    patched does nothing; `unpatch_keras()` puts back the very objects Keras had.

    Examples:
        >>> import keras, customgrad
        >>> with customgrad.patch_keras():
        ...     keras.ops.custom_gradient is customgrad.custom_gradient
        True
        >>> keras.ops.custom_gradient is customgrad.custom_gradient
        False
    """

    # (module, attribute) -> the object Keras had there, while patched
    _originals: ClassVar[dict[tuple[str, str], Any]] = {}
    _targets = staticmethod(_keras_targets)


def unpatch_keras() -> None:
    """Puts back what `patch_keras()` replaced: the very objects Keras had (nothing to do when
    Keras is not patched).

    Examples:
        >>> import keras, customgrad
        >>> original = keras.ops.custom_gradient
        >>> _ = customgrad.patch_keras()
        >>> customgrad.unpatch_keras()
        >>> keras.ops.custom_gradient is original
        True
    """
    patch_keras._restore()


def tf_custom_gradient(f=None):
    """`customgrad.custom_gradient` with `tf.custom_gradient`'s signature (`f=None` gives the
    decorator) and its variables: grad_fn's `variables=` holds the tf.Variables f read
    (`tf_variables=True`). What `patch_tensorflow` puts in place of `tf.custom_gradient`.

    Examples:
        >>> import keras, customgrad
        >>> from customgrad._patching import tf_custom_gradient
        >>> if keras.backend.backend() == "tensorflow":
        ...     @tf_custom_gradient
        ...     def cube(x):
        ...         return x * x * x, lambda dy: dy * 3.0 * x * x
        ...     assert float(customgrad.grad(cube)(keras.ops.convert_to_tensor(2.0))) == 12.0
    """
    if f is None:
        return tf_custom_gradient
    return custom_gradient(f, tf_variables=True)


def _tensorflow_targets() -> list:
    """(module, "custom_gradient", tf_custom_gradient) for every loaded public TensorFlow module
    that binds TensorFlow's own `custom_gradient`: `tensorflow`, `tensorflow.compat.v1`,
    `tensorflow.compat.v2` and their `_api` twins. TensorFlow's internal modules
    (`tensorflow.python.*`, where tf.recompute_grad and tf.grad_pass_through find it) keep it."""
    if keras.backend.backend() != "tensorflow":
        raise msg.patch_tensorflow_off_tensorflow(keras.backend.backend())
    # customgrad's tensorflow backend builds graphs on TensorFlow's own custom_gradient, which it
    # binds from the internal module (listed in _private_apis): importing it now, before the
    # patch, is what keeps a patched tf.custom_gradient from recursing into itself.
    backend_module()
    from tensorflow.python.ops import custom_gradient as tf_module
    import tensorflow.compat.v1  # the modules libraries read it from, loaded
    import tensorflow.compat.v2  # noqa: F401

    original = tf_module.custom_gradient
    return [(module, "custom_gradient", tf_custom_gradient)
            for name, module in list(sys.modules.items())
            if (name == "tensorflow" or name.startswith("tensorflow.")) and module is not None
            and not name.startswith("tensorflow.python")
            and vars(module).get("custom_gradient") is original]


class patch_tensorflow(_Patch):
    """Makes `tf.custom_gradient`, as code written for TensorFlow reads it, customgrad's until
    `unpatch_tensorflow()`, or for the block when used as a context manager (tensorflow backend
    only).

    It replaces `custom_gradient` in every loaded public TensorFlow module that binds it
    (`tensorflow`, `tensorflow.compat.v1`, `tensorflow.compat.v2`, ...) with
    `customgrad.custom_gradient(f, tf_variables=True)`, which gives grad_fn the tf.Variables f
    read, as tf.custom_gradient does. A library such as TensorFlow Probability that applies
    `tf.custom_gradient` at each call takes customgrad's from then on; a function decorated
    before the patch (at a module's import, say) keeps the decorator it got, so import such a
    library inside the patch. TensorFlow's own internal uses (`tf.recompute_grad`,
    `tf.grad_pass_through`) keep TensorFlow's. Patching again while patched does nothing;
    `unpatch_tensorflow()` puts back the very objects TensorFlow had.

    Examples:
        >>> import keras, customgrad
        >>> if keras.backend.backend() == "tensorflow":
        ...     import tensorflow as tf
        ...     with customgrad.patch_tensorflow():
        ...         @tf.compat.v2.custom_gradient
        ...         def log1pexp(x):
        ...             e = tf.exp(x)
        ...             return tf.math.log(1.0 + e), lambda dy: dy * (1.0 - 1.0 / (1.0 + e))
        ...     assert float(customgrad.grad(log1pexp)(tf.constant(100.0))) == 1.0
    """

    # (module, attribute) -> the object TensorFlow had there, while patched
    _originals: ClassVar[dict[tuple[str, str], Any]] = {}
    _targets = staticmethod(_tensorflow_targets)


def unpatch_tensorflow() -> None:
    """Puts back what `patch_tensorflow()` replaced: the very objects TensorFlow had (nothing to
    do when it is not patched).

    Examples:
        >>> import keras, customgrad
        >>> if keras.backend.backend() == "tensorflow":
        ...     import tensorflow as tf
        ...     original = tf.custom_gradient
        ...     _ = customgrad.patch_tensorflow()
        ...     customgrad.unpatch_tensorflow()
        ...     assert tf.custom_gradient is original
    """
    patch_tensorflow._restore()
