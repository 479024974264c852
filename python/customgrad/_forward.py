"""Forward mode (JVPs) derived from grad_fn: the backend-independent part.

grad_fn maps an output cotangent u to the input gradients J^T u, and is linear in u. Its own
VJP, taken at any u and applied to an input tangent v, is therefore (J^T)^T v = J v: the JVP.
Every backend derives forward mode this way (the "transpose of the transpose"); this module holds
what they share: the check that grad_fn is linear, and the errors.

A grad_fn that is not linear in its upstream (one that clips the upstream, or rescales it by its
norm) defines no JVP at all. Such rules can be marked with `nonlinear`, which makes forward mode
refuse them at once (on every backend, also under tracing); besides, the first JVP of each
custom-gradient function computed on concrete values probes grad_fn at u and at s * u.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _messages as msg

_NONLINEAR = "__customgrad_nonlinear__"
# (upstream, scaled upstream / scale) must agree this closely for a linear grad_fn
_PROBE_SCALES = (1e3, 1e-3)
_PROBE_RTOL = 1e-3
_probed = weakref.WeakSet()  # functions whose grad_fn passed the probe


def nonlinear(grad_fn, why: str):
    """Marks `grad_fn` as not linear in its upstream (`why` says how), so that forward mode
    refuses it with a CustomGradientError instead of deriving a meaningless JVP; returns it.

    Examples:
        >>> import keras, customgrad
        >>> from customgrad._forward import nonlinear
        >>> @customgrad.custom_gradient
        ... def clip(x):
        ...     return x, nonlinear(lambda g: keras.ops.clip(g, -1.0, 1.0), "clips the upstream")
    """
    setattr(grad_fn, _NONLINEAR, why)
    return grad_fn


def refuse_marked(f, grad_fn) -> None:
    """Raises if grad_fn was marked `nonlinear` (one attribute lookup)."""
    why = getattr(grad_fn, _NONLINEAR, None)
    if why is not None:
        raise msg.grad_fn_not_linear(f, grad_fn, why)


def check_linear(f, grad_fn, rule, cotangent_shapes: list) -> None:
    """Refuses a marked grad_fn; on the first JVP of `f` also probes linearity.

    `rule(list of numpy cotangents) -> list of numpy gradients (or None)` runs grad_fn on concrete
    values; the caller passes None where values are traced (then only the mark is checked).
    The probe compares rule(s * u) / s with rule(u) for a random u and s = 1e3 and 1e-3: a rule
    that clips the upstream or rescales it by its norm fails it, a linear rule passes it up to
    rounding. Two extra grad_fn calls, once per custom-gradient function.
    """
    refuse_marked(f, grad_fn)
    if rule is None or _probed_already(f):
        return
    rng = np.random.default_rng(0)
    u = [rng.standard_normal(shape) for shape in cotangent_shapes]
    base = rule(u)
    for scale in _PROBE_SCALES:
        scaled = rule([scale * ui for ui in u])
        for a, b in zip(base, scaled):
            if a is None or b is None:
                continue
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64) / scale
            finite = np.isfinite(a) & np.isfinite(b)  # overflow at a large scale proves nothing
            size = float(np.max(np.abs(a[finite]), initial=0.0))
            if np.any(np.abs(a[finite] - b[finite]) > _PROBE_RTOL * size + 1e-30):
                raise msg.grad_fn_not_linear(
                    f, grad_fn, f"grad_fn(u * {scale:g}) != grad_fn(u) * {scale:g} at a random u")
    _remember(f)


def _probed_already(f) -> bool:
    try:
        return f in _probed
    except TypeError:  # not weak-referenceable: probe every time
        return False


def _remember(f) -> None:
    try:
        _probed.add(f)
    except TypeError:
        pass


def call_forward_mode(backend, arguments):
    """Runs a call of a `forward_mode=True` function: the backend's `call_forward_mode` where
    forward mode needs another construction (jax), else its usual `call` (torch and tensorflow
    derive JVPs from grad_fn for every function)."""
    return (backend.call_forward_mode if backend.FORWARD_MODE_OPT_IN else backend.call)(arguments)
