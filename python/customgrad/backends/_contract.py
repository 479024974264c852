"""The contract every backend module (`customgrad.backends.<name>`) meets, written once.

The core (`_core.py`, `_call.py`, `_returns.py`, `_autodiff.py`, `_check_problem.py`,
`_forward.py`, `_remat.py`, `ops.py`) talks to a backend only through these names, and a backend
imports from the core only its leaf modules (`_call`, `_closure`, `_convention`, `_forward`,
`_messages`, `_returns`, `_spec`, `_tracebacks`, `_tree`, `_variables`), never the entry point
`_core`.
Three capability constants say what a backend can do, instead of probing for attributes:

* `HAS_AUTODIFF`: it takes gradients (jax, tensorflow, torch); then it also meets `Autodiff`.
* `HAS_FAST_PATH`: `call_positional(f, args)` is worth trying before anything else (torch, whose
  eager calls cost microseconds, so the general bookkeeping shows).
* `FORWARD_MODE_OPT_IN`: forward mode needs `custom_gradient(f, forward_mode=True)`, which calls
  `call_forward_mode(arguments)` (jax: a function is built on custom_jvp or custom_vjp, not
  both); elsewhere forward mode is derived from grad_fn in `call`.

One option belongs to a single backend, and is no capability: `custom_gradient(f,
tf_variables=True)` calls tensorflow's `call_with_tf_variables(arguments)` (`TFVariablesOptIn`);
the core refuses the option on every other backend, by name, before any call.

`check(module)` lists how a module falls short (empty if it meets the contract); the tests run it
on every backend.

>>> import customgrad.backends.numpy as numpy_backend
>>> check(numpy_backend)
[]
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager


class Backend(Protocol):
    """What every backend defines."""

    HAS_AUTODIFF: bool
    HAS_FAST_PATH: bool
    FORWARD_MODE_OPT_IN: bool

    def tensor_value(self, leaf: Any) -> Any:
        """The leaf as a backend tensor (a keras.Variable's value), or None if it is none."""

    def is_tensor(self, x: Any) -> bool:
        """Whether x is a tensor of this backend."""

    def is_float(self, x: Any) -> bool:
        """Whether tensor x is floating-point or complex (gets a gradient)."""

    def sees_closures(self) -> bool:
        """Whether f's closure cells and grad_fn's keyword defaults may be read now (not while
        torch.compile traces)."""

    def being_differentiated(self, x: Any, closed_over: bool = False) -> bool:
        """Whether autodiff will differentiate x (for refusing keyword and closed-over
        tensors; `closed_over`: x is in f's closure)."""

    def spec(self, x: Any) -> Any:
        """A `TensorSpec` of tensor x: what the backward needs of it, without its memory."""

    def call(self, arguments: Any) -> Any:
        """Runs one call inside the backend's autodiff; returns f's output, whose gradient is
        grad_fn's. `arguments` is a `_call.Arguments`: `arguments.forward(values)` runs f on the
        tensor values (`arguments.tensor_values`, or what the autodiff system made of them),
        recording what it reads, and returns (output, output leaves, a `_call.Backward`);
        `backward.link(...)` is a `_call.Link` of what the autodiff linked, which it calls with
        the cotangents to get checked gradients. Where nothing can differentiate the call,
        `arguments.output(values)` runs f alone."""

    def float64_scope(self) -> AbstractContextManager[Any]:
        """A context in which float64 computations stay float64 (for the gradient checker)."""


class Autodiff(Backend, Protocol):
    """What a backend with `HAS_AUTODIFF` defines on top."""

    def watching_reads(self) -> AbstractContextManager[Any] | None:
        """The backend's own watcher of the variables f reads, which the core opens around f
        (`_call.run_reading`, beside Keras's variable recorder): a context manager with
        `watched_variables()` (TensorFlow's VariableWatcher), or None where Keras's record is
        all there is to see."""

    def zeros(self, spec: Any) -> Any:
        """Zeros of `spec`'s shape and dtype (the upstream of an output the loss does not use)."""

    def zeros_like(self, x: Any) -> Any:
        """Zeros like tensor x (the cotangent of an output `customgrad.vjp` is given none for;
        inside jax.shard_map, varying over the mesh axes x varies over)."""

    def convert(self, grad: Any, like: Any) -> Any:
        """grad (a tensor, a keras.Variable, a number or numpy value) as a tensor like `like`."""

    def static_shape(self, x: Any) -> tuple[int | None, ...]:
        """x's shape, None for dimensions unknown while tracing."""

    def cast_like(self, grad: Any, like: Any) -> Any:
        """grad in like's dtype."""

    def ones_like(self, x: Any) -> Any:
        """Ones of x's shape and dtype."""

    def one_device_sum_of_squares(self, local: Any) -> Any:
        """From this replica's sum of squares of a gradient, the sum of squares of the gradient
        one device would have on the whole batch, under the data-parallel engine running now
        (for `clip_gradient_norm(..., across_replicas=True)`); `local` where none runs."""

    def recomputation_inputs(self, leaves: list[Any]) -> list[Any]:
        """The leaves a recomputation in the backward (`customgrad.remat`) starts from: the
        same values, kept from being merged with the forward they repeat or from being
        differentiated through the forward's graph."""

    def vjp_flat(self, fn: Callable[..., Any], values: list[Any],
                 reusable: bool = True) -> tuple[Sequence[Any], Callable[[list[Any]], list[Any]]]:
        """Runs fn(*values) -> output leaves; returns (outputs, back(cotangents) -> one gradient
        per value). `reusable`: back may run more than once."""


class FastPath(Protocol):
    """What a backend with `HAS_FAST_PATH` defines on top."""

    def call_positional(self, f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """f(*args) with no keyword arguments: f's output, or None (before f ran) when the call
        is not of the kind this path takes, which then goes to `call`."""


class ForwardModeOptIn(Protocol):
    """What a backend with `FORWARD_MODE_OPT_IN` defines on top."""

    def call_forward_mode(self, arguments: Any) -> Any:
        """`call` for a function decorated with forward_mode=True."""


class TFVariablesOptIn(Protocol):
    """What the tensorflow backend defines on top, for `custom_gradient(f, tf_variables=True)`."""

    def call_with_tf_variables(self, arguments: Any) -> Any:
        """`call` whose grad_fn receives in `variables=` the tf.Variables f read (a
        keras.Variable's `.value`), as tf.custom_gradient passes them, not the keras.Variables."""


_CAPABILITIES = {"HAS_AUTODIFF": Autodiff, "HAS_FAST_PATH": FastPath,
                 "FORWARD_MODE_OPT_IN": ForwardModeOptIn}


def _members(protocol) -> dict[Any, Any]:
    """name -> the function a protocol declares (its own and its bases')."""
    members = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, Protocol) or not issubclass(klass, Protocol):
            continue
        members.update({name: value for name, value in vars(klass).items()
                        if inspect.isfunction(value) and not name.startswith("_")})
    return members


def check(module) -> list[str]:
    """How `module` falls short of the contract: missing or non-bool capability constants,
    missing functions, functions whose parameters differ from the contract's."""
    problems = []
    protocols = [Backend]
    for constant, protocol in _CAPABILITIES.items():
        value = getattr(module, constant, None)
        if not isinstance(value, bool):
            problems.append(f"{constant} must be True or False; it is {value!r}")
        elif value:
            protocols.append(protocol)
    for protocol in protocols:
        for name, declared in _members(protocol).items():
            defined = getattr(module, name, None)
            if not callable(defined):
                problems.append(f"{name} is missing (required by {protocol.__name__})")
                continue
            expected = list(inspect.signature(declared).parameters)[1:]  # without self
            got = list(inspect.signature(defined).parameters)
            if got != expected:
                problems.append(f"{name}{tuple(got)} should take {tuple(expected)}")
    return problems
