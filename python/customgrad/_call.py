"""One call of a custom-gradient function, and the one place where what f and grad_fn return
is checked.

The entry point (`_core.custom_gradient`) reads the arguments once into a `Call`. The backend
runs f through `Call.forward(values)`, which returns f's output, its leaves and a `Backward`: an
object, never changed once built, holding only what grad_fn's call needs (f, grad_fn, the
structures and specs of the arguments and of the output, not their tensors). The backend hands
the upstream gradients to `backward(cotangents, variables, variable_values)`, which calls grad_fn
and returns checked gradients. This module imports no backend: the backend's helpers arrive as an
argument.

>>> import keras
>>> from customgrad import _core
>>> def double(x):
...     return 2.0 * x, lambda dy: 2.0 * dy
>>> call = Call(double, (keras.ops.ones((3,)),), {}, _core.backend_module())
>>> output, leaves, backward = call.forward(call.tensor_values)
>>> [tuple(g.shape) for g in backward([keras.ops.ones((3,))])[0]]
[(3,)]
"""

from __future__ import annotations

import keras
import numpy as np

from . import _messages as msg, _tree
from ._convention import call_grad_fn
from ._spec import TensorSpec
from ._variables import variable_name
from ._backend_names import AUTODIFF


class Call:
    """The arguments of one call: their structure, which leaves are tensors (and their values as
    backend tensors), and which of those get gradients. Read once; never changed."""

    __slots__ = ("f", "backend", "structure", "flat", "leaves", "tensor_index", "tensor_values",
                 "differentiable", "arg_is_tensor", "all_tensors")

    def __init__(self, f, args: tuple, kwargs: dict, backend, tensors_only: bool = False):
        """`tensors_only`: the caller checked that there are no keyword arguments and that
        every argument is its own tensor value (a backend tensor, not a variable), which skips
        the per-leaf bookkeeping."""
        self.f = f
        self.backend = backend
        self.structure = (args, kwargs)
        if tensors_only:
            self.flat = self.all_tensors = True
            self.leaves = self.tensor_values = list(args)
            self.tensor_index = list(range(len(args)))
            self.differentiable = [backend.is_float(a) for a in args]
            self.arg_is_tensor = [True] * len(args)
            return
        # The common case, positional tensors and nothing nested, skips the tree machinery.
        self.flat = not kwargs and _tree.all_leaves(args)
        self.leaves = list(args) if self.flat else _tree.flatten((args, kwargs))
        n_arg_leaves = len(args) if self.flat else len(_tree.flatten(args))
        self.tensor_index = []  # positions in `leaves` of tensors (and keras.Variables)
        self.tensor_values = []  # those leaves as backend tensors
        self.differentiable = []  # per tensor: gets a gradient (float, positional)
        self.arg_is_tensor = [False] * n_arg_leaves  # per leaf of the positional arguments
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
                self.arg_is_tensor[i] = True
        self.all_tensors = len(self.tensor_index) == len(self.leaves)

    @property
    def positional(self) -> list:
        """The positions in `tensor_values` of the tensors among the positional arguments."""
        n = len(self.arg_is_tensor)
        return [k for k, i in enumerate(self.tensor_index) if i < n]

    def output(self, tensor_values) -> tuple[object, list]:
        """Calls f once with the tensor leaves replaced by `tensor_values`, where nothing can
        differentiate the call; returns (f's output, its leaves), checked."""
        output, leaves, _ = checked_forward_result(self.f, self._run(tensor_values),
                                                   self.backend)
        return output, leaves

    def forward(self, tensor_values) -> tuple[object, list, "Backward"]:
        """Calls f once with the tensor leaves replaced by `tensor_values`; returns (f's output,
        its leaves, the `Backward` of this call), checked."""
        return self.accept(self._run(tensor_values))

    def accept(self, result) -> tuple[object, list, "Backward"]:
        """`forward` for what f returned when it ran on this call's tensors."""
        output, leaves, grad_fn = checked_forward_result(self.f, result, self.backend)
        spec, is_tensor = self.backend.spec, self.backend.is_tensor
        output_specs = [spec(o) if is_tensor(o) else None for o in leaves]
        input_specs = [spec(v) for v in self.tensor_values]
        return output, leaves, Backward(
            self.f, grad_fn, self.backend, self._arguments(input_specs)[0], self.arg_is_tensor,
            self.tensor_index, input_specs, self.differentiable,
            rebuild(output, output_specs), output_specs)

    def _run(self, tensor_values):
        if self.all_tensors and self.flat:
            return self.f(*tensor_values)
        args, kwargs = self._arguments(tensor_values)
        return self.f(*args, **kwargs)

    def _arguments(self, tensor_values) -> tuple[tuple, dict]:
        """(args, kwargs) with the tensor leaves replaced by `tensor_values`."""
        if self.all_tensors:
            leaves = list(tensor_values)
        else:
            leaves = list(self.leaves)
            for i, value in zip(self.tensor_index, tensor_values):
                leaves[i] = value
        if self.flat:
            return tuple(leaves), {}
        return _tree.unflatten(self.structure, leaves)


