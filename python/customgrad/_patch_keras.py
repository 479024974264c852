"""`patch_keras` / `unpatch_keras`: Keras's own custom gradients (and, on tensorflow, its remat)
made customgrad's, opt-in and reversible."""

from __future__ import annotations

import importlib

import keras

from ._core import custom_gradient
from ._remat import remat

# Every module attribute Keras binds `keras.ops.custom_gradient` under: the function itself, the
# package that re-exports it (`keras.src.ops`, which quantizers.py and the int8/int4/float8 paths
# of Dense and EinsumDense call as `ops.custom_gradient`), and the two public API modules.
OPS_BINDINGS = ("keras.src.ops.core", "keras.src.ops", "keras.ops", "keras._tf_keras.keras.ops")
# Also the active backend's `core` module (keras.src.backend.core): `custom_gradient`, which the
# original keras.ops.custom_gradient calls (so a reference taken before patching is covered too),
# and on tensorflow `remat`, which keras.remat and keras.RematScope call.

_originals: dict = {}  # (module, attribute) -> the object Keras had there, while patched


def _targets() -> list:
    """(module, attribute, replacement) for everything patch_keras replaces."""
    targets = [(importlib.import_module(name), "custom_gradient", custom_gradient)
               for name in OPS_BINDINGS]
    core = importlib.import_module("keras.src.backend").core
    targets.append((core, "custom_gradient", custom_gradient))
    if keras.backend.backend() == "tensorflow":
        targets.append((core, "remat", remat))
    return targets


class patch_keras:
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

    def __init__(self):
        self._patched_here = not _originals
        if not self._patched_here:
            return  # already patched: a no-op
        targets = _targets()
        for module, attribute, _ in targets:
            _originals[module.__name__, attribute] = getattr(module, attribute)
        for module, attribute, replacement in targets:
            setattr(module, attribute, replacement)

    def __enter__(self) -> "patch_keras":
        return self

    def __exit__(self, *exc_info) -> None:
        # a block that found Keras patched already leaves it patched
        if self._patched_here:
            unpatch_keras()


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
    while _originals:
        (name, attribute), original = _originals.popitem()
        setattr(importlib.import_module(name), attribute, original)
