"""`custom_gradient`: the backend-independent part.

One call of a decorated function is an `Invocation`: it flattens the arguments, knows which leaves
are tensors and which of those get gradients, runs `f` once, and turns what grad_fn returns into
one checked gradient per tensor leaf. The backend modules (`customgrad.backends.<name>`) only wire
an Invocation into their autodiff system.
"""

from __future__ import annotations

import functools
import importlib

import keras
import numpy as np
from keras.src.backend import any_symbolic_tensors

from . import _tree
from .backends import AUTODIFF, NAMES
from ._forward import call_forward_mode, forward_mode_option
from ._variables import install as install_variable_recorder, variable_name
from ._convention import (
    CustomGradientError,
    align_input_grads,
    call_grad_fn,
    fn_name,
    split_variable_grads,
)

_backend_modules: dict = {}


def backend_module(name: str | None = None):
    """The customgrad module for the active Keras backend (looked up at call time)."""
    name = name or keras.backend.backend()
    module = _backend_modules.get(name)
    if module is None:
        if name not in NAMES:
            raise NotImplementedError(
                f"customgrad: the Keras backend {name!r} is not supported; expected one of "
                f"{list(NAMES)}."
            )
        module = importlib.import_module(f"customgrad.backends.{name}")
        _backend_modules[name] = module
    return module


