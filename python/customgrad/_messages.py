"""Every message customgrad's custom-gradient machinery raises, built in one place.

Each builder returns the exception to raise (or, where a framework needs the text itself, the
text); `tests/python/test_messages.py` pins each whole message. Names of functions come from one
helper, `fn_name`.

>>> def f(x): ...
>>> str(not_a_pair(f, 3.0))
'customgrad.custom_gradient: `f` must return a pair (output, grad_fn); received a float.'
"""

from __future__ import annotations

import inspect

from . import _tree

_CG = "customgrad.custom_gradient"


class CustomGradientError(ValueError):
    """A function given to `customgrad.custom_gradient` broke its contract."""


CustomGradientError.__module__ = "customgrad"  # tracebacks say customgrad.CustomGradientError


def fn_name(fn, qualified: bool = True) -> str:
    """How messages name a function: its qualified name (`Model.call.<locals>.grad`); with
    `qualified=False` its plain `__name__` (`grad`), as customgrad.grad/vjp/jvp name it.

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


def _grad_fn_of(grad_fn, f) -> str:
    return f"grad_fn `{fn_name(grad_fn)}` of `{fn_name(f)}`"


# -- the decorator and the arguments ------------------------------------------------------------

def unsupported_backend(name: str, names) -> NotImplementedError:
    return NotImplementedError(
        f"customgrad: the Keras backend {name!r} is not supported; expected one of {list(names)}.")


def not_callable(f) -> TypeError:
    return TypeError(
        f"{_CG}: expected a callable f(*args) returning (output, grad_fn); received "
        f"{_tree.describe(f)}.")


def forward_mode_option(where: str, value) -> TypeError:
    return TypeError(
        f"{where}: forward_mode must be True or False; received {value!r} "
        f"({type(value).__name__}).")


def hidden_input(f, found: str) -> CustomGradientError:
    """`found` names the input: "the tensor passed by keyword `k`" or "the tensor `t` it closes
    over"."""
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` uses {found}, which is being differentiated; a custom gradient "
        f"defines gradients for the positional arguments only (grad_fn returns one per positional "
        f"argument), so this one would be lost. Pass it as a positional argument and return its "
        f"gradient from grad_fn.")


def foreign_framework(framework: str, backend: str, what: str) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: {what}, but the Keras backend is {backend}; a custom-gradient function and its "
        f"grad_fn must compute with keras.ops (or {backend}'s own ops). Replace the {framework} "
        f"ops (e.g. tf.exp -> keras.ops.exp), or set KERAS_BACKEND={framework}.")


def foreign_value(what: str, value, where: str) -> str:
    """The `what` of `foreign_framework` for a value of another framework found at `where`."""
    return f"{what} {_tree.describe(value)} as {where}"


def raised_while_running(framework: str, f) -> str:
    """The `what` of `foreign_framework` for an error another framework raised inside f."""
    return f"{framework} raised the error above while `{fn_name(f)}` ran"


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

def grad_fn_arity(grad_fn, f, output, n_upstream: int, extra: str = "") -> CustomGradientError:
    """grad_fn cannot take the upstream gradients; `extra`: one more sentence, or ""."""
    plural = "s" if n_upstream != 1 else ""
    return CustomGradientError(
        f"{_CG}: {_grad_fn_of(grad_fn, f)} has the signature {signature_text(grad_fn)}, so it "
        f"cannot be called with the upstream gradients of {_tree.describe(output)} ({n_upstream} "
        f"upstream gradient{plural}). grad_fn must take one positional parameter per output "
        f"({n_upstream}), or one for the whole output's upstream structure, or *args, or only "
        f"the keyword `upstream`.{extra}")


def required_keywords_extra(keywords) -> str:
    return (f" It also requires the keyword argument(s) {list(keywords)}, which customgrad does "
            f"not pass.")


def needs_variables_extra(f) -> str:
    return (f" It requires `variables`, but `{fn_name(f)}` read no trainable variable: give that "
            f"parameter a default (variables=None).")


def variables_not_accepted(f, grad_fn, names: list) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: `{fn_name(f)}` read the trainable variables {names}, so its grad_fn "
        f"`{fn_name(grad_fn)}` must accept a `variables` keyword argument and return (grad_xs, "
        f"grad_vars); received a grad_fn with signature {signature_text(grad_fn)}. Without it "
        f"these variables would get no gradient.")


# -- what grad_fn returns -----------------------------------------------------------------------

def variables_result_not_a_pair(f, grad_fn, result) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: {_grad_fn_of(grad_fn, f)} was given variables= and must return a pair "
        f"(grad_xs, grad_vars); received {_tree.describe(result)}.")


def grad_vars_count(f, grad_fn, n_variables: int, grad_vars) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: {_grad_fn_of(grad_fn, f)} must return one gradient per variable "
        f"({n_variables}) in grad_vars; received {_tree.describe(grad_vars)}.")


def grad_xs_structure(f, grad_fn, args: tuple, n_tensors: int, grad_xs,
                      mismatch) -> CustomGradientError:
    expected = (
        f"one gradient per positional argument ({len(args)}: "
        f"{', '.join(_tree.describe(a) for a in args)}) or a flat sequence of {n_tensors} "
        f"(one per tensor leaf)")
    return CustomGradientError(
        f"{_CG}: {_grad_fn_of(grad_fn, f)} must return {expected}; received "
        f"{_tree.describe(grad_xs)} ({mismatch}).")


def gradient_shape(f, grad_fn, shape, where: str, expected_shape) -> CustomGradientError:
    return CustomGradientError(
        f"{_CG}: {_grad_fn_of(grad_fn, f)} returned a gradient of shape {tuple(shape)} for "
        f"{where}, which has shape {tuple(expected_shape)}; gradients must have their input's "
        f"shape (customgrad never broadcasts or sums them for you).")


def gradient_returned(f, grad_fn) -> str:
    """Who returned a gradient, for `foreign_framework` and composite specs."""
    return _grad_fn_of(grad_fn, f)


def variable_place(name: str) -> str:
    """Where a gradient goes, for a variable f read."""
    return f"the variable {name}"


def composite_misfit(who: str, grad, detail: str, where: str, spec, expected: str) -> str:
    """(text) A gradient that does not fit a ragged or sparse input."""
    return (f"{_CG}: {who} returned {_tree.describe(grad)}{detail} for {where}, "
            f"{_tree.describe(spec)}; expected {expected}.")


# -- forward mode -------------------------------------------------------------------------------

def nonlinear(f, grad_fn, why: str) -> CustomGradientError:
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