class Backward:
    """What the backward of one call needs, by construction nothing more: f, grad_fn, the
    backend's helpers, the positional arguments and the output as structures of specs (grad_fn
    holds the tensors it needs itself; holding the inputs too would keep a previous layer's
    activation alive until the backward, where plain autodiff frees it).

    `backward(cotangents, variables, variable_values)` calls grad_fn and returns (one checked
    gradient or None per tensor leaf of the arguments, one per variable);
    `backward.rebuild(leaves)` is the output's structure around `leaves`.
    """

    __slots__ = ("f", "grad_fn", "backend", "args", "arg_is_tensor", "tensor_index",
                 "input_specs", "differentiable", "output", "output_specs", "plain")

    def __init__(self, f, grad_fn, backend, args: tuple, arg_is_tensor: list, tensor_index: list,
                 input_specs: list, differentiable: list, output, output_specs: list):
        self.f, self.grad_fn, self.backend = f, grad_fn, backend
        self.args, self.arg_is_tensor = args, arg_is_tensor
        self.tensor_index, self.input_specs, self.differentiable = (
            tensor_index, input_specs, differentiable)
        self.output, self.output_specs = output, output_specs
        # positional tensors only, all getting gradients: what grad_fn returns is checked faster
        self.plain = (len(input_specs) == len(args) and all(differentiable)
                      and _tree.all_leaves(args))

    def __call__(self, cotangents, variables=(), variable_values=()) -> tuple[list, list]:
        """Calls grad_fn with one upstream gradient (or None) per output leaf.

        Args:
            cotangents: one upstream gradient (or None: zeros) per output leaf.
            variables: the variables the forward read; variable_values: their values.

        Returns:
            (one gradient or None per tensor leaf, one gradient or None per variable), each
            gradient with its input's shape and dtype.
        """
        upstream = []
        for spec, ct in zip(self.output_specs, cotangents):
            if spec is None or not spec.floating:
                upstream.append(None)
            elif ct is None:
                upstream.append(self.backend.zeros(spec))
            else:
                upstream.append(ct)
        variables = list(variables)
        result = call_grad_fn(self.grad_fn, self.f, self.output, self.rebuild(upstream),
                              variables)
        return checked_gradients(self, result, variables, variable_values)

    @classmethod
    def positional(cls, f, grad_fn, backend, input_specs: list, output, output_specs: list):
        """The `Backward` of a call of f on positional tensors, all of them differentiable;
        `output`: the output's structure of specs. (Built on every eager torch call: the
        slots are set directly.)"""
        backward = cls.__new__(cls)
        n = len(input_specs)
        backward.f, backward.grad_fn, backward.backend = f, grad_fn, backend
        backward.args, backward.arg_is_tensor = tuple(input_specs), [True] * n
        backward.tensor_index, backward.input_specs = range(n), input_specs
        backward.differentiable = backward.arg_is_tensor
        backward.output, backward.output_specs, backward.plain = output, output_specs, True
        return backward

    def positional_call(self, cotangents) -> list:
        """`__call__` for a `positional` Backward whose output is a floating-point tensor or a
        flat tuple or list of them, given one upstream gradient per output and no variables:
        the input gradients."""
        output = self.output  # a spec, or a tuple or list of specs
        upstream = type(output)(cotangents) if type(output) in (tuple, list) else cotangents[0]
        result = call_grad_fn(self.grad_fn, self.f, output, upstream, ())
        grads = _plain_gradients(result, self.input_specs, self.backend)
        return grads if grads is not None else checked_gradients(self, result)[0]

    def linked(self, cotangents, outputs=None, inputs=(), variables=(), variable_values=(),
               wanted=()) -> list:
        """`__call__` in the terms of an autodiff that linked some outputs and some inputs.

        Args:
            cotangents: one upstream gradient per linked output.
            outputs: the positions among the output leaves of the linked outputs (None: all).
            inputs: the positions among the tensor leaves of the inputs whose gradients the
                autodiff takes.
            variables, variable_values: the variables the forward read, and their values.
            wanted: the variable values whose gradients the autodiff takes, matched by identity
                with `variable_values` (one f did not read gets None).

        Returns:
            The gradients of `inputs`, then those of `wanted`, in that order (None: zero).
        """
        if outputs is not None:
            full = [None] * len(self.output_specs)
            for j, ct in zip(outputs, cotangents):
                full[j] = ct
            cotangents = full
        input_grads, var_grads = self(cotangents, variables, variable_values)
        grads = [input_grads[k] for k in inputs]
        if wanted:
            by_id = {id(v): g for v, g in zip(variable_values, var_grads)}
            grads += [by_id.get(id(v)) for v in wanted]
        return grads

    def rebuild(self, output_leaves: list):
        """The output's structure with `output_leaves` as its leaves."""
        return rebuild(self.output, output_leaves)


