"""`custom_gradient`, the public entry point: the decorator, the refusal of hidden inputs, the
symbolic call (keras.Input), and the error for another framework's ops inside f.

A call reads core -> backend -> core: `decorated` reads the arguments into a `_call.Arguments` and
hands it to the backend module of the active Keras backend (`customgrad.backends.<name>`), whose
`call` runs f through `Arguments.forward` and wires a `_call.Link` of the returned `_call.Backward`
(which calls grad_fn and checks its result) into its autodiff system.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

import keras
from keras.src.backend import any_symbolic_tensors

from . import _messages as msg, _tree
from ._autograph import keep_autograph_off_customgrad, not_converted
from ._call import Arguments
from ._closure import closure_cells
from ._forward import call_forward_mode
from ._messages import fn_name
from ._tracebacks import without_own_frames
from ._variables import install as install_variable_recorder
from ._backend_names import AUTODIFF, NAMES

if keras.backend.backend() == "tensorflow":
    # AutoGraph converts no customgrad function a user's tf.function reaches (_autograph.py)
    keep_autograph_off_customgrad()

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

P = ParamSpec("P")
R = TypeVar("R")

_backend_modules: dict = {}


def backend_module(name: str | None = None) -> ModuleType:
    """The customgrad module for the active Keras backend (looked up at call time)."""
    name = name or keras.backend.backend()
    module = _backend_modules.get(name)
    if module is None:
        if name not in NAMES:
            raise msg.unsupported_backend(name, NAMES)
        module = importlib.import_module(f"{__package__}.backends.{name}")
        _backend_modules[name] = module
    return module


def _foreign_framework_in(error) -> str | None:
    """The framework other than the active backend's whose code raised `error` (tf.exp on a
    torch tensor that requires grad, say), read off the traceback; None if there is none."""
    backend = keras.backend.backend()
    tb = error.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "").partition(".")[0]
        framework = _tree.FRAMEWORKS.get(module)
        if framework in AUTODIFF and framework != backend:
            return framework
        tb = tb.tb_next
    return None


def refuse_hidden_inputs(f, kwargs: dict, check_closure: bool, backend) -> None:
    """Raises if a tensor being differentiated reaches f other than as a positional argument: by
    keyword, or closed over. grad_fn returns gradients for the positional arguments only, so its
    gradient would be lost without a word (or taken through f's own ops), differently on each
    backend; jax.custom_vjp refuses closed-over values being differentiated for the same reason."""
    found = None  # the keyword arguments of hidden_input's message
    for key in kwargs:
        if any(backend.being_differentiated(leaf) for leaf in _tree.flatten(kwargs[key])):
            found = {"keyword": key}  # the first one is named
            break
    if found is None and check_closure:
        for _, name, value in closure_cells(f):
            if backend.being_differentiated(value, closed_over=True):
                found = {"closed_over": name}
                break
    if found is not None:
        raise msg.hidden_input(f, **found)


def _bool_option(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise msg.bool_option("customgrad.custom_gradient", name, value)
    return value


class _Omitted:
    def __repr__(self) -> str:
        return "OMITTED"


# custom_gradient's f when it is called with options only, as a decorator factory; its name and
# repr are what the signature shows, in help() and on the site
OMITTED = _Omitted()


class _SymbolicCall(keras.Operation):
    """A custom-gradient function as one operation of a functional model."""

    def __init__(self, fn, name):
        super().__init__(name=f"custom_gradient_{name.replace('.', '_').replace('<', '').replace('>', '')}")
        self.fn = fn

    def call(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class CustomGradientDecorator(Protocol):
    """What `custom_gradient(forward_mode=..., tf_variables=...)` returns: the decorator."""

    @overload
    def __call__(self, f: Callable[P, tuple[R, Callable[..., Any]]], /) -> Callable[P, R]: ...
    @overload
    def __call__(self, f: Callable[P, Any], /) -> Callable[P, Any]: ...


# The decorated function takes f's parameters and returns f's output without grad_fn; where a
# type checker cannot see f return a pair (a list, an unannotated structure), its output is Any.
@overload
def custom_gradient(f: Callable[P, tuple[R, Callable[..., Any]]], *, forward_mode: bool = False,
                    tf_variables: bool = False) -> Callable[P, R]: ...
@overload
def custom_gradient(f: Callable[P, Any], *, forward_mode: bool = False,
                    tf_variables: bool = False) -> Callable[P, Any]: ...
@overload
def custom_gradient(*, forward_mode: bool = False,
                    tf_variables: bool = False) -> CustomGradientDecorator: ...
def custom_gradient(f: Callable[..., Any] | _Omitted = OMITTED, *, forward_mode: bool = False,
                    tf_variables: bool = False) -> Callable[..., Any]:
    """Decorates `f` so that its gradient is the one `f` defines, on every Keras backend.

    `f(*args, **kwargs)` returns `(output, grad_fn)`; the decorated function returns `output`,
    and autodiff (jax.grad, tf.GradientTape, torch.autograd, `model.fit`, ...) uses `grad_fn`.
    How grad_fn receives the upstream gradients (one per output, the whole structure, or
    `upstream=`), what it returns, which arguments get gradients and how variables read inside
    `f` reach it (`variables=`) is the convention, stated once in `docs/convention.md` (the
    Python site's "The convention" page).

    Forward mode (JVPs and Hessians forward over reverse) is derived from grad_fn, which must then
    be linear in its upstream; see `docs/forward-mode.md`.

    grad_fn's `variables=` holds the keras.Variables f read (a tf.Variable f reads directly is
    passed as itself), the objects a backend-agnostic grad_fn compares with `layer.kernel`.
    A grad_fn written for `tf.custom_gradient` needs the tf.Variables they hold instead (it keys
    them by `.ref()`, hands them to `GradientTape.watch`): `tf_variables=True` passes those, as
    tf.custom_gradient does, on the tensorflow backend only.

    Args:
        f: the function returning `(output, grad_fn)`. Omitted, `custom_gradient(...)` returns
            a decorator with those options: `@custom_gradient(forward_mode=True)`.
        forward_mode: on jax, build the function on `jax.custom_jvp` so that `jax.jvp` works
            (torch and tensorflow always have forward mode; reverse mode then computes grad_fn's
            values again). Usable as `@custom_gradient(forward_mode=True)`.
        tf_variables: on tensorflow, pass grad_fn the tf.Variables f read (the one a
            keras.Variable holds is its `.value`) instead of the keras.Variables, as
            tf.custom_gradient does; for grad_fns written for tf.custom_gradient. Any other
            backend refuses it.

    Returns:
        The decorated function, with `f`'s arguments.

    Examples:
        >>> import keras, customgrad
        >>> @customgrad.custom_gradient
        ... def log1pexp(x):
        ...     e = keras.ops.exp(x)
        ...     def grad(upstream):
        ...         return upstream * (1.0 - 1.0 / (1.0 + e))
        ...     return keras.ops.log(1.0 + e), grad
        >>> float(customgrad.grad(log1pexp)(keras.ops.convert_to_tensor(100.0)))
        1.0

        A grad_fn written for tf.custom_gradient, which compares the variables by `.ref()`,
        with `tf_variables=True` (on tensorflow only; elsewhere the example does nothing):

        >>> if keras.backend.backend() == "tensorflow":
        ...     scale = keras.Variable(3.0)
        ...     @customgrad.custom_gradient(tf_variables=True)
        ...     def scaled(x):
        ...         def grad(dy, variables=None):
        ...             (v,) = variables
        ...             assert v.ref() == scale.value.ref()  # the tf.Variable scale holds
        ...             return dy * v, [keras.ops.sum(dy * x)]
        ...         return x * scale, grad
        ...     assert float(customgrad.grad(scaled)(keras.ops.convert_to_tensor(2.0))) == 3.0
    """
    forward_mode = _bool_option(forward_mode, "forward_mode")
    tf_variables = _bool_option(tf_variables, "tf_variables")
    if f is OMITTED:  # @custom_gradient(forward_mode=True)
        return functools.partial(custom_gradient, forward_mode=forward_mode,
                                 tf_variables=tf_variables)
    if not callable(f):
        raise msg.not_callable(f)
    if tf_variables and keras.backend.backend() != "tensorflow":
        raise msg.tf_variables_off_tensorflow(f, keras.backend.backend())

    if keras.backend.backend() in NAMES:
        # Import the backend module now (the lookup stays at call time): an import inside
        # torch.compile's tracing would break the graph.
        backend_module()
        install_variable_recorder()

    # whether f closes over anything (the cells' contents are read per call); the cells are not
    # kept here: torch.compile's tracer then fails to load them inside f
    closes_over = bool(getattr(f, "__closure__", None))

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        # backend_module() inlined for the common case: this runs on every call
        backend = _backend_modules.get(keras.backend.backend()) or backend_module()
        try:
            if not kwargs and backend.HAS_FAST_PATH:
                output = backend.call_positional(f, args)  # None: not a call of its kind
                if output is not None:
                    return output
            if kwargs or closes_over:
                refuse_hidden_inputs(f, kwargs, closes_over and backend.sees_closures(), backend)
            tensors_only = not kwargs and all([backend.tensor_value(a) is a is not None
                                               for a in args])
            if not tensors_only and any_symbolic_tensors(args, kwargs):
                # keras.Input and friends: record one node in the functional graph, so that
                # running the model calls this function (and its gradient), not the ops inside f
                # one by one.
                return _SymbolicCall(decorated, fn_name(f))(*args, **kwargs)
            arguments = Arguments(f, args, kwargs, backend, tensors_only)
            if tf_variables:  # tensorflow only, checked above; it derives forward mode anyway
                return backend.call_with_tf_variables(arguments)
            if forward_mode:
                return call_forward_mode(backend, arguments)
            return backend.call(arguments)
        except Exception as error:
            framework = _foreign_framework_in(error)
            if framework is None:
                without_own_frames(error)  # the traceback ends at the user's call
                raise
            raise msg.raised_while_running(framework, keras.backend.backend(), f) from error

    decorated.__customgrad_forward__ = f
    _tf_decorator_metadata(decorated, f)
    # AutoGraph calls it as it is, and so f and grad_fn unconverted, as tf.custom_gradient's
    # result (_autograph.py)
    return not_converted(decorated)


def _tf_decorator_metadata(decorated, f) -> None:
    """What code written for `tf.custom_gradient` reads off its result, set once at decoration.

    `__original_wrapped__` (GPflow calls it) on every backend, as `tf_decorator.make_decorator`
    sets it beside `__wrapped__`. On tensorflow also f's signature as `__signature__`, which
    `inspect.getfullargspec` and so `tf_inspect.getfullargspec` read (they do not follow
    `__wrapped__`; `tfp.math.value_and_gradient` calls a function of no arguments with none
    only if its spec says so). Not elsewhere: torch.compile's full-graph capture binds a top-level
    function's arguments to its own code by `inspect.signature(fn, follow_wrapped=False)`, and
    `inspect.signature` finds f's through `__wrapped__` anyway.

    No `_tf_decorator` (a `TFDecorator`, whose target `tf_inspect.unwrap` returns): under it
    `tf.function(decorated)` would convert f with AutoGraph into a function it never calls
    (`tf_decorator.rewrap` puts it in the attributes); AutoGraph is kept off `decorated`, and so
    off f, by `not_converted` instead (`_autograph.py`), as it is off `tf.custom_gradient`'s
    result.
    """
    decorated.__original_wrapped__ = f
    if keras.backend.backend() == "tensorflow":
        try:
            decorated.__signature__ = inspect.signature(f)
        except (TypeError, ValueError):  # builtins and some C callables have none
            pass
