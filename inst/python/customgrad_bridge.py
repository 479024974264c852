"""The bridge between R (reticulate) and customgrad: custom gradients whose forward and grad
functions are R functions.

The R grad function reaches Python as a callable whose signature mirrors its R formals (`...` is
`*args`, formals after `...` are keyword-only, a default stays a default), so that customgrad's
one upstream rule (`customgrad._convention`) reads it as it reads a Python function. R keeps no
copy of that rule.
"""

from __future__ import annotations

import inspect
import keyword

import customgrad

_P = inspect.Parameter


class RSignature(inspect.Signature):
    """A signature that prints as the R function it mirrors: `function(dy1, dy2 = NULL)`."""

    __slots__ = ("r_text",)

    def __str__(self):
        return self.r_text


_SIGNATURES: dict = {}  # (formals, has_default) -> RSignature; grad functions repeat every step


def r_signature(formals, has_default) -> RSignature:
    """The Python signature of an R function with these formal names (and defaults).

    >>> str(r_signature(["...", "upstream"], [False, True]))
    'function(..., upstream = NULL)'
    >>> r_signature(["...", "upstream"], [False, True]).parameters["upstream"].kind.name
    'KEYWORD_ONLY'
    """
    key = (tuple(formals), tuple(bool(d) for d in has_default))
    sig = _SIGNATURES.get(key)
    if sig is None:
        params, text, after_dots = [], [], False
        for i, (name, default) in enumerate(zip(*key)):
            text.append(name + (" = NULL" if default else ""))
            if name == "...":
                params.append(_P("args", _P.VAR_POSITIONAL))
                after_dots = True
                continue
            py_name = name if name.isidentifier() and not keyword.iskeyword(name) else f"arg{i + 1}"
            kind = _P.KEYWORD_ONLY if after_dots else _P.POSITIONAL_OR_KEYWORD
            params.append(_P(py_name, kind, default=None if default else _P.empty))
        sig = RSignature(params)
        sig.r_text = f"function({', '.join(text)})"
        _SIGNATURES[key] = sig
    return sig


_ABSENT = object()  # no `upstream=` in a call


class RGradFn:
    """An R grad function as customgrad sees it: called with what its R formals ask for.

    `r_fn` is the R function itself (the capsule reticulate keeps of it), called through
    `r_call(r_fn, *args, **kwargs)`: one R function, made once per `custom_gradient()`, that
    converts the result and keeps R errors for the R caller, so no R wrapper is made and handed to
    Python every step. A call that gives the one upstream gradient both positionally and as
    `upstream=` (keras3's `function(..., upstream = NULL)` on a single output) goes through
    `r_call_upstream_twice(r_fn, upstream)` instead, which makes the same R call: the tensor then
    crosses into R, and is converted there, once rather than twice.
    """

    __slots__ = ("r_fn", "r_call", "r_call_upstream_twice", "__signature__", "__name__",
                 "__qualname__")

    def __init__(self, r_fn, signature, name, r_call, r_call_upstream_twice):
        self.r_fn = r_fn
        self.r_call = r_call
        self.r_call_upstream_twice = r_call_upstream_twice
        self.__signature__ = signature
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and len(kwargs) == 1 and kwargs.get("upstream", _ABSENT) is args[0]:
            return self.r_call_upstream_twice(self.r_fn, args[0])
        return self.r_call(self.r_fn, *args, **kwargs)


def custom_gradient(r_forward, name="f", forward_mode=False, *, r_split, r_signature_of, r_call,
                    r_call_upstream_twice):
    """customgrad.custom_gradient for an R forward.

    `r_forward(*args)` (an R function) returns what the user's f returned when that is a Python
    tuple (keras3's `tuple(output, grad)`), else `[output, grad]`, checked and converted by R. The
    common tuple, a tensor (which R's conversion would leave as it is) and a callable reticulate
    made of an R function, is taken apart here, so R makes no call into Python for it; any other
    tuple goes back to `r_split(res, split_pair(res))` (R's check and conversion, errors
    included; the pair comes along so that R need not call back into Python for it). In
    `[output, grad]`, grad is either a Python callable (used as it is) or `[r_grad, signature]`:
    a callable made of the R grad function and the signature `r_signature()` made of its formals.
    `r_signature_of(r_fn)` (R) gives that signature for an R function, and `r_call` and
    `r_call_upstream_twice` call one (see `RGradFn`).
    """
    from keras import ops

    is_tensor = ops.is_tensor
    grad_name = f"{name}.grad"

    def forward(*args):
        res = r_forward(*args)
        if isinstance(res, tuple):
            r_grad = r_function_of(res[1]) if len(res) == 2 and is_tensor(res[0]) else None
            if r_grad is not None:
                return res[0], RGradFn(r_grad, r_signature_of(r_grad), grad_name, r_call,
                                       r_call_upstream_twice)
            res = r_split(res, split_pair(res))
        output, grad = res
        if isinstance(grad, (list, tuple)):
            r_grad, signature = grad
            grad = RGradFn(r_function_of(r_grad), signature, grad_name, r_call,
                           r_call_upstream_twice)
        return output, grad

    forward.__name__ = forward.__qualname__ = name
    return customgrad.custom_gradient(forward, forward_mode=forward_mode)


def split_pair(res):
    """`(output, R function behind grad)` of a `tuple(output, grad)` made in R (None in the second
    place when grad is not an R function), or None when `res` is not a pair. It goes to R with
    the tuple (`r_split`), where taking the tuple apart item by item would be four crossings."""
    if not isinstance(res, tuple) or len(res) != 2:
        return None
    return res[0], r_function_of(res[1])


def r_function_of(fn):
    """The capsule of the R function behind a callable reticulate made of it (keras3's and
    reticulate's `tuple()` convert an R grad function so), or None for any other callable."""
    if getattr(fn, "__module__", None) != "rpytools.call" or not getattr(fn, "__closure__", None):
        return None
    return fn.__closure__[0].cell_contents


def shape(x):
    """The static shape as a list of ints (None for unknown dimensions), on every backend."""
    return [None if d is None else int(d) for d in tuple(x.shape)]