def rebuild(structure, leaves: list):
    """`structure` (an output, or its structure of specs) with `leaves` as its leaves."""
    if len(leaves) == 1 and _tree.is_leaf(structure):
        return leaves[0]
    return _tree.unflatten(structure, leaves)


# -- the checks of what f and grad_fn return ---------------------------------------------------

_NUMBERS = (bool, int, float, complex)


def checked_forward_result(f, result, backend) -> tuple[object, list, object]:
    """What f returned, checked: (output, its leaves, grad_fn). Numbers and numpy values among
    the output's leaves become tensors, as with tf/jax.custom_gradient (they are outputs like any
    other and get an upstream gradient); another framework's tensor is an error."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise msg.not_a_pair(f, result)
    output, grad_fn = result
    if not callable(grad_fn):
        raise msg.grad_fn_not_callable(f, grad_fn)
    leaves = [output] if _tree.is_leaf(output) else _tree.flatten(output)
    is_tensor = backend.is_tensor
    if not all([is_tensor(o) for o in leaves]):
        leaves = [o if is_tensor(o) else _output_leaf(f, o, output, j)
                  for j, o in enumerate(leaves)]
        output = rebuild(output, leaves)
    return output, leaves, grad_fn


def _output_leaf(f, leaf, output, j):
    """A leaf of f's output that is not a backend tensor: numbers, numpy values and
    keras.Variables become tensors; another framework's tensor is an error; anything else
    (None, strings) stays as it is and gets no gradient."""
    if isinstance(leaf, _NUMBERS) or _tree.framework_of(leaf) in ("numpy", "keras"):
        return keras.ops.convert_to_tensor(leaf)
    refuse_foreign(leaf, f"`{msg.fn_name(f)}`", lambda: _tree.leaf_paths(output, "output")[j])
    return leaf


def checked_gradients(backward: Backward, result, variables=(), variable_values=()):
    """What grad_fn returned, checked against the arguments and the variables: (one gradient or
    None per tensor leaf of the arguments, one gradient or None per variable), each gradient
    converted to its input's dtype. A gradient for a non-differentiable leaf is dropped."""
    B, specs, f, grad_fn = backward.backend, backward.input_specs, backward.f, backward.grad_fn
    if backward.plain and not variables:
        grads = _plain_gradients(result, specs, B)
        if grads is not None:
            return grads, []
    if variables:
        grad_xs, grad_vars = _split_variable_grads(result, f, grad_fn, variables)
    else:
        grad_xs, grad_vars = result, None
    per_arg_leaf = _align_input_grads(grad_xs, backward.args, backward.arg_is_tensor, f, grad_fn)
    input_grads = []
    n_per_arg = len(per_arg_leaf)
    for i, spec, diff in zip(backward.tensor_index, specs, backward.differentiable):
        g = per_arg_leaf[i] if i < n_per_arg else None
        input_grads.append(None if g is None or not diff else _checked(backward, g, spec, i))
    var_grads = []
    if grad_vars is not None:
        for var, value, g in zip(variables, variable_values, grad_vars):
            var_grads.append(None if g is None else _checked(
                backward, g, value, lambda var=var: msg.variable_place(variable_name(var))))
    return input_grads, var_grads


