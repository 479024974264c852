"""The one grad-function convention, shared by every backend.

How upstream gradients arrive:
  * positionally, one argument per top-level output: for a tuple or list output, one upstream per
    element (each in that element's nested structure), as tf.custom_gradient does; for any other
    output (a tensor, a dict) a single upstream in the output's structure;
  * as the keyword `upstream=`, if grad_fn declares `upstream` keyword-only (`def g(*args,
    upstream)` or `def g(*args, upstream=None)`) or takes `**kwargs`: the upstream gradient in the
    structure of the whole output (a tensor for a single output, a tuple for a tuple output).
  * outputs the loss does not use arrive as zeros of their shape and dtype; non-float outputs
    (integer, bool) arrive as None;
  * `variables=`: the list of `keras.Variable`s the forward read, when it read any (TF1 style);
    grad_fn then returns `(grad_xs, grad_vars)`.

What grad_fn returns: gradients for the positional arguments, in their nested structure (a single
value when f takes one argument, else a tuple or list with one entry per argument) or flattened (one
per tensor leaf of the positional arguments). None means zero, for a leaf or a whole subtree.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from . import _tree


class CustomGradientError(ValueError):
    """A function given to `customgrad.custom_gradient` broke its contract."""


def fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def loss_in_forward_error(f, why: str) -> CustomGradientError:
    """The error for a `layer.add_loss` inside f where the backend cannot differentiate it."""
    return CustomGradientError(
        f"customgrad.custom_gradient: `{fn_name(f)}` added a loss (layer.add_loss) inside its "
        f"forward; {why}. Add the loss outside the custom-gradient function."
    )


def forward_mode_error(f, how: str, instead: str) -> CustomGradientError:
    """The error for forward-mode differentiation (JVPs) where grad_fn cannot be used for it:
    the backend would differentiate f's own ops (or nothing) without a word."""
    return CustomGradientError(
        f"customgrad.custom_gradient: `{fn_name(f)}` was called under forward-mode "
        f"differentiation ({how}); a custom gradient defines reverse-mode derivatives (grad_fn "
        f"maps output cotangents to input gradients, as jax.custom_vjp does), and here the "
        f"forward-mode derivative would silently ignore it. {instead}"
    )


@dataclass(frozen=True)
class GradSignature:
    upstream_keyword: bool
    accepts_variables: bool


# the four possible answers, made once (inspect_grad_fn runs on every backward)
_GRAD_SIGNATURES = {(u, v): GradSignature(u, v) for u in (False, True) for v in (False, True)}


_CO_VARKEYWORDS = 0x08


def inspect_grad_fn(grad_fn) -> GradSignature:
    """How to call `grad_fn`: whether it wants `upstream=` and accepts `variables=`.

    Reads the code object of plain functions (cheap, and traceable by torch.compile); other
    callables go through inspect.signature.

    >>> inspect_grad_fn(lambda *args, upstream=None: None)
    GradSignature(upstream_keyword=True, accepts_variables=False)
    """
    code = getattr(grad_fn, "__code__", None)
    if code is not None:
        # Read on every call, not cached: a cache written while torch.compile traces a backward
        # breaks its graph.
        names = code.co_varnames
        positional = names[code.co_posonlyargcount:code.co_argcount]
        keyword_only = names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
        return _grad_signature(positional, keyword_only, bool(code.co_flags & _CO_VARKEYWORDS))
    try:
        params = inspect.signature(grad_fn).parameters.values()
    except (TypeError, ValueError):
        # Builtins and some C callables have no signature: call them positionally.
        return GradSignature(False, False)
    kind = inspect.Parameter
    positional = tuple(p.name for p in params if p.kind == kind.POSITIONAL_OR_KEYWORD)
    keyword_only = tuple(p.name for p in params if p.kind == kind.KEYWORD_ONLY)
    var_keyword = any(p.kind == kind.VAR_KEYWORD for p in params)
    return _grad_signature(positional, keyword_only, var_keyword)


def _grad_signature(positional, keyword_only, var_keyword) -> GradSignature:
    upstream_keyword = "upstream" in keyword_only or (var_keyword and "upstream" not in positional)
    accepts_variables = var_keyword or "variables" in keyword_only or "variables" in positional
    return _GRAD_SIGNATURES[bool(upstream_keyword), bool(accepts_variables)]


