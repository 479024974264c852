"""The one grad-function convention, shared by every backend: how grad_fn is called.

The convention is stated once, for users, in `docs/convention.md` ("How upstream gradients
arrive", "What grad_fn returns"); this module implements its calling half, and
`_returns.checked_gradients` checks what grad_fn returns. The case table `tests/upstream_rule.json`
pins the rule in Python and in R.
"""

from __future__ import annotations

import inspect
from types import FunctionType as _FunctionType
from typing import NamedTuple

from . import _messages as msg, _tree


class GradSignature(NamedTuple):
    """What `call_grad_fn` needs to know of a grad_fn's parameters.

    `min_positional`/`max_positional`: how many upstream gradients it takes positionally
    (max None for `*args`), not counting trailing parameters named `upstream` or `variables`,
    which are passed by keyword; `upstream_keyword`: it names a parameter `upstream` (`**kwargs`
    alone does not: tf.custom_gradient passes it no `upstream=`, and code written for it, as
    TensorFlow Probability's, forwards its `**kwargs` on); `accepts_variables`: it takes
    `variables=` (by name, or `**kwargs`, as tf.custom_gradient passes it); `needs_variables`:
    that parameter has no default.
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
# the signatures of the grad_fns seen, by code and defaults (a grad_fn is often a closure made
# anew on every call, of one code object), or by the `__signature__` object a callable states:
# written in eager calls only (see inspect_grad_fn). Keyed by id(code), not the code object:
# hashing a code object hashes its constants and names on every lookup. Each entry holds its
# code or signature object, so that id is not reused while it is there.
_SIGNATURES: dict = {}
_MAX_SIGNATURES = 512


def inspect_grad_fn(grad_fn, introspect: bool = True) -> GradSignature:
    """How to call `grad_fn`: how many positional upstreams, and which keywords.

    Reads the code object of plain functions (cheap, and traceable by torch.compile); other
    callables go through inspect.signature. `introspect=False` (while torch.compile traces: the
    backend's `sees_closures()`): only a plain function's code is read, not its defaults.

    >>> inspect_grad_fn(lambda *args, upstream=None: None)[:3]
    (0, None, True)
    >>> inspect_grad_fn(lambda *g, **kwargs: None)[:4]
    (0, None, False, True)
    """
    if type(grad_fn) is _FunctionType:  # a def or lambda (not a bound method: no `self` to skip)
        code = grad_fn.__code__
        if not introspect:
            # While torch.compile traces, read anew, not cached (a cache written while
            # torch.compile traces a backward breaks its graph), and without the defaults:
            # torch 2.11 breaks the graph on __kwdefaults__, 2.13 fails on a __defaults__ tuple.
            # Every parameter then counts as optional: which ones are required only decides
            # between our arity error and Python's TypeError for a call that fails either way
            # (eager calls get ours), never how a call that works is made.
            names, n_positional, flags = code.co_varnames, code.co_argcount, code.co_flags
            if (n_positional <= 1 and not code.co_kwonlyargcount
                    and not flags & (_CO_VARARGS | _CO_VARKEYWORDS)
                    and (n_positional == 0 or names[0] not in _BY_KEYWORD)):
                # `def grad(dy)`: at most one positional parameter is called the same way
                # whether or not it is required (and dynamo inlines less)
                return _PLAIN[n_positional]
            positional = names[:n_positional]
            keyword_only = names[n_positional:n_positional + code.co_kwonlyargcount]
            return _grad_signature(positional, 0, bool(flags & _CO_VARARGS), keyword_only, (),
                                   bool(flags & _CO_VARKEYWORDS))
        defaults, kw_defaults = grad_fn.__defaults__, grad_fn.__kwdefaults__
        # what the signature depends on: the code, and which parameters have defaults (most
        # grad_fns have none, and their code alone is the key)
        key = id(code) if defaults is None and kw_defaults is None else (
            id(code), len(defaults) if defaults else 0, tuple(kw_defaults) if kw_defaults else ())
        entry = _SIGNATURES.get(key)
        if entry is not None and entry[0] is code:
            return entry[1]
        return _remember(key, code, _code_signature(code, len(defaults) if defaults else 0,
                                                    tuple(kw_defaults) if kw_defaults else ()))
    signature = getattr(grad_fn, "__signature__", None)
    if introspect and isinstance(signature, inspect.Signature):
        # a callable that states its signature (the R package's grad functions, made anew every
        # step with one signature object per R formals): read once per signature object
        entry = _SIGNATURES.get(id(signature))
        if entry is not None and entry[0] is signature:
            return entry[1]
        return _remember(id(signature), signature,
                         _parameters_signature(list(signature.parameters.values())))
    try:
        params = list(inspect.signature(grad_fn).parameters.values())
    except (TypeError, ValueError):
        # Builtins and some C callables have no signature: one upstream per output, positionally.
        return GradSignature(0, None, False, False)
    return _parameters_signature(params)


def _remember(key, owner, sig: GradSignature) -> GradSignature:
    """`sig`, kept in `_SIGNATURES` under `key` with the object it was read from."""
    if len(_SIGNATURES) >= _MAX_SIGNATURES:
        _SIGNATURES.clear()
    _SIGNATURES[key] = (owner, sig)
    return sig


def _parameters_signature(params: list) -> GradSignature:
    """The signature of a callable of these `inspect.Parameter`s."""
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


def _code_signature(code, n_defaults: int, kw_with_defaults: tuple) -> GradSignature:
    """The signature of a function of `code` whose last `n_defaults` positional parameters and
    whose keyword-only ones named in `kw_with_defaults` have defaults."""
    names, n_positional, flags = code.co_varnames, code.co_argcount, code.co_flags
    if (n_positional < len(_PLAIN) and not code.co_kwonlyargcount and not n_defaults
            and not flags & (_CO_VARARGS | _CO_VARKEYWORDS)
            and (n_positional == 0 or names[n_positional - 1] not in _BY_KEYWORD)):
        return _PLAIN[n_positional]  # `def grad(dy)` and the like: the common case
    positional = names[:n_positional]
    keyword_only = names[n_positional:n_positional + code.co_kwonlyargcount]
    required_kw = tuple(k for k in keyword_only if k not in kw_with_defaults)
    return _grad_signature(positional, n_positional - n_defaults, bool(flags & _CO_VARARGS),
                           keyword_only, required_kw, bool(flags & _CO_VARKEYWORDS))


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
    upstream_keyword = "upstream" in keywords
    accepts_variables = var_keyword or "variables" in keywords
    n_positional = None if var_positional else len(positional)
    return GradSignature(n_required, n_positional, upstream_keyword, accepts_variables,
                         "variables" in required_kw,
                         tuple(k for k in required_kw if k not in _BY_KEYWORD))


def upstream_arguments(grad_fn, f, output, upstream, sig: GradSignature):
    """The positional arguments and the keywords (`upstream=`) that `grad_fn`, of signature
    `sig`, is called with, by the upstream rule of `docs/convention.md`: one upstream per leaf
    of the output (tf.custom_gradient's `grad_fn(*grad_ys)`, in `tf.nest.flatten`'s order), else
    the whole structure as one argument (jax.custom_gradient's `g`; always so for one parameter
    and a dict or namedtuple output), else only `upstream=`; any other signature is a
    CustomGradientError.
    """
    if not _tree.is_leaf(output):  # a structure: one upstream per leaf
        per_leaf = tuple(_tree.flatten(upstream))
    else:
        per_leaf = (upstream,)
    n = len(per_leaf)
    lo, hi = sig.min_positional, sig.max_positional
    if hi == 1 and lo <= 1 and (isinstance(output, dict) or _tree._is_namedtuple(output)):
        # a dict or namedtuple is read by its keys, however many leaves it has (`dy["a"]`)
        positional = (upstream,)
    elif lo <= n and (hi is None or n <= hi):
        positional = per_leaf
    elif n != 1 and lo <= 1 and (hi is None or 1 <= hi):
        positional = (upstream,)
    elif lo == 0 and sig.upstream_keyword:
        positional = ()
    else:
        raise msg.grad_fn_arity(grad_fn, f, output, n)
    if sig.other_required_keywords:
        raise msg.grad_fn_arity(grad_fn, f, output, n,
                                required_keywords=sig.other_required_keywords)
    return positional, ({"upstream": upstream} if sig.upstream_keyword else {})


def call_grad_fn(grad_fn, f, output, upstream, variables: list, introspect: bool = True):
    """Calls the user's grad_fn with `upstream`, the upstream gradients in the output's
    structure, and the variables f read (`introspect`: see `inspect_grad_fn`)."""
    sig = inspect_grad_fn(grad_fn, introspect)
    if sig is _ONE and not variables and not isinstance(output, _tree.CONTAINERS):
        return grad_fn(upstream)  # `def grad(dy)` on one output: the common case
    positional, kwargs = upstream_arguments(grad_fn, f, output, upstream, sig)
    if variables:
        if not sig.accepts_variables:
            names = [getattr(v, "path", None) or getattr(v, "name", "?") for v in variables]
            raise msg.variables_not_accepted(f, grad_fn, names)
        kwargs["variables"] = list(variables)
    elif sig.needs_variables:
        raise msg.grad_fn_arity(grad_fn, f, output, len(positional), needs_variables=True)
    if introspect:
        return grad_fn(*positional, **kwargs)
    try:
        return grad_fn(*positional, **kwargs)
    except TypeError:
        # While torch.compile traces, which parameters are required was not known (see
        # inspect_grad_fn): a call that did not fit them is told apart from a TypeError inside
        # grad_fn by reading the whole signature now, on this failing path.
        # raises if unfit
        upstream_arguments(grad_fn, f, output, upstream, inspect_grad_fn(grad_fn))
        raise
