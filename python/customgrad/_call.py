"""One call of a custom-gradient function: its `Arguments`, the `Backward` that calls grad_fn,
and the `Link` that says which of grad_fn's gradients go where.

The entry point (`_core.custom_gradient`) reads the arguments once into an `Arguments`. The
backend runs f through `arguments.forward(values)`, which records what f reads besides its
arguments (`Reads`: the variables, their values, the layer losses it adds) and returns f's
output, its leaves and a `Backward`: an object, never changed once built, holding only what
grad_fn's call needs (f, grad_fn, the structures and specs of the arguments and of the output,
not their tensors, and f's reads). The backend says in terms of its autodiff what it linked,
`backward.link(outputs=..., inputs=..., wanted=...)`, and hands the upstream gradients to that
`Link`, which calls grad_fn and returns the gradients the autodiff asked for, checked by
`_returns`. This module imports no backend: the backend's helpers arrive as an argument.

>>> import keras
>>> from customgrad import _core
>>> def double(x):
...     return 2.0 * x, lambda dy: 2.0 * dy
>>> arguments = Arguments(double, (keras.ops.ones((3,)),), {}, _core.backend_module())
>>> output, leaves, backward = arguments.forward(arguments.tensor_values)
>>> link = backward.link()
>>> [tuple(g.shape) for g in link([keras.ops.ones((3,))])]
[(3,)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from . import _spec, _tree
from ._convention import call_grad_fn
from ._returns import checked_forward_result, checked_gradients, plain_gradients, to_tensor
from ._variables import recording

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


class Reads(NamedTuple):
    """What f read besides its arguments while it ran: `variables`, what grad_fn receives in
    `variables=` (keras.Variables, then framework variables the backend's watcher saw); `values`,
    the value each read returned (what the autodiff differentiates); and how many layer losses
    f added (`losses_added`)."""

    variables: list
    values: list
    losses_added: int


NO_READS = Reads((), (), 0)  # what most calls read


def run_reading(backend, f, args: Sequence, kwargs: dict | None = None,
                received: Sequence = ()) -> tuple[object, Reads]:
    """f(*args, **kwargs), and what it read: the one place where reads are recorded (Keras's
    variable reads, and the backend's own watcher, `backend.watching_reads()`). `received`: the
    arguments' leaves, which are no hidden reads."""
    watcher = backend.watching_reads()
    if watcher is None:
        result, rec = recording.call(f, args, kwargs)
        return result, recorded_reads(rec)
    with watcher:
        result, rec = recording.call(f, args, kwargs)
    seen = {id(v) for v in rec.raw_values}
    seen.update(id(leaf) for leaf in received)
    more = [v for v in watcher.watched_variables() if id(v) not in seen and backend.is_float(v)]
    return result, recorded_reads(rec, more)


def recorded_reads(rec: recording, more: Sequence = ()) -> Reads:
    """The `Reads` of a recording, with `more` variables a backend's watcher saw."""
    variables, values = rec.variables, rec.raw_values
    if more:
        variables, values = [*variables, *more], [*values, *more]
    if not variables and not rec.losses_added:
        return NO_READS
    return Reads(variables, values, rec.losses_added)


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
        args, kwargs = self._call_arguments(tensor_values)
        result = self.f(*args, **kwargs) if kwargs else self.f(*args)
        output, leaves, _ = checked_forward_result(self.f, result, self.backend)
        return output, leaves

    def forward(self, tensor_values) -> tuple[object, list, Backward]:
        """Calls f once with the tensor leaves replaced by `tensor_values`, recording what it
        reads; returns (f's output, its leaves, the `Backward` of this call), checked."""
        args, kwargs = self._call_arguments(tensor_values)
        return self.accept(*run_reading(self.backend, self.f, args, kwargs, self.leaves))

    def accept(self, result, reads: Reads) -> tuple[object, list, Backward]:
        """`forward` for what f returned when it ran on this call's tensors, reading `reads`."""
        output, leaves, grad_fn = checked_forward_result(self.f, result, self.backend)
        spec, is_tensor = self.backend.spec, self.backend.is_tensor
        output_specs = [spec(o) if is_tensor(o) else None for o in leaves]
        input_specs = [spec(v) for v in self.tensor_values]
        args = self._arguments(input_specs)[0]
        plain = (len(input_specs) == len(args) and all(self.differentiable)
                 and _tree.all_leaves(args))
        return output, leaves, Backward(
            self.f, grad_fn, self.backend, args, self.arg_is_tensor, self.tensor_index,
            input_specs, self.differentiable, _tree.unflatten(output, output_specs),
            output_specs, reads, plain)

    def _call_arguments(self, tensor_values) -> tuple[Sequence, dict | None]:
        """(args, kwargs) to call f with, the tensor leaves replaced by `tensor_values`; the
        common case, positional tensors only, as they are (kwargs None)."""
        if self.all_tensors and self.flat:
            return tensor_values, None
        return self._arguments(tensor_values)

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
    activation alive until the backward, where plain autodiff frees it), and what f read.

    `backward.gradients(cotangents, variables, variable_values)` calls grad_fn and returns (one
    checked gradient or None per tensor leaf of the arguments, one per variable);
    `backward.link(...)` is that call in an autodiff's terms; `backward.rebuild(leaves)` is the
    output's structure around `leaves`. `output_specs` None: the autodiff hands one upstream per
    output leaf, each of its output's shape and dtype (`PositionalLink`).
    """

    __slots__ = ("f", "grad_fn", "backend", "args", "arg_is_tensor", "tensor_index",
                 "input_specs", "differentiable", "output", "output_specs", "reads", "plain",
                 "flat_output")

    def __init__(self, f, grad_fn, backend, args: tuple, arg_is_tensor: list, tensor_index,
                 input_specs: list, differentiable: list, output, output_specs: list | None,
                 reads: Reads, plain: bool):
        self.f, self.grad_fn, self.backend = f, grad_fn, backend
        self.args, self.arg_is_tensor = args, arg_is_tensor
        self.tensor_index, self.input_specs, self.differentiable = (
            tensor_index, input_specs, differentiable)
        self.output, self.output_specs, self.reads = output, output_specs, reads
        # positional tensors only, all getting gradients: what grad_fn returns is checked faster
        self.plain = plain
        # an output that is a flat tuple or list is rebuilt without walking it (its type)
        self.flat_output = (type(output) if type(output) in (tuple, list)
                            and _tree.all_leaves(output) else None)

    def gradients(self, cotangents, variables=(), variable_values=(),
                  introspect: bool | None = None) -> tuple[list, list]:
        """Calls grad_fn with one upstream gradient (or None) per output leaf.

        Args:
            cotangents: one upstream gradient (or None: zeros) per output leaf.
            variables: what grad_fn receives in `variables=`; variable_values: their values.
            introspect: whether grad_fn's signature may be read whole and cached (see
                `_convention.inspect_grad_fn`); None: the backend's `sees_closures()` says.

        Returns:
            (one gradient or None per tensor leaf, one gradient or None per variable), each
            gradient with its input's shape and dtype.
        """
        if self.output_specs is None:  # it stands for the output in grad_fn's call
            upstream = output = cotangents[0] if self.output is None else self.rebuild(cotangents)
        else:
            filled = []
            for spec, ct in zip(self.output_specs, cotangents):
                if spec is None or not spec.floating:
                    filled.append(None)
                elif ct is None:
                    filled.append(self.backend.zeros(spec))
                else:
                    filled.append(ct)
            upstream, output = self.rebuild(filled), self.output
        if introspect is None:
            introspect = self.backend.sees_closures()
        result = call_grad_fn(self.grad_fn, self.f, output, upstream, variables, introspect)
        return checked_gradients(self, result, variables, variable_values)

    @property
    def tensor_outputs(self) -> list:
        """The positions of the output leaves that are tensors (the others, a None or a string,
        stay out of an autodiff, which takes tensors only)."""
        return [j for j, s in enumerate(self.output_specs) if s is not None]

    @property
    def float_outputs(self) -> list:
        """The positions of the floating-point tensor leaves of the output: the ones gradients
        flow through (integer and bool outputs get none, on every backend)."""
        return [j for j, s in enumerate(self.output_specs) if s is not None and s.floating]

    def link(self, outputs=None, inputs=None, variables=None, variable_values=None, wanted=(),
             guard=None) -> Link:
        """This call as an autodiff linked it (see `Link`). `variables`/`variable_values`
        default to what f read (`reads`)."""
        return Link(self, None if outputs is None else tuple(outputs),
                    None if inputs is None else tuple(inputs),
                    self.reads.variables if variables is None else variables,
                    self.reads.values if variable_values is None else variable_values,
                    tuple(wanted), guard)

    def rebuild(self, output_leaves: list):
        """The output's structure with `output_leaves` as its leaves."""
        if self.output is None:  # one leaf (the common case)
            return output_leaves[0]
        if self.flat_output is not None:
            return self.flat_output(output_leaves)
        return _tree.unflatten(self.output, output_leaves)


