"""`remat`: recompute a function's forward in the backward instead of keeping its intermediates.

Built on `custom_gradient`: the forward runs f as a custom-gradient function (whose backends keep
only what grad_fn holds: f's arguments), and grad_fn runs f again under `customgrad.vjp`, on the
arguments and on the values of the keras.Variables f read, and applies the upstream gradient.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import keras
from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope

from . import _messages as msg, _tree
from ._autodiff import vjp
from ._autograph import not_converted
from ._core import backend_module, custom_gradient
from ._variables import recording, variable_name

if TYPE_CHECKING:
    from collections.abc import Callable

P = ParamSpec("P")
R = TypeVar("R")


def remat(f: Callable[P, R]) -> Callable[P, R]:
    """Returns f with its forward recomputed in the backward: gradients equal f's own, and the
    memory between forward and backward holds f's arguments, not its intermediates.

    Works on jax, tensorflow and torch, eager and compiled (`jax.jit`,
    `tf.function(jit_compile=True)`, `torch.compile`), with keyword arguments (constants: they
    get no gradient, as with `custom_gradient`). The trainable keras.Variables f reads (a layer's
    weights) get their gradients. f is called twice per forward+backward, so it must compute the
    same thing both times: random ops must draw from a seed passed in, not from a generator whose
    state advances on each call. A remat function called while another one recomputes its
    forward runs as plain f there (the outer recomputation is differentiated as a whole).

    Examples:
        >>> import keras, customgrad
        >>> def block(x, scale=1.0):
        ...     for _ in range(4):
        ...         x = keras.ops.tanh(x) * scale
        ...     return keras.ops.sum(x)
        >>> x = keras.ops.convert_to_tensor([0.5, 1.0])
        >>> g = customgrad.grad(customgrad.remat(block))(x, scale=2.0)
        >>> bool(keras.ops.all(keras.ops.isclose(g, customgrad.grad(block)(x, scale=2.0))))
        True
    """
    if not callable(f):
        raise msg.remat_not_callable(f)

    @functools.wraps(f)
    def recomputed(*args, **kwargs):
        output, rec = recording.call(f, args, kwargs)
        variables_read, raw_values = list(rec.variables), list(rec.raw_values)

        def replay(args, values):
            _replaying.depth = getattr(_replaying, "depth", 0) + 1
            try:
                with _variables_bound(variables_read, values):
                    result = f(*args, **kwargs)
            finally:
                _replaying.depth -= 1
            # numbers among the outputs become tensors, as they do in the forward (an int
            # output, a count say, gets None as its upstream gradient)
            return _tree.unflatten(result, [
                keras.ops.convert_to_tensor(leaf) if isinstance(leaf, (bool, int, float)) else leaf
                for leaf in _tree.flatten(result)])

        def grad_fn(*_, upstream, variables=None):
            primals = _recompute_inputs((args, raw_values))
            _, back = vjp(replay, *primals)
            grad_args, grad_values = back(upstream)
            if not variables:
                return grad_args
            by_id = {}
            for variable, value, g in zip(variables_read, raw_values, grad_values):
                by_id[id(variable)] = by_id[id(value)] = g
            others = [v for v in variables if id(v) not in by_id]
            if others:
                raise msg.remat_framework_variables(f, [variable_name(v) for v in others])
            return grad_args, [by_id[id(v)] for v in variables]

        return output, grad_fn

    decorated = custom_gradient(recomputed)

    @functools.wraps(f)
    def remat_f(*args, **kwargs):
        # Inside another remat function's recomputation, f runs plain: that recomputation is
        # differentiated as a whole, and a custom gradient inside it would read the keras.Variables
        # bound to its inputs, whose gradients tensorflow's compiled custom gradients drop.
        if getattr(_replaying, "depth", 0):
            return f(*args, **kwargs)
        return decorated(*args, **kwargs)

    remat_f.__customgrad_remat__ = f
    return not_converted(remat_f)  # by AutoGraph: _autograph.py


_replaying = threading.local()  # depth: how many recomputations are running on this thread


class _variables_bound(keras.StatelessScope):
    """Reads of `variables` inside the block return `values` (the replay's inputs, which the
    vjp differentiates); the other variables read what they read outside. Assignments made
    inside are dropped: the forward made them already (a moving mean is updated once)."""

    def __init__(self, variables, values):
        super().__init__(initialize_variables=False)
        outer = get_stateless_scope().state_mapping if in_stateless_scope() else {}
        self.state_mapping = {**outer, **{id(v): x for v, x in zip(variables, values)}}


def _recompute_inputs(primals):
    """What the replay starts from: the primals, each leaf as the backend's
    `recomputation_inputs` gives it (see the backend contract)."""
    leaves = backend_module().recomputation_inputs(_tree.flatten(primals))
    return _tree.unflatten(primals, leaves)
