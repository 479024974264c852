"""Every message customgrad raises (custom_gradient, grad/vjp/jvp, check_gradients, ops, layers),
built in one place.

Each builder writes its message as one whole template (the problem, what was received, the fix)
and returns the exception to raise (or, where a framework needs the text itself, the text);
`tests/python/test_messages.py` pins each whole message. The only pieces shared between messages
are names: of functions (`fn_name`), of a grad_fn (`grad_fn_of`) and of a variable
(`variable_place`).

Examples:
    >>> def f(x): ...
    >>> str(not_a_pair(f, 3.0))
    'customgrad.custom_gradient: `f` must return a pair (output, grad_fn); received a float.'
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, TypeVar

from . import _tree

_CG = "customgrad.custom_gradient"


class CustomGradientError(ValueError):
    """A function given to `customgrad.custom_gradient` broke its contract.

    Attributes:
        function_name: the name of that function, as messages name it (`fn_name`), on the
            errors of grad_fn's arity and result (`GradFnArityError`, `GradFnResultError`), for
            readers that tell errors apart by class, not by their text; None where it is not
            known (tensorflow's check of a ragged or sparse input's gradient is not given the
            function).
    """

    _function_name: str | None = None

    @property
    def function_name(self) -> str | None:
        # autograph re-raises an error from inside a tf.function as a new one of its class,
        # made from a message that quotes the original, which it raises while handling it
        error: BaseException | None = self
        while isinstance(error, CustomGradientError):
            if error._function_name is not None:
                return error._function_name
            context = error.__context__
            if type(context) is not type(error) or str(context) not in str(error):
                return None
            error = context
        return None

    @function_name.setter
    def function_name(self, name: str | None) -> None:
        self._function_name = name

    # Exception's own __init__ (ValueError's does the same): TensorFlow's autograph re-raises an
    # error raised while tracing a tf.function as its own type only when the type's __init__ is
    # Exception's, so `except CustomGradientError` catches it there too (else: a StagingError).
    # Type checkers read its signature.
    if TYPE_CHECKING:
        def __init__(self, *args: object) -> None: ...
    else:
        __init__ = Exception.__init__


class GradFnArityError(CustomGradientError):
    """grad_fn's parameters do not fit the upstream gradients (docs/convention.md, how upstream
    gradients arrive), or it requires keywords customgrad does not pass."""


class GradFnResultError(CustomGradientError):
    """grad_fn returned gradients that do not fit the arguments: not one per positional argument
    (or per tensor leaf), not one per variable, a result that is not a pair (grad_xs, grad_vars)
    when it was given variables=, a gradient that is not a number, or one of the wrong shape."""


# tracebacks say customgrad.CustomGradientError (and R's conditions get that class)
CustomGradientError.__module__ = GradFnArityError.__module__ = "customgrad"
GradFnResultError.__module__ = "customgrad"

_Named = TypeVar("_Named", bound=CustomGradientError)


def fn_name(fn, qualified: bool = True) -> str:
    """How messages name a function: its qualified name (`Model.call.<locals>.grad`); with
    `qualified=False` its plain `__name__` (`grad`), as customgrad.grad/vjp/jvp name it.

    Examples:
        >>> fn_name(fn_name), fn_name(lambda: 0, qualified=False)
        ('fn_name', '<lambda>')
    """
    if not qualified:
        return str(getattr(fn, "__name__", fn))
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def signature_text(fn) -> str:
    """fn's signature as Python prints it, or "(unknown)" for callables that have none."""
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(unknown)"


def grad_fn_of(f, grad_fn) -> str:
    """How messages name a grad_fn ("grad_fn `g` of `f`"); also the `who` of a spec's
    check_gradient (see `composite_misfit`).

    Examples:
        >>> def f(x): ...
        >>> def g(dy): ...
        >>> grad_fn_of(f, g)
        'grad_fn `g` of `f`'
    """
    return f"grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}`"


def _naming(f, error: _Named) -> _Named:
    """`error`, with the name of f (the function given to custom_gradient) as its
    `function_name`, for readers that tell errors apart by class, not by their text (the R
    package's headline names f)."""
    error.function_name = fn_name(f)
    return error


