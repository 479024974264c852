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
from types import FunctionType as _FunctionType
from typing import NamedTuple

from . import _tree


class CustomGradientError(ValueError):
    """A function given to `customgrad.custom_gradient` broke its contract."""


CustomGradientError.__module__ = "customgrad"  # tracebacks say customgrad.CustomGradientError


def fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def loss_in_forward_error(f, why: str) -> CustomGradientError:
    """The error for a `layer.add_loss` inside f where the backend cannot differentiate it."""
    return CustomGradientError(
        f"customgrad.custom_gradient: `{fn_name(f)}` added a loss (layer.add_loss) inside its "
        f"forward; {why}. Add the loss outside the custom-gradient function."
    )


class GradSignature(NamedTuple):
    """What `call_grad_fn` needs to know of a grad_fn's parameters.

    `min_positional`/`max_positional`: how many upstream gradients it takes positionally
    (max None for `*args`), not counting trailing parameters named `upstream` or `variables`,
    which are passed by keyword; `upstream_keyword`: it takes `upstream=` (a parameter of that
    name, or `**kwargs`); `accepts_variables`: it takes `variables=`; `needs_variables`: that
    parameter has no default.
    """

    min_positional: int
    max_positional: int | None
    upstream_keyword: bool
    accepts_variables: bool
    needs_variables: bool = False
    other_required_keywords: tuple = ()


_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08
_BY_KEYWORD = ("upstream", "variables")
# grad_fns with n plain positional parameters (no defaults, *args or keywords), made once
_PLAIN = tuple(GradSignature(n, n, False, False) for n in range(8))
_ONE = _PLAIN[1]


def inspect_grad_fn(grad_fn) -> GradSignature:
    """How to call `grad_fn`: how many positional upstreams, and which keywords.

    Reads the code object of plain functions (cheap, and traceable by torch.compile); other
    callables go through inspect.signature.

    >>> inspect_grad_fn(lambda *args, upstream=None: None)[:3]
    (0, None, True)
    """
    if type(grad_fn) is _FunctionType:  # a def or lambda (not a bound method: no `self` to skip)
        code = grad_fn.__code__
        # Read on every call, not cached: a cache written while torch.compile traces a backward
        # breaks its graph.
        names = code.co_varnames
        n_positional = code.co_argcount
        flags = code.co_flags
        if (n_positional < len(_PLAIN) and not code.co_kwonlyargcount
                and not flags & (_CO_VARARGS | _CO_VARKEYWORDS) and not grad_fn.__defaults__
                and (n_positional == 0 or names[n_positional - 1] not in _BY_KEYWORD)):
            return _PLAIN[n_positional]  # `def grad(dy)` and the like: the common case
        positional = names[:n_positional]
        n_required = n_positional - len(grad_fn.__defaults__ or ())
        keyword_only = names[n_positional:n_positional + code.co_kwonlyargcount]
        if keyword_only:
            # (getattr with a default: torch.compile's tracer has no __kwdefaults__ for functions)
            kw_defaults = getattr(grad_fn, "__kwdefaults__", None) or {}
            required_kw = tuple(k for k in keyword_only if k not in kw_defaults)
        else:
            required_kw = ()
        return _grad_signature(positional, n_required, bool(flags & _CO_VARARGS),
                               keyword_only, required_kw, bool(flags & _CO_VARKEYWORDS))
    try:
        params = list(inspect.signature(grad_fn).parameters.values())
    except (TypeError, ValueError):
        # Builtins and some C callables have no signature: one upstream per output, positionally.
        return GradSignature(0, None, False, False)
    kind, empty = inspect.Parameter, inspect.Parameter.empty
    positional_params = [p for p in params
                         if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)]
    positional = tuple(p.name for p in positional_params)
    n_required = sum(p.default is empty for p in positional_params)
    keyword_only = tuple(p.name for p in params if p.kind == kind.KEYWORD_ONLY)
    required_kw = tuple(p.name for p in params if p.kind == kind.KEYWORD_ONLY and p.default is empty)
    var_positional = any(p.kind == kind.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind == kind.VAR_KEYWORD for p in params)
    return _grad_signature(positional, n_required, var_positional, keyword_only, required_kw,
                           var_keyword)