def _plain_gradients(result, input_specs: list, backend) -> list | None:
    """The common case of `checked_gradients`, for positional tensors that all get gradients:
    grad_fn returned one tensor of its input's shape and dtype per input (a tensor for one
    input); that list, accepted as it is. None where the general rules are needed."""
    is_tensor = backend.is_tensor
    grads = (result,) if len(input_specs) == 1 and is_tensor(result) else result
    if not (isinstance(grads, (tuple, list)) and len(grads) == len(input_specs)):
        return None
    for g, s in zip(grads, input_specs):
        if not (is_tensor(g) and g.shape == s.shape and g.dtype == s.dtype
                and s.check_gradient is None):
            return None
    return list(grads)


def _split_variable_grads(result, f, grad_fn, variables: list):
    """Splits a TF1-style `(grad_xs, grad_vars)` result; returns (grad_xs, grad_vars)."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise msg.variables_result_not_a_pair(f, grad_fn, result)
    grad_xs, grad_vars = result
    if grad_vars is None:
        grad_vars = [None] * len(variables)
    if not isinstance(grad_vars, (tuple, list)) or len(grad_vars) != len(variables):
        raise msg.grad_vars_count(f, grad_fn, len(variables), grad_vars)
    return grad_xs, list(grad_vars)


def _align_input_grads(grad_xs, args: tuple, is_tensor_leaf: list, f, grad_fn) -> list:
    """Aligns what grad_fn returned with the leaves of the positional arguments.

    Accepts the structure of the arguments (a single value for a one-argument f) or a flat
    sequence with one entry per tensor leaf. Returns one entry (or None) per leaf of `args`.
    """
    if grad_xs is None:
        return [None] * len(is_tensor_leaf)
    if _tree.all_leaves(args):
        # plain arguments: skip the general matching below
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
    raise msg.grad_xs_structure(f, grad_fn, args, n_tensors, grad_xs, first_error)


def _scatter_flat(flat: list, is_tensor_leaf: list) -> list:
    it = iter(flat)
    return [next(it) if t else None for t in is_tensor_leaf]


def _checked(backward: Backward, grad, spec, where):
    """`grad` converted, shape-checked and cast for the input of spec (or value) `spec`; `where`
    names the input: a leaf index of the arguments, or a function returning its name (a
    variable's name is looked up only when a message needs it)."""
    B, f, grad_fn = backward.backend, backward.f, backward.grad_fn

    def place():
        if isinstance(where, int):
            return _tree.leaf_paths(backward.args, "args")[where]
        return where()

    if not B.is_tensor(grad):
        refuse_foreign(grad, msg.grad_fn_of(f, grad_fn), place)
    grad = B.convert(grad, spec)
    if isinstance(spec, TensorSpec) and spec.check_gradient is not None:
        return spec.check_gradient(grad, msg.grad_fn_of(f, grad_fn), place())
    if grad.shape == spec.shape and grad.dtype == spec.dtype:
        return grad  # the common case; what follows would accept it unchanged
    g_shape = B.static_shape(grad)
    r_shape = spec.shape if isinstance(spec, TensorSpec) else B.static_shape(spec)
    if g_shape != r_shape and (len(g_shape) != len(r_shape) or any(
        a is not None and b is not None and a != b for a, b in zip(g_shape, r_shape)
    )):
        raise msg.gradient_shape(f, grad_fn, g_shape, place(), r_shape)
    return B.cast_like(grad, spec)


def refuse_foreign(value, who: str, where) -> None:
    """Raises if `value` is a tensor of a framework other than the active Keras backend's (a
    tf.exp inside f run on jax, say): the backend cannot differentiate it, and converting it would
    hide that the computation left the backend. `who` returned it (f's name in backquotes, or
    `msg.grad_fn_of`); `where()` names the place, for the message."""
    framework = _tree.framework_of(value)
    backend = keras.backend.backend()
    if framework in AUTODIFF and framework != backend:
        raise msg.foreign_value(framework, backend, who, value, where())


def _converts_to_tensor(leaf) -> bool:
    """Positional arguments that become tensors: Python floats, numpy arrays and numpy
    floating-point scalars. Python ints and bools stay as they are (an axis, a count, a flag)."""
    if isinstance(leaf, (float, complex)):
        return True
    if _tree.framework_of(leaf) != "numpy":
        return False
    return isinstance(leaf, np.ndarray) or np.issubdtype(leaf.dtype, np.inexact)