def variable_place(name: str) -> str:
    """How messages name the place of a gradient for a variable f read (as "args[0]" names a
    positional argument's)."""
    return f"the variable {name}"


# -- the decorator and the arguments ------------------------------------------------------------

def unsupported_backend(name: str, names) -> NotImplementedError:
    return NotImplementedError(
        f"customgrad: the Keras backend {name!r} is not supported; expected one of {list(names)}.")


def not_callable(f) -> TypeError:
    return TypeError(
        f"{_CG}: expected a callable f(*args) returning (output, grad_fn); received "
        f"{_tree.describe(f)}.")


def hidden_input(f, keyword: str | None = None, closed_over: str | None = None,
                 through: str | None = None) -> CustomGradientError:
    """A tensor being differentiated reaches f by `keyword`, as the `closed_over` name, or as
    the attribute `through` (`holder.w`) of an object f reaches (or, with none of them, some way
    customgrad cannot name)."""
    found = (f"the tensor passed by keyword `{keyword}`" if keyword is not None
             else f"the tensor `{closed_over}` it closes over" if closed_over is not None
             else f"the tensor `{through}`, read through an object" if through is not None
             else "a tensor it did not receive as an argument (read through an object)")
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` uses {found}, which is being differentiated; a custom gradient "
        f"defines gradients for the positional arguments only (grad_fn returns one per positional "
        f"argument), so this one would be lost. Pass it as a positional argument and return its "
        f"gradient from grad_fn.")


def foreign_value(framework: str, backend: str, who: str, value, where: str) -> CustomGradientError:
    """`who` (f's name in backquotes, or `grad_fn_of`) returned a value of another framework as
    `where` (a path such as "output[1]", or `variable_place`). A plain CustomGradientError from
    grad_fn too, not a GradFnResultError: what is wrong is the framework it computed with, as
    for f's output, not the gradient's fit to the arguments."""
    return CustomGradientError(
        f"{_CG}: {who} returned {_tree.describe(value)} as {where}, but the Keras backend is "
        f"{backend}; a custom-gradient function and its grad_fn must compute with keras.ops (or "
        f"{backend}'s own ops). Replace the {framework} ops (e.g. tf.exp -> keras.ops.exp), or "
        f"set KERAS_BACKEND={framework}.")


def raised_while_running(framework: str, backend: str, f) -> CustomGradientError:
    """Another framework raised an error while f ran."""
    return CustomGradientError(
        f"{_CG}: {framework} raised the error above while `{fn_name(f)}` ran, but the Keras "
        f"backend is {backend}; a custom-gradient function and its grad_fn must compute with "
        f"keras.ops (or {backend}'s own ops). Replace the {framework} ops (e.g. tf.exp -> "
        f"keras.ops.exp), or set KERAS_BACKEND={framework}.")


# -- what f returns -----------------------------------------------------------------------------

def not_a_pair(f, result) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` must return a pair (output, grad_fn); received "
        f"{_tree.describe(result)}.")


def grad_fn_not_callable(f, grad_fn) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: the second element returned by `{fn_name(f)}` must be a callable grad_fn; "
        f"received {_tree.describe(grad_fn)}.")


def loss_in_forward(f, why: str) -> CustomGradientError:
    """A `layer.add_loss` inside f where the backend cannot differentiate it (`why`)."""
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` added a loss (layer.add_loss) inside its forward; {why}. Add the "
        f"loss outside the custom-gradient function.")


# -- calling grad_fn ----------------------------------------------------------------------------

def grad_fn_arity(grad_fn, f, output, n_upstream: int, required_keywords=(),
                  needs_variables: bool = False) -> GradFnArityError:
    """grad_fn cannot take the upstream gradients; or it requires keyword arguments customgrad
    does not pass (`required_keywords`), or `variables` where f read none (`needs_variables`)."""
    plural = "s" if n_upstream != 1 else ""
    if required_keywords:
        also = (f" It also requires the keyword argument(s) {list(required_keywords)}, which "
                f"customgrad does not pass.")
    elif needs_variables:
        also = (f" It requires `variables`, but `{fn_name(f)}` read no trainable variable: give "
                f"that parameter a default (variables=None).")
    else:
        also = ""
    return _naming(f, GradFnArityError(
        f"{_CG}: {grad_fn_of(f, grad_fn)} has the signature {signature_text(grad_fn)}, so it "
        f"cannot be called with the upstream gradients of {_tree.describe(output)} ({n_upstream} "
        f"upstream gradient{plural}). grad_fn must take one positional parameter per output leaf "
        f"({n_upstream}), or one for the whole output's upstream structure, or *args, or only "
        f"the keyword `upstream`.{also}"))


def variables_not_accepted(f, grad_fn, names: list) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` read the trainable variables {names}, so its grad_fn "
        f"`{fn_name(grad_fn)}` must accept a `variables` keyword argument and return (grad_xs, "
        f"grad_vars); received a grad_fn with signature {signature_text(grad_fn)}. Without it "
        f"these variables would get no gradient.")