def call_grad_fn(grad_fn, f, output, upstream_leaves: list, variables: list):
    """Calls the user's grad_fn with upstream gradients rebuilt into the output's structure."""
    if len(upstream_leaves) == 1 and _tree.is_leaf(output):
        upstream = upstream_leaves[0]
        positional = (upstream,)
    else:
        upstream = _tree.unflatten(output, upstream_leaves)
        if isinstance(output, (list, tuple)) and not _tree._is_namedtuple(output):
            positional = tuple(upstream)
        else:
            positional = (upstream,)
    sig = inspect_grad_fn(grad_fn)
    kwargs = {}
    if sig.upstream_keyword:
        kwargs["upstream"] = upstream
    if variables:
        if not sig.accepts_variables:
            names = [getattr(v, "path", None) or getattr(v, "name", "?") for v in variables]
            raise CustomGradientError(
                f"customgrad.custom_gradient: `{fn_name(f)}` read the trainable variables "
                f"{names}, so its grad_fn `{fn_name(grad_fn)}` must accept a `variables` keyword "
                f"argument and return (grad_xs, grad_vars); received a grad_fn with signature "
                f"{_signature_text(grad_fn)}. Without it these variables would get no gradient."
            )
        kwargs["variables"] = list(variables)
    return grad_fn(*positional, **kwargs)


def _signature_text(fn) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(unknown)"


def split_variable_grads(result, f, grad_fn, variables: list):
    """Splits a TF1-style `(grad_xs, grad_vars)` result; returns (grad_xs, grad_vars or None)."""
    if not variables:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise CustomGradientError(
            f"customgrad.custom_gradient: grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}` was "
            f"given variables= and must return a pair (grad_xs, grad_vars); received "
            f"{_tree.describe(result)}."
        )
    grad_xs, grad_vars = result
    if grad_vars is None:
        grad_vars = [None] * len(variables)
    if not isinstance(grad_vars, (tuple, list)) or len(grad_vars) != len(variables):
        raise CustomGradientError(
            f"customgrad.custom_gradient: grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}` must "
            f"return one gradient per variable ({len(variables)}) in grad_vars; received "
            f"{_tree.describe(grad_vars)}."
        )
    return grad_xs, list(grad_vars)


def align_input_grads(grad_xs, args: tuple, is_tensor_leaf: list, f, grad_fn) -> list:
    """Aligns what grad_fn returned with the leaves of the positional arguments.

    Accepts the structure of the arguments (a single value for a one-argument f) or a flat
    sequence with one entry per tensor leaf. Returns one entry (or None) per leaf of `args`.
    """
    if grad_xs is None:
        return [None] * len(is_tensor_leaf)
    if _tree.all_leaves(args):
        # the common case, plain arguments: skip the general matching below
        if len(args) == 1 and _tree.is_leaf(grad_xs):
            return [grad_xs]
        if (isinstance(grad_xs, (list, tuple)) and len(grad_xs) == len(args)
                and _tree.all_leaves(grad_xs)):
            return list(grad_xs)
    n_tensors = sum(is_tensor_leaf)
    attempts = []
    if len(args) == 1:
        attempts.append(lambda: _tree.match(grad_xs, args[0]))
        if isinstance(grad_xs, (list, tuple)) and len(grad_xs) == 1:
            attempts.append(lambda: _tree.match(grad_xs[0], args[0]))
    attempts.append(lambda: _tree.match(grad_xs, tuple(args)))
    if isinstance(grad_xs, (list, tuple)) and len(grad_xs) == n_tensors:
        attempts.append(lambda: _scatter_flat(list(grad_xs), is_tensor_leaf))
    first_error = None
    for attempt in attempts:
        try:
            return attempt()
        except _tree.StructureMismatch as e:
            first_error = first_error or e
    expected = (
        f"one gradient per positional argument ({len(args)}: "
        f"{', '.join(_tree.describe(a) for a in args)}) or a flat sequence of {n_tensors} "
        f"(one per tensor leaf)"
    )
    raise CustomGradientError(
        f"customgrad.custom_gradient: grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}` must return "
        f"{expected}; received {_tree.describe(grad_xs)} ({first_error})."
    )


def _scatter_flat(flat: list, is_tensor_leaf: list) -> list:
    it = iter(flat)
    return [next(it) if t else None for t in is_tensor_leaf]