class Invocation:
    """One call of a custom-gradient function: its arguments, its forward, its backward."""

    __slots__ = ("f", "args", "backend", "flat", "leaves", "structure", "tensor_index",
                 "tensor_values", "differentiable", "_arg_is_tensor", "all_tensors", "output",
                 "output_specs")

    def __init__(self, f, args: tuple, kwargs: dict, backend, tensors_only: bool = False):
        """`tensors_only`: the caller checked that there are no keyword arguments and that
        every argument is its own tensor value (a backend tensor, not a variable), which skips
        the per-leaf bookkeeping."""
        self.f = f
        self.args = args
        self.backend = backend
        self.output = None
        if tensors_only:
            self.flat = self.all_tensors = True
            self.leaves = self.tensor_values = list(args)
            self.structure = (args, kwargs)
            self.tensor_index = list(range(len(args)))
            self.differentiable = [backend.is_float(a) for a in args]
            self._arg_is_tensor = [True] * len(args)
            return
        # The common case, positional tensors and nothing nested, skips the tree machinery.
        self.flat = not kwargs and _tree.all_leaves(args)
        self.leaves = list(args) if self.flat else _tree.flatten((args, kwargs))
        self.structure = (args, kwargs)
        n_arg_leaves = len(args) if self.flat else len(_tree.flatten(args))
        self.tensor_index = []  # positions in `leaves` of tensors (and keras.Variables)
        self.tensor_values = []  # those leaves as backend tensors
        self.differentiable = []  # per tensor: gets a gradient (float, positional)
        self._arg_is_tensor = [False] * n_arg_leaves
        for i, leaf in enumerate(self.leaves):
            value = backend.tensor_value(leaf)
            if value is None:
                if i >= n_arg_leaves or not _converts_to_tensor(leaf):
                    continue
                # as tf.custom_gradient and jax.custom_gradient do: f receives a tensor
                value = keras.ops.convert_to_tensor(leaf)
            self.tensor_index.append(i)
            self.tensor_values.append(value)
            self.differentiable.append(i < n_arg_leaves and backend.is_float(value))
            if i < n_arg_leaves:
                self._arg_is_tensor[i] = True
        self.all_tensors = len(self.tensor_index) == len(self.leaves)

    # -- forward ---------------------------------------------------------------------------
    def run_forward(self, tensor_values) -> tuple[list, object]:
        """Calls f once with the tensor leaves replaced; returns (output leaves, grad_fn)."""
        if self.all_tensors:
            leaves = list(tensor_values)
        else:
            leaves = list(self.leaves)
            for i, value in zip(self.tensor_index, tensor_values):
                leaves[i] = value
        if self.flat:
            result = self.f(*leaves)
        else:
            args, kwargs = _tree.unflatten(self.structure, leaves)
            result = self.f(*args, **kwargs)
        return self.accept_forward(result)

    def accept_forward(self, result) -> tuple[list, object]:
        """Checks what f returned; returns (output leaves, grad_fn)."""
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise CustomGradientError(
                f"customgrad.custom_gradient: `{fn_name(self.f)}` must return a pair "
                f"(output, grad_fn); received {_tree.describe(result)}."
            )
        output, grad_fn = result
        if not callable(grad_fn):
            raise CustomGradientError(
                f"customgrad.custom_gradient: the second element returned by "
                f"`{fn_name(self.f)}` must be a callable grad_fn; received "
                f"{_tree.describe(grad_fn)}."
            )
        leaves = [output] if _tree.is_leaf(output) else _tree.flatten(output)
        spec, is_tensor = self.backend.spec, self.backend.is_tensor
        if not all([is_tensor(o) for o in leaves]):
            # Python and numpy numbers become tensors, as with tf/jax.custom_gradient: they are
            # outputs like any other and get an upstream gradient
            leaves = [o if is_tensor(o) else self._output_leaf(o, output, j)
                      for j, o in enumerate(leaves)]
            output = leaves[0] if _tree.is_leaf(output) else _tree.unflatten(output, leaves)
        self.output = output
        self.output_specs = [spec(o) if is_tensor(o) else None for o in leaves]
        return leaves, grad_fn

    def _output_leaf(self, leaf, output, j):
        """A leaf of f's output that is not a backend tensor: numbers, numpy values and
        keras.Variables become tensors; another framework's tensor is an error; anything else
        (None, strings) stays as it is and gets no gradient."""
        if isinstance(leaf, _NUMBERS) or _tree.framework_of(leaf) in ("numpy", "keras"):
            return keras.ops.convert_to_tensor(leaf)
        refuse_foreign(leaf, f"`{fn_name(self.f)}` returned", lambda: _tree.leaf_paths(
            output, "output")[j])
        return leaf

    @classmethod
    def released(cls, f, backend, input_specs: list, output, output_specs: list) -> "Invocation":
        """The state `release()` leaves after a call of f on positional tensors, all of them
        differentiable: for a backward that needs the general rules. `output`: the output's
        structure with specs for leaves; `output_specs`: its leaves."""
        inv = cls.__new__(cls)
        inv.f, inv.backend = f, backend
        inv.args = tuple(input_specs)
        inv.structure = (inv.args, {})
        inv.leaves = inv.tensor_values = list(input_specs)
        inv.flat = inv.all_tensors = True
        inv.tensor_index = list(range(len(input_specs)))
        inv.differentiable = [True] * len(input_specs)
        inv._arg_is_tensor = [True] * len(input_specs)
        inv.output, inv.output_specs = output, list(output_specs)
        return inv

    def rebuild_output(self, output_leaves: list):
        if len(output_leaves) == 1 and _tree.is_leaf(self.output):
            return output_leaves[0]
        return _tree.unflatten(self.output, output_leaves)

    def release(self):
        """After the forward, keeps the structure and specs of the inputs and of the output, not
        their tensors. grad_fn holds what it needs itself; holding the inputs too would keep a
        previous layer's activation alive until the backward, where plain autodiff frees it,
        and holding the output one more tensor than plain autodiff at the peak."""
        if len(self.output_specs) == 1 and _tree.is_leaf(self.output):  # a single tensor
            self.output = self.output_specs[0]
        else:
            self.output = _tree.unflatten(self.output, self.output_specs)
        spec = self.backend.spec
        specs = [spec(v) for v in self.tensor_values]
        if self.all_tensors:
            leaves = specs
        else:
            leaves = list(self.leaves)
            for i, s in zip(self.tensor_index, specs):
                leaves[i] = s
        self.tensor_values, self.leaves = specs, leaves
        if self.flat:
            self.args = tuple(leaves)
            self.structure = (self.args, {})
        else:
            self.structure = _tree.unflatten(self.structure, leaves)
            self.args = self.structure[0]

    # -- backward --------------------------------------------------------------------------
    def run_backward(self, grad_fn, cotangents, variables=(), variable_values=()):
        """Calls grad_fn and checks its result.

        Args:
            cotangents: one upstream gradient (or None) per output leaf.
            variables: keras.Variables the forward read; variable_values: their values.

        Returns:
            (one gradient or None per tensor leaf, one gradient or None per variable), each
            gradient with its input's shape and dtype.
        """
        B = self.backend
        upstream = []
        for spec, ct in zip(self.output_specs, cotangents):
            if spec is None or not spec.floating:
                upstream.append(None)
            elif ct is None:
                upstream.append(B.zeros(spec))
            else:
                upstream.append(ct)
        variables = list(variables)
        result = call_grad_fn(grad_fn, self.f, self.output, upstream, variables)
        return self.accept_backward(grad_fn, result, variables, variable_values)

    def accept_backward(self, grad_fn, result, variables=(), variable_values=()):
        """Turns what grad_fn returned into run_backward's result (checked gradients)."""
        if variables:
            grad_xs, grad_vars = split_variable_grads(result, self.f, grad_fn, variables)
        else:
            grad_xs, grad_vars = result, None
        per_arg_leaf = align_input_grads(grad_xs, self.args, self._arg_is_tensor, self.f, grad_fn)
        input_grads = []
        n_per_arg = len(per_arg_leaf)
        for i, value, diff in zip(self.tensor_index, self.tensor_values, self.differentiable):
            g = per_arg_leaf[i] if i < n_per_arg else None
            input_grads.append(None if g is None or not diff else self._checked(g, value, i, grad_fn))
        var_grads = []
        if grad_vars is not None:
            for var, value, g in zip(variables, variable_values, grad_vars):
                name = variable_name(var)
                var_grads.append(None if g is None else self._checked(
                    g, value, f"the variable {name}", grad_fn))
        return input_grads, var_grads

    def _checked(self, grad, ref, where, grad_fn):
        """`grad` converted, shape-checked and cast for input `ref`; `where` names the input:
        a leaf index of the arguments, or a text."""
        B = self.backend
        if not B.is_tensor(grad):
            refuse_foreign(grad, f"grad_fn `{fn_name(grad_fn)}` of `{fn_name(self.f)}` returned",
                           lambda: self._where(where))
        grad = B.convert(grad, ref)
        if isinstance(ref, OutputSpec) and ref.check_gradient is not None:
            return ref.check_gradient(
                grad, f"grad_fn `{fn_name(grad_fn)}` of `{fn_name(self.f)}`", self._where(where))
        if grad.shape == ref.shape and grad.dtype == ref.dtype:
            return grad  # the common case; what follows would accept it unchanged
        g_shape = B.static_shape(grad)
        r_shape = ref.shape if isinstance(ref, OutputSpec) else B.static_shape(ref)
        if g_shape != r_shape and (len(g_shape) != len(r_shape) or any(
            a is not None and b is not None and a != b for a, b in zip(g_shape, r_shape)
        )):
            raise CustomGradientError(
                f"customgrad.custom_gradient: grad_fn `{fn_name(grad_fn)}` of `{fn_name(self.f)}` "
                f"returned a gradient of shape {tuple(g_shape)} for {self._where(where)}, which has "
                f"shape {tuple(r_shape)}; gradients must have their input's shape (customgrad never "
                f"broadcasts or sums them for you)."
            )
        return B.cast_like(grad, ref)

    def _where(self, where):
        """`where` of `_checked` as a text: a leaf index of the arguments becomes its path."""
        return _tree.leaf_paths(self.args, "args")[where] if isinstance(where, int) else where