# -- what grad_fn returns -----------------------------------------------------------------------

def variables_result_not_a_pair(f, grad_fn, result) -> GradFnResultError:
    return _naming(f, GradFnResultError(
        f"{_CG}: {grad_fn_of(f, grad_fn)} was given variables= and must return a pair "
        f"(grad_xs, grad_vars); received {_tree.describe(result)}."))


def grad_vars_count(f, grad_fn, n_variables: int, grad_vars) -> GradFnResultError:
    return _naming(f, GradFnResultError(
        f"{_CG}: {grad_fn_of(f, grad_fn)} must return one gradient per variable "
        f"({n_variables}) in grad_vars; received {_tree.describe(grad_vars)}."))


def grad_xs_structure(f, grad_fn, args: tuple, n_tensors: int, grad_xs,
                      mismatch) -> GradFnResultError:
    described = ", ".join(_tree.describe(a) for a in args)
    return _naming(f, GradFnResultError(
        f"{_CG}: {grad_fn_of(f, grad_fn)} must return one gradient per positional argument "
        f"({len(args)}: {described}) or a flat sequence of {n_tensors} (one per tensor leaf); "
        f"received {_tree.describe(grad_xs)} ({mismatch})."))


def gradient_shape(f, grad_fn, shape, where: str, expected_shape) -> GradFnResultError:
    return _naming(f, GradFnResultError(
        f"{_CG}: {grad_fn_of(f, grad_fn)} returned a gradient of shape {tuple(shape)} for "
        f"{where}, which has shape {tuple(expected_shape)}; gradients must have their input's "
        f"shape (customgrad never broadcasts or sums them for you)."))


def gradient_not_a_number(f, grad_fn, grad, where: str) -> GradFnResultError:
    return _naming(f, GradFnResultError(
        f"{_CG}: {grad_fn_of(f, grad_fn)} returned {_tree.describe(grad)} as the gradient for "
        f"{where}; a gradient must be a tensor, a number or a numeric numpy value (or None for "
        f"no gradient)."))


def composite_misfit(who: str, grad, detail: str, where: str, spec, expected: str) -> str:
    """(text) A gradient that does not fit a ragged or sparse input."""
    return (f"{_CG}: {who} returned {_tree.describe(grad)}{detail} for {where}, "
            f"{_tree.describe(spec)}; expected {expected}.")


# -- forward mode -------------------------------------------------------------------------------

def grad_fn_not_linear(f, grad_fn, why: str) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: the grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}` is not linear in its "
        f"upstream gradient ({why}), so it defines no forward-mode derivative: a JVP is derived "
        f"from grad_fn as the transpose of a linear map, and there is none here. Use reverse mode "
        f"(customgrad.grad, customgrad.vjp) for this function.")


# -- backend-specific limits --------------------------------------------------------------------

def torch_second_backward() -> RuntimeError:
    return RuntimeError(
        f"{_CG}: trying to backward through the graph a second time; its grad_fn and the tensors "
        f"it holds were freed after the first backward. Pass retain_graph=True to the first "
        f"backward to keep them.")


def torch_forward_over_forward(f) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` is differentiated forward over forward (nested torch.func.jvp "
        f"or jacfwd); torch does not differentiate the JVP rule of an autograd.Function, so the "
        f"second derivative would be silently zero. Take second derivatives forward over reverse "
        f"(torch.func.hessian, jacfwd(jacrev(f))) or reverse over reverse.")


