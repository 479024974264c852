"""What f and grad_fn return, checked: the one place.

`checked_forward_result` takes f's `(output, grad_fn)` apart; `checked_gradients` aligns what
grad_fn returned with the arguments and the variables and converts each gradient to its input's
dtype (`plain_gradients` is its common case, accepted as it is); an exact Python zero (`0`, `0.0`)
stands for zeros of its input's shape. The `Backward` of `_call` calls
them; the backend's helpers arrive as an argument.

>>> from collections.abc import Sequence

import keras
>>> from customgrad import _core
>>> output, leaves, grad_fn = checked_forward_result(
...     lambda x: None, (keras.ops.ones((2,)), lambda dy: dy), _core.backend_module())
>>> len(leaves), callable(grad_fn)
(1, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import keras
import numpy as np

from . import _messages as msg, _tree
from ._backend_names import AUTODIFF
from ._spec import TensorSpec
from ._variables import variable_name

if TYPE_CHECKING:
    from collections.abc import Sequence


_NUMBERS = (bool, int, float, complex)
# a gradient of these types that equals 0 stands for zeros of its input's shape (`_checked`)
_EXACT_ZERO_TYPES = (int, float)


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
        output = _tree.unflatten(output, leaves)
    return output, leaves, grad_fn


def to_tensor(leaf):
    """A Python number or numpy value (or keras.Variable) as a backend tensor, the same dtype on
    every backend: a Python float is floatx (jax in its x64 mode would make it float64), a
    numpy scalar keeps its dtype as a numpy array does (Keras's torch backend reads an
    np.float64, a subclass of Python's float, as floatx: float32 there, float64 on tensorflow).

    >>> keras.backend.standardize_dtype(to_tensor(1.5).dtype)
    'float32'
    """
    if isinstance(leaf, np.generic):
        return keras.ops.convert_to_tensor(np.asarray(leaf))
    if type(leaf) is float:
        return keras.ops.convert_to_tensor(leaf, dtype=keras.backend.floatx())
    return keras.ops.convert_to_tensor(leaf)


def _output_leaf(f, leaf, output, j):
    """A leaf of f's output that is not a backend tensor: numbers, numpy values and
    keras.Variables become tensors; another framework's tensor is an error; anything else
    (None, strings) stays as it is and gets no gradient."""
    if isinstance(leaf, _NUMBERS) or _tree.framework_of(leaf) in ("numpy", "keras"):
        return to_tensor(leaf)
    refuse_foreign(leaf, f"`{msg.fn_name(f)}`", lambda: _tree.leaf_paths(output, "output")[j])
    return leaf


def checked_gradients(backward, result, variables=(), variable_values=()):
    """What grad_fn returned, checked against the arguments and the variables: (one gradient or
    None per tensor leaf of the arguments, one gradient or None per variable), each gradient
    converted to its input's dtype. A gradient for a non-differentiable leaf is dropped."""
    if backward.plain and not variables:
        specs = [(s.shape, s.dtype) for s in backward.input_specs if s.check_gradient is None]
        grads = (plain_gradients(result, specs, backward.backend.is_tensor)
                 if len(specs) == len(backward.input_specs) else None)
        if grads is not None:
            return grads, []
    specs, f, grad_fn = backward.input_specs, backward.f, backward.grad_fn
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


def plain_gradients(result, input_specs: Sequence, is_tensor) -> list | None:
    """The common case of `checked_gradients`, for positional tensors that all get gradients:
    grad_fn returned one tensor of its input's shape and dtype per input (a tensor for one
    input); that list, accepted as it is. None where the general rules are needed.

    `input_specs`: per input, a tuple that starts with its (shape, dtype).

    >>> import numpy as np
    >>> plain_gradients(np.ones(2), [((2,), np.ones(2).dtype)], lambda g: True)
    [array([1., 1.])]
    """
    n = len(input_specs)
    if n == 1 and is_tensor(result):
        shape, dtype = input_specs[0][:2]
        return [result] if result.shape == shape and result.dtype == dtype else None
    if not (isinstance(result, (tuple, list)) and len(result) == n):
        return None
    for g, spec in zip(result, input_specs):
        if not (is_tensor(g) and g.shape == spec[0] and g.dtype == spec[1]):
            return None
    return list(result)


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


def _checked(backward, grad, spec, where):
    """`grad` converted, shape-checked and cast for the input of spec (or value) `spec`; `where`
    names the input: a leaf index of the arguments, or a function returning its name (a
    variable's name is looked up only when a message needs it)."""
    B, f, grad_fn = backward.backend, backward.f, backward.grad_fn

    def place():
        if isinstance(where, int):
            return _tree.leaf_paths(backward.args, "args")[where]
        return where()

    if not B.is_tensor(grad):
        if type(grad) in _EXACT_ZERO_TYPES and grad == 0:
            # a Python 0 or 0.0 (not a bool, not a numpy zero): zeros of the input's shape and
            # dtype, as tf.custom_gradient lets it through (YOLO's loss returns 0.0 for anchors)
            return B.zeros(spec) if isinstance(spec, TensorSpec) else B.zeros_like(spec)
        refuse_foreign(grad, msg.grad_fn_of(f, grad_fn), place)
        if not _numeric(grad):
            raise msg.gradient_not_a_number(f, grad_fn, grad, place())
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


def _numeric(value) -> bool:
    """Whether a gradient that is no backend tensor can become one: a number, a numeric numpy
    value, a keras.Variable, or a tensor-like object (a ragged or sparse tensor, which its
    input's spec checks)."""
    if isinstance(value, _NUMBERS):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return False
    kind = getattr(dtype, "kind", None)  # numpy dtypes; frameworks' dtypes have none
    return kind is None or kind in "biufc"


def refuse_foreign(value, who: str, where) -> None:
    """Raises if `value` is a tensor of a framework other than the active Keras backend's (a
    tf.exp inside f run on jax, say): the backend cannot differentiate it, and converting it would
    hide that the computation left the backend. `who` returned it (f's name in backquotes, or
    `msg.grad_fn_of`); `where()` names the place, for the message."""
    framework = _tree.framework_of(value)
    backend = keras.backend.backend()
    if framework in AUTODIFF and framework != backend:
        raise msg.foreign_value(framework, backend, who, value, where())