_NUMBERS = (bool, int, float, complex)


def _converts_to_tensor(leaf) -> bool:
    """Positional arguments that become tensors: Python floats, numpy arrays and numpy
    floating-point scalars. Python ints and bools stay as they are (an axis, a count, a flag)."""
    if isinstance(leaf, (float, complex)):
        return True
    if _tree.framework_of(leaf) != "numpy":
        return False
    return isinstance(leaf, np.ndarray) or np.issubdtype(leaf.dtype, np.inexact)


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


def foreign_framework_error(framework: str, what: str) -> CustomGradientError:
    backend = keras.backend.backend()
    return CustomGradientError(
        f"customgrad.custom_gradient: {what}, but the Keras backend is {backend}; a "
        f"custom-gradient function and its grad_fn must compute with "
        f"keras.ops (or {backend}'s own ops). Replace the {framework} ops (e.g. tf.exp -> "
        f"keras.ops.exp), or set KERAS_BACKEND={framework}."
    )


def refuse_foreign(value, what: str, where) -> None:
    """Raises if `value` is a tensor of a framework other than the active Keras backend's (a
    tf.exp inside f run on jax, say): the backend cannot differentiate it, and converting it would
    hide that the computation left the backend. `where()` names the place, for the message."""
    framework = _tree.framework_of(value)
    if framework in AUTODIFF and framework != keras.backend.backend():
        raise foreign_framework_error(framework, f"{what} {_tree.describe(value)} as {where()}")


class OutputSpec:
    """What the backward needs of a tensor: shape (static, None for unknown dims), dtype, device,
    float or not, and for partly unknown shapes the runtime shape (a small tensor).

    A plain class with slots: one is made per input and output of every call, and a frozen
    dataclass costs three times as much to build.
    """

    __slots__ = ("shape", "dtype", "device", "floating", "runtime_shape")
    describe_as = "tensor"  # in error messages
    # Specs of structured tensors (TensorFlow's ragged and sparse tensors) check a gradient
    # themselves: check_gradient(grad, who, where) -> the gradient, or a CustomGradientError.
    check_gradient = None

    def __init__(self, shape, dtype, device, floating, runtime_shape=None):
        self.shape, self.dtype, self.device = shape, dtype, device
        self.floating, self.runtime_shape = floating, runtime_shape

    def __repr__(self):
        return f"OutputSpec(shape={tuple(self.shape)}, dtype={self.dtype})"