def torch_modified_in_place(f, name: str, shape, version: int, now: int) -> RuntimeError:
    return RuntimeError(
        f"{_CG}: `{name}`, a tensor the grad_fn of `{fn_name(f)}` uses (shape {tuple(shape)}), "
        f"was modified by an in-place operation after the forward (version {version}, now "
        f"{now}), so the gradient would be wrong. Modify a clone, or compute the new value out "
        f"of place.")


def torch_hidden_leaves(f, grad_fn, described: str) -> CustomGradientError:
    """`described`: the tensors, as "the parameter 'w' (shape (2,))" or "a tensor of shape
    (2,)", joined by commas."""
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` used tensors that require grad without receiving them as "
        f"arguments: {described}. Its grad_fn `{fn_name(grad_fn)}` does not accept a `variables` "
        f"keyword argument, so they would get no gradient. Pass them to `{fn_name(f)}` as "
        f"positional arguments, or let grad_fn accept `variables=` (it then receives them, after "
        f"any keras.Variables read, and returns (grad_xs, grad_vars)).")


def torch_hidden_computed(f, ops: list) -> CustomGradientError:
    """`ops`: the names of the autograd nodes (made before f ran) through which f's outputs
    depend on tensors f did not receive."""
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` used tensors that require grad, computed before it ran, without "
        f"receiving them as arguments (its outputs depend on them through {', '.join(ops)}); "
        f"customgrad did not find them among the objects `{fn_name(f)}` closes over, so they "
        f"would get no gradient. Pass them to `{fn_name(f)}` as positional arguments (a "
        f"parameter that is a view, as FSDP1 makes a module's weights, is found when f reads it "
        f"from a module it closes over).")


def jax_grad_fn_assigned(f, n: int) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: grad_fn of `{fn_name(f)}` assigned {n} variable(s); on jax inside a stateless "
        f"scope (model.fit) an assignment cannot leave the backward pass. Assign in the forward "
        f"instead.")


def jax_forward_mode_assigned(f, n: int) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` (forward_mode=True) assigned {n} variable(s) inside a stateless "
        f"scope; on jax such updates cannot leave a custom_jvp function. Use forward_mode=False "
        f"(the default) for functions that assign variables.")


class JaxHiddenTracerError(CustomGradientError):
    """On jax, f reaches a tensor being differentiated through an object it closes over, where
    a transformation traces its call (so it runs inside a jax.custom_vjp, which cannot use that
    tensor of the enclosing transformation)."""


def jax_hidden_tracer(f, names: list) -> JaxHiddenTracerError:
    """`names`: the tensors being differentiated f reaches through objects it closes over
    (`h.t`, `holder[0]`, `self.w`); empty where jax found one that no walk of those objects
    names (deeper: a bound method's `self`, a generator, a partial's argument)."""
    found = (", ".join(f"`{name}`" for name in names) + ", a tensor being differentiated, "
             "through an object it closes over (an attribute, or an element of a list or dict)"
             if names else "a tensor being differentiated through an object, a bound method, "
             "a partial, a generator or another route")
    return JaxHiddenTracerError(
        f"{_CG}: `{fn_name(f)}` reaches {found} instead of receiving it as an argument. On "
        f"jax, where a transformation traces the call (jax.grad "
        f"or jax.vjp of its arguments too, jacrev, vmap or jit of grad), it runs inside a "
        f"jax.custom_vjp, which cannot use such a value of the enclosing transformation. Pass it "
        f"to `{fn_name(f)}` as a positional argument and return its gradient from grad_fn.")


class JaxForwardModeError(CustomGradientError, TypeError):
    """On jax, forward mode (jax.jvp, jax.jacfwd) of a custom-gradient function built for
    reverse mode only; a TypeError too, as jax's own error for it is."""


def jax_forward_mode_needs_opt_in(f, error) -> JaxForwardModeError:
    """`error`: jax's own TypeError, quoted."""
    return JaxForwardModeError(
        f"{_CG}: forward mode (jax.jvp, jax.jacfwd) reached `{fn_name(f)}`, which is built for "
        f"reverse mode only; on jax, forward mode needs customgrad.custom_gradient(..., "
        f"forward_mode=True), which derives it from grad_fn ({error})")


def tf_composite_refused(what: str, f, leaf, path: str, supported: str,
                         hint: str) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: {what} `{fn_name(f)}` is {_tree.describe(leaf)} at {path}; on tensorflow a "
        f"custom gradient supports {supported} there{hint}.")


def tf_composite_forward_mode(f) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` has ragged or sparse arguments and a tf.autodiff."
        f"ForwardAccumulator opened inside a tf.function watches it; forward mode of composite "
        f"tensors is supported in eager mode only.")


