"""Tracebacks that end at the user's call. An exception leaving customgrad (a named error, or one
raised in the user's f or grad_fn) loses customgrad's own frames, as jax and TensorFlow remove
theirs: where the exception leaves customgrad's code, the code catches it, calls
`without_own_frames(error)` and re-raises it bare (a bare `raise` adds no frame of its own). The
frames of the user's f and grad_fn and those of the framework stay. Set
`CUSTOMGRAD_TRACEBACK_FILTERING=off` to keep every frame.

>>> import traceback, keras, customgrad
>>> @customgrad.custom_gradient
... def f(x):
...     return x  # no (output, grad_fn) pair: a CustomGradientError
>>> try:
...     f(keras.ops.ones(2))
... except customgrad.CustomGradientError as error:
...     files = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(error.__traceback__)]
>>> [name for name in files if name.startswith(OWN_DIR)]
[]
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ._messages import CustomGradientError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

P = ParamSpec("P")
R = TypeVar("R")

OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # customgrad's package
_NOTE = ("(customgrad removed its own frames from this traceback; "
         "CUSTOMGRAD_TRACEBACK_FILTERING=off keeps them)")


def without_own_frames(error: BaseException) -> None:
    """Removes customgrad's frames from `error`'s traceback (unless
    CUSTOMGRAD_TRACEBACK_FILTERING=off), and on customgrad's own errors says so in a note, once."""
    if _filtering_off():
        return
    kept, removed = [], False
    jax_keeps = _jax_keeps()
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(OWN_DIR) or not jax_keeps(tb.tb_frame):
            removed = True
        else:
            kept.append(tb)
        tb = tb.tb_next
    if not removed:
        return
    for outer, inner in itertools.pairwise(kept):
        outer.tb_next = inner
    if kept:
        kept[-1].tb_next = None
    error.with_traceback(kept[0] if kept else None)
    # said on customgrad's own errors: another (the user's, raised in f) keeps its notes as they are
    if isinstance(error, CustomGradientError) and _NOTE not in getattr(error, "__notes__", ()):
        error.add_note(_NOTE)


def boundary(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` as an entry point of customgrad's: an exception leaving it loses customgrad's
    frames (`without_own_frames`). For the public functions; the per-call paths (the decorated
    function, the backward the framework calls) do the same inline, which costs no frame."""
    @functools.wraps(fn)
    def entry(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            without_own_frames(error)
            raise

    return entry


def register_with_jax() -> None:
    """Has jax's traceback filtering (at its transformations' boundaries: jax.grad, jax.jit)
    remove customgrad's frames too, unless CUSTOMGRAD_TRACEBACK_FILTERING=off. Its registry
    has no public name; where it is missing, jax's tracebacks keep customgrad's frames."""
    if _filtering_off():
        return
    from jax._src import traceback_util  # (jax's registry of excluded paths)

    register = getattr(traceback_util, "register_exclusion", None)
    if register is not None and OWN_DIR not in getattr(traceback_util, "_exclude_paths", ()):
        register(OWN_DIR)


def _jax_keeps() -> Callable[[FrameType], bool]:
    """Whether jax's traceback filtering keeps a frame: jax's own frames are removed too where
    a customgrad transformation calls jax's directly (customgrad.grad's vjp_fn), as jax's own
    boundaries would remove them; every frame is kept where jax is not loaded or
    JAX_TRACEBACK_FILTERING=off."""
    traceback_util = sys.modules.get("jax._src.traceback_util")
    if traceback_util is None or os.environ.get("JAX_TRACEBACK_FILTERING") == "off":
        return _keep
    return getattr(traceback_util, "include_frame", _keep)


def _keep(_frame: FrameType) -> bool:
    return True


def _filtering_off() -> bool:
    return os.environ.get("CUSTOMGRAD_TRACEBACK_FILTERING", "").lower() == "off"