def refuse_hidden_inputs(f, kwargs: dict, check_closure: bool, backend) -> None:
    """Raises if a tensor being differentiated reaches f other than as a positional argument: by
    keyword, or closed over. grad_fn returns gradients for the positional arguments only, so its
    gradient would be lost without a word (or taken through f's own ops), differently on each
    backend; jax.custom_vjp refuses closed-over values being differentiated for the same reason."""
    found = None
    for key in kwargs:
        for leaf in _tree.flatten(kwargs[key]):
            if backend.being_differentiated(leaf):
                found = f"the tensor passed by keyword `{key}`"
                break
    if found is None and check_closure:
        for name, cell in zip(f.__code__.co_freevars, f.__closure__):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell: a name not assigned yet
                continue
            if backend.being_differentiated(value, closed_over=True):
                found = f"the tensor `{name}` it closes over"
                break
    if found is not None:
        raise CustomGradientError(
            f"customgrad.custom_gradient: `{fn_name(f)}` uses {found}, which is being "
            f"differentiated; a custom gradient defines gradients for the positional arguments "
            f"only (grad_fn returns one per positional argument), so this one would be lost. "
            f"Pass it as a positional argument and return its gradient from grad_fn."
        )


_NO_FUNCTION = object()  # custom_gradient called with options only, as a decorator factory


class _SymbolicCall(keras.Operation):
    """A custom-gradient function as one operation of a functional model."""

    def __init__(self, fn, name):
        super().__init__(name=f"custom_gradient_{name.replace('.', '_').replace('<', '').replace('>', '')}")
        self.fn = fn

    def call(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def custom_gradient(f=_NO_FUNCTION, *, forward_mode: bool = False):
    """Decorates `f` so that its gradient is the one `f` defines, on every Keras backend.

    `f(*args, **kwargs)` returns `(output, grad_fn)`; the decorated function returns `output`,
    and autodiff (jax.grad, tf.GradientTape, torch.autograd, `model.fit`, ...) uses `grad_fn`.
    grad_fn receives the upstream gradients positionally, one per top-level output, and also as
    `upstream=` if it declares that keyword; it returns one gradient per positional argument
    (nested like the argument, or flattened), None meaning zero. Keyword arguments of `f` are
    constants: they are passed through and get no gradient. If `f` reads trainable
    `keras.Variable`s (or, on tensorflow, `tf.Variable`s; on torch, leaf tensors that require
    grad, such as an `nn.Parameter`), grad_fn must accept `variables=` and return
    `(grad_xs, grad_vars)`.

    Forward mode (JVPs: `keras.ops.jvp`, `torch.func.jvp`, `jax.jvp`, `ForwardAccumulator`, and
    Hessians forward over reverse) is derived from grad_fn, which must then be linear in its
    upstream. On torch and tensorflow it works for every function. On jax it needs
    `forward_mode=True` (`@custom_gradient(forward_mode=True)`): the function is then built on
    jax.custom_jvp instead of jax.custom_vjp (jax allows one of them), and reverse mode
    transposes the derived JVP, which computes grad_fn's values again.

    Example:
        >>> import keras, customgrad
        >>> @customgrad.custom_gradient
        ... def log1pexp(x):
        ...     e = keras.ops.exp(x)
        ...     def grad(upstream):
        ...         return upstream * (1.0 - 1.0 / (1.0 + e))
        ...     return keras.ops.log(1.0 + e), grad
        >>> float(customgrad.grad(log1pexp)(keras.ops.convert_to_tensor(100.0)))
        1.0
    """
    forward_mode = forward_mode_option(forward_mode, "customgrad.custom_gradient")
    if f is _NO_FUNCTION:  # @custom_gradient(forward_mode=True)
        return functools.partial(custom_gradient, forward_mode=forward_mode)
    if not callable(f):
        raise TypeError(
            f"customgrad.custom_gradient: expected a callable f(*args) returning "
            f"(output, grad_fn); received {_tree.describe(f)}."
        )

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
        backend = backend_module()
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
            invocation = Invocation(f, args, kwargs, backend, tensors_only)
            if forward_mode:
                return call_forward_mode(backend, invocation)
            return backend.call(invocation)
        except Exception as error:
            framework = _foreign_framework_in(error)
            if framework is None:
                raise
            raise foreign_framework_error(framework, (
                f"{framework} raised the error above while `{fn_name(f)}` ran")) from error

    decorated.__customgrad_forward__ = f
    return decorated