def tf_reference_variable(f) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` uses a reference (non-resource) variable, which a custom "
        f"gradient cannot route to grad_fn; create it as a resource variable (TensorFlow 2's "
        f"default; use_resource=True in a variable_scope).")


def tf_keras_variables_in_grad_fn(f, error, names: list) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: the grad_fn of `{fn_name(f)}` raised {type(error).__name__} ({error}) while "
        f"variables= held the keras.Variables {names}. customgrad passes the keras.Variables f "
        f"read, where tf.custom_gradient passes tf.Variables; TensorFlow's own APIs "
        f"(GradientTape.watch, .ref(), watched_variables()) take the tf.Variable a "
        f"keras.Variable holds: `v.value` on tensorflow. For a grad_fn written for "
        f"tf.custom_gradient, decorate f with customgrad.custom_gradient(f, tf_variables=True), "
        f"which passes it the tf.Variables.")


def tf_vjp_composite(value, supported: str) -> TypeError:
    return TypeError(
        f"customgrad.vjp: cannot differentiate with respect to a {type(value).__name__}; on "
        f"tensorflow the values may be {supported}.")


# -- customgrad.grad, value_and_grad, vjp, jvp, hvp (they name f by its plain __name__) ------------

def _plain(f) -> str:
    return fn_name(f, qualified=False)


def aux_not_a_pair(who: str, f, result) -> TypeError:
    return TypeError(
        f"{who}: with has_aux=True, `{_plain(f)}` must return a pair (output, aux); received "
        f"{_tree.describe(result)}.")


def no_autodiff(who: str, backend: str, what: str) -> NotImplementedError:
    """`what`: "gradients" or "derivatives"."""
    return NotImplementedError(
        f"{who}: the {backend!r} Keras backend has no autodiff; {what} need jax, tensorflow or "
        f"torch.")


def cotangent_structure(mismatch) -> ValueError:
    return ValueError(
        f"customgrad.vjp: the cotangents must have the structure of the outputs; {mismatch}")


def bad_argnums(argnums) -> TypeError:
    return TypeError(
        f"customgrad.value_and_grad: argnums must be an int or a non-empty tuple of ints; "
        f"received {argnums!r}.")


def argnums_out_of_range(argnums, n: int, f, n_args: int) -> ValueError:
    return ValueError(
        f"customgrad.grad: argnums {argnums!r} refers to positional argument {n}, but "
        f"`{_plain(f)}` was called with {n_args}.")


def not_a_scalar(f, out) -> TypeError:
    return TypeError(
        f"customgrad.grad: `{_plain(f)}` must return a float scalar (shape ()) to take its "
        f"gradient; received {_tree.describe(out)}. Use customgrad.vjp for non-scalar outputs.")


def nothing_to_differentiate(n: int, f, arg) -> TypeError:
    return TypeError(
        f"customgrad.grad: argument {n} of `{_plain(f)}` must contain a floating-point value to "
        f"differentiate with respect to; received {_tree.describe(arg)}. Pass floats (3.0, "
        f"np.float32(3.0), a float tensor).")


def primals_not_a_tuple(who: str, f, primals, non_empty: bool = False) -> TypeError:
    kind = "a non-empty tuple" if non_empty else "a tuple"
    return TypeError(
        f"{who}: primals must be {kind} of the positional arguments of `{_plain(f)}`; received "
        f"{_tree.describe(primals)}.")


def tangent_structure(primals, tangents, mismatch) -> ValueError:
    return ValueError(
        f"customgrad.jvp: tangents must have the structure of primals "
        f"({_tree.describe(primals)}); received {_tree.describe(tangents)} ({mismatch}).")


def tangent_shape(where: str, shape, primal_shape) -> ValueError:
    return ValueError(
        f"customgrad.jvp: the tangent of {where} has shape {tuple(shape)}, but the primal has "
        f"shape {tuple(primal_shape)}; each tangent must have its primal's shape.")


def jvp_of_reverse_only(f, error) -> CustomGradientError:
    return CustomGradientError(
        f"customgrad.jvp: `{_plain(f)}` calls a custom-gradient function built for reverse mode "
        f"only; on jax, forward mode needs customgrad.custom_gradient(..., forward_mode=True) "
        f"({error})")


# -- customgrad.check_gradients -----------------------------------------------------------------

_CHECK = "customgrad.check_gradients"


def check_no_float_argument(f, args) -> ValueError:
    return ValueError(
        f"{_CHECK}: `{fn_name(f)}` has no floating-point tensor among its positional arguments; "
        f"received {[_tree.describe(a) for a in args]}.")


def check_composite_argument(where: str, f, spec) -> ValueError:
    return ValueError(
        f"{_CHECK}: {where} of `{fn_name(f)}` is {_tree.describe(spec)}; finite differences need "
        f"dense tensors. Check a function of its (flat) values instead, one that rebuilds it "
        f"inside.")


def check_option(name: str, expected: str, value) -> ValueError:
    """`expected`: as "1 or 2", "a non-empty tuple of 'rev' and 'fwd'"."""
    return ValueError(f"{_CHECK}: {name} must be {expected}; received {value!r}.")


def check_jacobian_too_large(n_in: int, n_out: int) -> ValueError:
    return ValueError(
        f"{_CHECK}: jacobian=True is for small inputs (inputs x outputs <= 4096); received "
        f"{n_in} input and {n_out} output elements.")


def check_not_custom(f) -> ValueError:
    return ValueError(
        f"{_CHECK}: against='autodiff' needs a function decorated with "
        f"customgrad.custom_gradient; received `{fn_name(f)}`, which is not.")


def check_failed(report) -> str:
    """(text) The summary line of a failed check, then the whole report."""
    first = report.failures[0]
    return (f"{_CHECK}: the gradient of `{report.function}` is wrong: {first.name} failed at "
            f"{first.where}: error {first.error:.4g} > allowed {first.allowed:.4g} "
            f"({len(report.failures)} of {len(report.checks)} checks failed).\n{report}")


# -- customgrad.ops and customgrad.layers: their options ----------------------------------------

def clip_bounds(min_value, max_value) -> ValueError:
    return ValueError(
        f"customgrad.ops.clip_gradient: min_value must be <= max_value; received "
        f"min_value={min_value}, max_value={max_value}.")


def clip_norm(max_norm) -> ValueError:
    return ValueError(
        f"customgrad.ops.clip_gradient_norm: max_norm must be > 0; received {max_norm}.")


def layer_not_a_number(layer: str, name: str, value) -> TypeError:
    return TypeError(f"customgrad.layers.{layer}: {name} must be a number; received {value!r}.")


def layer_not_positive(layer: str, name: str, value) -> ValueError:
    return ValueError(f"customgrad.layers.{layer}: {name} must be > 0; received {value!r}.")


def clip_layer_without_bounds() -> ValueError:
    return ValueError(
        "customgrad.layers.ClipGradient: give min_value and max_value, max_norm, or both; "
        "received none of them.")


def clip_layer_half_bounds(min_value, max_value) -> ValueError:
    return ValueError(
        f"customgrad.layers.ClipGradient: min_value and max_value go together; received "
        f"min_value={min_value!r}, max_value={max_value!r}.")


def quantizer_levels(levels) -> ValueError:
    return ValueError(
        f"customgrad.layers.StraightThroughQuantizer: levels must be an int >= 2; received "
        f"{levels!r}.")


def quantizer_range(min_value, max_value) -> ValueError:
    return ValueError(
        f"customgrad.layers.StraightThroughQuantizer: max_value must be > min_value; received "
        f"min_value={min_value!r}, max_value={max_value!r}.")


# -- remat and patch_keras -----------------------------------------------------------------------

def remat_not_callable(f) -> TypeError:
    return TypeError(
        f"customgrad.remat: expected a callable f(*args, **kwargs) whose forward is recomputed in "
        f"the backward; received {_tree.describe(f)}.")


def remat_framework_variables(f, names: list) -> CustomGradientError:
    return CustomGradientError(
        f"customgrad.remat: `{fn_name(f)}` read the trainable variables {names}, which are not "
        f"keras.Variables; the recomputation can give gradients to f's positional arguments and "
        f"to the keras.Variables it reads only. Pass them to f as arguments, or make them "
        f"keras.Variables.")


# -- custom_gradient's options ---------------------------------------------------------------------

def bool_option(where: str, name: str, value) -> TypeError:
    return TypeError(
        f"{where}: {name} must be True or False; received {value!r} ({type(value).__name__}).")


def tf_variables_off_tensorflow(f, backend: str) -> ValueError:
    return ValueError(
        f"{_CG}: tf_variables=True (for `{fn_name(f)}`) expects the tensorflow backend, whose "
        f"grad_fn can receive the tf.Variables f read, as tf.custom_gradient passes them; "
        f"received the {backend} backend, which has no tf.Variables. Leave tf_variables out: "
        f"variables= then holds the keras.Variables f read, on every backend.")


def patch_tensorflow_off_tensorflow(backend: str) -> ValueError:
    return ValueError(
        f"customgrad.patch_tensorflow() expects the tensorflow Keras backend, on which "
        f"customgrad.custom_gradient takes TensorFlow tensors as tf.custom_gradient does; "
        f"received the {backend} backend. Set KERAS_BACKEND=tensorflow before Keras is "
        f"imported, or use customgrad.patch_keras() to route keras.ops.custom_gradient.")


class TorchHiddenTangentError(CustomGradientError):
    """On torch, in forward mode, f reads a tensor carrying a tangent through an object it
    closes over, and its grad_fn cannot take that tensor's gradient (no `variables=`)."""


def torch_hidden_tangent(f, grad_fn, names: list) -> TorchHiddenTangentError:
    """`names`: the tensors carrying tangents that f reaches through objects it closes over
    (`h.t`, `holder[0]`, `self.w`); empty where f's outputs carry a tangent that nothing f
    received carries, and no walk of those objects names the tensor it came from."""
    if names:
        found = (", ".join(f"`{name}`" for name in names) + " through an object it closes over "
                 "(an attribute, an element of a list or dict, a module's parameter) instead of "
                 "receiving it as an argument, and it carries")
        fix = (f"Pass it to `{fn_name(f)}` as a positional argument, or let grad_fn accept "
               f"`variables=` (it then receives it, after any keras.Variables read, and returns "
               f"(grad_xs, grad_vars)).")
        why = (f"and its grad_fn `{fn_name(grad_fn)}` does not accept a `variables` keyword "
               f"argument, so that tangent would be lost.")
    else:
        found = ("a tensor it did not receive as an argument (through an object, a bound "
                 "method, a partial, a generator, ...) that carries")
        fix = f"Pass it to `{fn_name(f)}` as a positional argument."
        why = "and customgrad cannot tell which tensor it is, so its tangent would be lost."
    return TorchHiddenTangentError(
        f"{_CG}: `{fn_name(f)}` reaches {found} a forward-mode tangent (torch.func.jvp, "
        f"jacfwd, torch.autograd.forward_ad). The JVP is derived from grad_fn, {why} {fix}")


def torch_jvp_over_transform(f, kinds: list) -> CustomGradientError:
    """`kinds`: the names of the torch.func transforms nested inside forward mode, innermost
    first (`Vmap`)."""
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` is differentiated in forward mode (torch.func.jvp, jacfwd) "
        f"over a {', '.join(kinds)} transform nested inside it; torch runs the JVP rule outside "
        f"that transform, and customgrad can derive it from grad_fn there only for grad "
        f"transforms (torch.func.hessian, jacfwd(jacrev(f))). Apply the {', '.join(kinds)} "
        f"outside the forward-mode transform, or differentiate in reverse mode (jacrev).")