def _grad_signature(positional, n_required, var_positional, keyword_only, required_kw,
                    var_keyword) -> GradSignature:
    # trailing positional parameters named upstream/variables are filled by keyword
    by_keyword = []
    while positional and positional[-1] in _BY_KEYWORD and not var_positional:
        by_keyword.append(positional[-1])
        if len(positional) <= n_required:
            required_kw += (positional[-1],)
            n_required -= 1
        positional = positional[:-1]
    keywords = set(keyword_only) | set(by_keyword)
    upstream_keyword = "upstream" in keywords or (var_keyword and "upstream" not in positional)
    accepts_variables = var_keyword or "variables" in keywords
    n_positional = None if var_positional else len(positional)
    return GradSignature(n_required, n_positional, upstream_keyword, accepts_variables,
                         "variables" in required_kw,
                         tuple(k for k in required_kw if k not in _BY_KEYWORD))


def upstream_arguments(grad_fn, f, output, upstream):
    """The positional arguments and the keywords (`upstream=`) that `grad_fn` is called with.

    The one rule: a tuple or list output has one upstream per element, anything else (a tensor,
    a dict) one upstream in its structure. grad_fn receives them
      * one per output, when it takes that many positional parameters (or `*args`);
      * else the whole upstream structure as its one positional parameter (jax's
        `lambda g: ...` on a tuple output);
      * else nothing positionally, when it takes only `upstream=`;
    and also `upstream=` (the whole structure) when it declares that keyword or `**kwargs`.
    Any other signature is a CustomGradientError.
    """
    sig = inspect_grad_fn(grad_fn)
    if sig is _ONE and not isinstance(output, (list, tuple)):
        return (upstream,), {}, sig  # `def grad(dy)` on one output: the common case
    if isinstance(output, (list, tuple)) and not _tree._is_namedtuple(output):
        per_output = tuple(upstream)
    else:
        per_output = (upstream,)
    n = len(per_output)
    lo, hi = sig.min_positional, sig.max_positional
    if lo <= n and (hi is None or n <= hi):
        positional = per_output
    elif n != 1 and lo <= 1 and (hi is None or 1 <= hi):
        positional = (upstream,)
    elif lo == 0 and sig.upstream_keyword:
        positional = ()
    else:
        raise grad_fn_arity_error(grad_fn, f, output, n, "")
    if sig.other_required_keywords:
        raise grad_fn_arity_error(grad_fn, f, output, n, (
            f" It also requires the keyword argument(s) {list(sig.other_required_keywords)}, "
            f"which customgrad does not pass."))
    return positional, ({"upstream": upstream} if sig.upstream_keyword else {}), sig


def grad_fn_arity_error(grad_fn, f, output, n_upstream, extra) -> CustomGradientError:
    return CustomGradientError(
        f"customgrad.custom_gradient: grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}` has the "
        f"signature {_signature_text(grad_fn)}, so it cannot be called with the upstream "
        f"gradients of {_tree.describe(output)} ({n_upstream} upstream "
        f"gradient{'s' if n_upstream != 1 else ''}). grad_fn must take one positional parameter per output ({n_upstream}), or one for "
        f"the whole output's upstream structure, or *args, or only the keyword `upstream`.{extra}"
    )


def call_grad_fn(grad_fn, f, output, upstream_leaves: list, variables: list):
    """Calls the user's grad_fn with upstream gradients rebuilt into the output's structure."""
    if len(upstream_leaves) == 1 and _tree.is_leaf(output):
        upstream = upstream_leaves[0]
    else:
        upstream = _tree.unflatten(output, upstream_leaves)
    positional, kwargs, sig = upstream_arguments(grad_fn, f, output, upstream)
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
    elif sig.needs_variables:
        raise grad_fn_arity_error(grad_fn, f, output, len(positional), (
            f" It requires `variables`, but `{fn_name(f)}` read no trainable variable: give "
            f"that parameter a default (variables=None)."))
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