class Link:
    """Which gradient goes where, for one call linked into an autodiff: the autodiff calls it
    with one cotangent per linked output and receives the gradients of the linked inputs, then
    those of the variable values it differentiates. Made by `Backward.link`; never changed (and
    no tuple: torch's pytrees would take a tuple for a structure to walk).

    Fields:
        backward: the call's `Backward`.
        outputs: the positions among the output leaves of the linked outputs (None: all).
        inputs: the positions among the tensor leaves of the inputs whose gradients the autodiff
            takes (None: all).
        variables: what grad_fn receives in `variables=`; variable_values: their values.
        wanted: the variable values whose gradients the autodiff takes, matched by identity
            with `variable_values` (one f did not read gets None).
        guard: called before grad_fn, to refuse what the backend knows is wrong (or None).
    """

    __slots__ = ("backward", "outputs", "inputs", "variables", "variable_values", "wanted",
                 "guard")

    def __init__(self, backward: Backward, outputs: tuple | None, inputs: tuple | None,
                 variables: list, variable_values: list, wanted: tuple,
                 guard: Callable[[], None] | None):
        # not enforced (a __setattr__ that refuses would cost a microsecond on torch's fast
        # path, a few percent of an eager call): nothing in customgrad assigns to a Link
        self.backward, self.outputs, self.inputs = backward, outputs, inputs
        self.variables, self.variable_values, self.wanted = variables, variable_values, wanted
        self.guard = guard

    def wanting(self, wanted) -> Link:
        """This link, giving the gradients of the variable values `wanted` after the inputs'."""
        return Link(self.backward, self.outputs, self.inputs, self.variables,
                    self.variable_values, tuple(wanted), self.guard)

    def __call__(self, cotangents, introspect: bool | None = None) -> list:
        """The gradients of `inputs`, then those of `wanted`, in that order (None: zero).
        `introspect`: the autodiff says whether it runs eagerly (see `Backward.gradients`)."""
        if self.guard is not None:
            self.guard()
        if self.outputs is not None:
            full = [None] * len(self.backward.output_specs)
            for j, ct in zip(self.outputs, cotangents):
                full[j] = ct
            cotangents = full
        input_grads, var_grads = self.backward.gradients(cotangents, self.variables,
                                                         self.variable_values, introspect)
        grads = input_grads if self.inputs is None else [input_grads[k] for k in self.inputs]
        if self.wanted:
            by_id = {id(v): g for v, g in zip(self.variable_values, var_grads)}
            grads = list(grads) + [by_id.get(id(v)) for v in self.wanted]
        return grads


