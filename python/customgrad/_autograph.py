"""Keeping TensorFlow's AutoGraph off customgrad's own code.

A user's `tf.function` calls what its code calls through AutoGraph's `converted_call`, which
transpiles every function it reaches that is neither TensorFlow's nor marked: without this, the
first trace of a `GradientTape` over one custom-gradient call converted ~70 customgrad functions
(seconds of AST work), and `tf.function(customgrad.grad(lambda ...))` printed AutoGraph's "could
not transform" warning. Two marks, both set once (at import, at decoration), none on a call:

* `not_converted(fn)` on every function customgrad hands back that carries the user's
  `__module__` (`functools.wraps` copies it: the decorated function, `grad`'s,
  `value_and_grad`'s, `remat`'s results). It sets `autograph_info__`, the attribute AutoGraph's
  own functions carry (`autograph_artifact`): `converted_call` checks it first of all, even for
  the function handed to `tf.function` itself, and then calls the function as it is, in the
  same AutoGraph context. That is what `tf.custom_gradient`'s result gets (its `Bind` object's
  `__call__` is TensorFlow's), so f and grad_fn run unconverted, as they do natively. Setting an
  attribute imports nothing and costs nothing per call, on any backend. Not
  `tf.autograph.experimental.do_not_convert`, the public form: it wraps the function in another
  that also turns AutoGraph off for everything below it (a `tf.function` the user calls inside f
  included) and costs a context manager per call.
* a `DoNotConvert("customgrad")` rule in AutoGraph's `CONVERSION_RULES` (the rule TensorFlow
  gives `keras`, `numpy`, `tensorflow_probability`), on tensorflow only: it covers the rest of
  customgrad's public code by its module (`customgrad.ops`, `vjp`, `jvp`, `hvp`,
  `check_gradients`, the functions `vjp` returns, methods) without a list to keep.

Both are private to TensorFlow (`_private_apis.py` lists them); if a release moved them, the
worst is the old slowness, never a wrong result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# the attribute `tensorflow.python.autograph.impl.api.is_autograph_artifact` reads
_ARTIFACT = "autograph_info__"


def not_converted(fn: F) -> F:
    """Marks `fn` so that AutoGraph calls it as it is (see the module docstring)."""
    setattr(fn, _ARTIFACT, None)  # fn is a plain function customgrad made
    return fn


def keep_autograph_off_customgrad() -> None:
    """Adds the `DoNotConvert("customgrad")` rule to AutoGraph's, once (tensorflow backend)."""
    try:
        from tensorflow.python.autograph.core import config
    except ImportError:  # no tensorflow: nothing converts
        return
    rules = tuple(config.CONVERSION_RULES)
    if any(isinstance(rule, config.DoNotConvert) and rule.matches("customgrad")
           for rule in rules):
        return
    # first, as the first rule that matches a module decides
    config.CONVERSION_RULES = (config.DoNotConvert("customgrad"),) + rules
