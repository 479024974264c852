"""One call of a custom-gradient function: its `Arguments`, and the `Backward` that calls
grad_fn.

The entry point (`_core.custom_gradient`) reads the arguments once into an `Arguments`. The
backend runs f through `arguments.forward(values)`, which returns f's output, its leaves and a `Backward`: an
object, never changed once built, holding only what grad_fn's call needs (f, grad_fn, the
structures and specs of the arguments and of the output, not their tensors). The backend hands
the upstream gradients to `backward(cotangents, variables, variable_values)`, which calls grad_fn
and returns gradients checked by `_returns`. This module imports no backend: the backend's
helpers arrive as an argument.

>>> import keras
>>> from customgrad import _core
>>> def double(x):
...     return 2.0 * x, lambda dy: 2.0 * dy
>>> arguments = Arguments(double, (keras.ops.ones((3,)),), {}, _core.backend_module())
>>> output, leaves, backward = arguments.forward(arguments.tensor_values)
>>> [tuple(g.shape) for g in backward([keras.ops.ones((3,))])[0]]
[(3,)]
"""

from __future__ import annotations

import numpy as np

from . import _tree
from ._convention import call_grad_fn
from ._returns import checked_forward_result, checked_gradients, to_tensor


class Arguments:
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
                value = to_tensor(leaf)
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
            _tree.unflatten(output, output_specs), output_specs)

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
                              variables, self.backend.sees_closures())
        return checked_gradients(self, result, variables, variable_values)

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
        return _tree.unflatten(self.output, output_leaves)


class PositionalBackward(Backward):
    """The `Backward` of a call of f on positional tensors that all get gradients, whose output is
    a floating-point tensor or a flat tuple or list of them. torch's fast path makes one on every
    eager call, so it holds only f, grad_fn, the backend, the input specs and the output's
    container (the outputs' own specs are not needed: torch hands over one upstream gradient per
    output, of that output's shape and dtype); what the general checks read of a `Backward` is
    derived when they run. `linked` is not for it.
    """

    __slots__ = ("container",)
    plain = True

    def __init__(self, f, grad_fn, backend, input_specs: list, container):
        self.f, self.grad_fn, self.backend = f, grad_fn, backend
        self.input_specs, self.container = input_specs, container  # None: one tensor

    args = property(lambda self: tuple(self.input_specs))
    arg_is_tensor = differentiable = property(lambda self: [True] * len(self.input_specs))
    tensor_index = property(lambda self: range(len(self.input_specs)))

    def __call__(self, cotangents, variables=(), variable_values=()) -> tuple[list, list]:
        upstream = cotangents[0] if self.container is None else self.container(cotangents)
        variables = list(variables)
        # the upstream stands for the output in grad_fn's call: same structure, shapes, dtypes
        result = call_grad_fn(self.grad_fn, self.f, upstream, upstream, variables,
                              self.backend.sees_closures())
        return checked_gradients(self, result, variables, variable_values)

    def rebuild(self, output_leaves: list):
        return output_leaves[0] if self.container is None else self.container(output_leaves)


def _converts_to_tensor(leaf) -> bool:
    """Positional arguments that become tensors: Python floats, numpy arrays and numpy
    floating-point scalars. Python ints and bools stay as they are (an axis, a count, a flag)."""
    if isinstance(leaf, (float, complex)):
        return True
    if _tree.framework_of(leaf) != "numpy":
        return False
    return isinstance(leaf, np.ndarray) or np.issubdtype(leaf.dtype, np.inexact)