class PositionalLink:
    """The `Link` of a call of f on positional tensors that all get gradients, which read
    nothing, and whose output is one floating-point tensor (`container` None) or a flat tuple or
    list of them (`container` that type), linked whole by an autodiff that hands one upstream
    per output, of that output's shape and dtype. Torch's fast path makes one on every eager
    call, so it holds only what its common backward uses: grad_fn's call with no structure to
    rebuild, and gradients accepted as they are when they match the inputs' shapes and dtypes.
    The `Backward` the general rules need (its messages, a gradient to convert or refuse) is
    built only when grad_fn's result needs them.

    `input_specs`: one (shape, dtype, device) per input, as the tensors carry them.
    """

    __slots__ = ("f", "grad_fn", "backend", "input_specs", "n_outputs", "container", "guard",
                 "_backward")

    def __init__(self, f, grad_fn, backend, input_specs: list, n_outputs: int, container,
                 guard: Callable[[], None] | None = None):
        self.f, self.grad_fn, self.backend = f, grad_fn, backend
        self.input_specs, self.n_outputs, self.container = input_specs, n_outputs, container
        self.guard, self._backward = guard, None

    @property
    def backward(self) -> Backward:
        """The call's `Backward`, for the general rules (built once, when first needed)."""
        if self._backward is None:
            n = len(self.input_specs)
            every, index = _EVERY[n] if n < len(_EVERY) else ((True,) * n, range(n))
            specs = [_spec.TensorSpec(shape, dtype, device, True)
                     for shape, dtype, device in self.input_specs]
            output = None if self.container is None else self.container((None,) * self.n_outputs)
            self._backward = Backward(self.f, self.grad_fn, self.backend, tuple(specs), every,
                                      index, specs, every, output, None, NO_READS, True)
        return self._backward

    def __call__(self, cotangents, introspect: bool | None = None) -> list:
        """One gradient per input, from one upstream per output (None: zero). `introspect`:
        as `Link`'s (compiled autograd can trace the backward of an eager call)."""
        if self.guard is not None:
            self.guard()
        container = self.container
        upstream = cotangents[0] if container is None else container(cotangents)
        if introspect is None:
            introspect = self.backend.sees_closures()
        result = call_grad_fn(self.grad_fn, self.f, upstream, upstream, (), introspect)
        grads = plain_gradients(result, self.input_specs, self.backend.is_tensor)
        if grads is not None:
            return grads
        return checked_gradients(self.backward, result)[0]


_EVERY = [((True,) * n, range(n)) for n in range(8)]  # shared by positional links: never changed


def _converts_to_tensor(leaf) -> bool:
    """Positional arguments that become tensors: Python floats, numpy arrays and numpy
    floating-point scalars. Python ints and bools stay as they are (an axis, a count, a flag)."""
    if isinstance(leaf, (float, complex)):
        return True
    if _tree.framework_of(leaf) != "numpy":
        return False
    return isinstance(leaf, np.ndarray) or np.issubdtype(leaf.dtype, np.inexact)
