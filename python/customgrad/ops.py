"""Ready-made custom-gradient ops, built on `customgrad.custom_gradient` and keras.ops.

Every op works on jax, tensorflow and torch (and computes its forward on numpy). Scalars such as
`scale`, `min_value` and `max_norm` are constants: they never get gradients.

Examples:
    >>> import keras, customgrad
    >>> from customgrad import ops
    >>> x = keras.ops.convert_to_tensor([100.0])
    >>> float(customgrad.grad(lambda x: keras.ops.sum(ops.log1pexp(x)))(x)[0])
    1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from keras import ops as kops

from . import _messages as msg
from ._core import backend_module, custom_gradient
from ._forward import nonlinear

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "log1pexp", "clip_gradient", "clip_gradient_norm", "reverse_gradient", "scale_gradient",
    "straight_through", "round_ste", "sign_ste", "safe_norm", "safe_sqrt", "logsumexp", "swish",
]


def _cast(value, like):
    return kops.cast(value, like.dtype)


@custom_gradient
def _log1pexp(x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): finite for any x, also in float16
    value = kops.maximum(x, 0.0) + kops.log1p(kops.exp(-kops.abs(x)))

    def grad(upstream):
        return upstream * kops.sigmoid(x)

    return _cast(value, x), grad


def log1pexp(x: Any) -> Any:
    """log(1 + exp(x)) (softplus) with a stable value and gradient.

    The value is finite at x = 100 and 1e4 and the gradient, sigmoid(x), is exactly 1 at 100 and
    correct at -100, where plain autodiff of log(1 + exp(x)) gives NaN or overflows.

    Examples:
        >>> import keras, customgrad
        >>> float(customgrad.ops.log1pexp(keras.ops.convert_to_tensor(1e4)))
        10000.0
    """
    return _log1pexp(x)


def clip_gradient(x: Any, min_value: float, max_value: float) -> Any:
    """Identity forward; the gradient flowing back through `x` is clipped to [min_value, max_value].

    Examples:
        >>> import keras, customgrad
        >>> g = customgrad.grad(lambda x: keras.ops.sum(customgrad.ops.clip_gradient(x, -1, 1) * 5.0))
        >>> [float(v) for v in g(keras.ops.convert_to_tensor([1.0, 2.0]))]
        [1.0, 1.0]
    """
    if min_value > max_value:
        raise msg.clip_bounds(min_value, max_value)

    @custom_gradient
    def clip(x):
        return x, nonlinear(lambda upstream: kops.clip(upstream, min_value, max_value),
                            "it clips the upstream elementwise")

    return clip(x)


def clip_gradient_norm(x: Any, max_norm: float, *, across_replicas: bool = False) -> Any:
    """Identity forward; the gradient flowing back through `x` is rescaled to an L2 norm of at
    most `max_norm` (over the whole tensor).

    Under a data-parallel engine each replica sees its rows of the batch only, so by default the
    norm is each replica's own. With `across_replicas=True` it is the norm one device would see
    on the whole batch: summed across the replicas of the engine running (torch.distributed's
    process group, as under DDP and FSDP; the tf.distribute strategy of `strategy.run`), and
    scaled for how that engine combines gradients. On jax, Keras's distributions run over global
    arrays, where the norm is the whole batch's already. See `docs/scaling-out.md`.

    Examples:
        >>> import keras, customgrad
        >>> f = lambda x: keras.ops.sum(customgrad.ops.clip_gradient_norm(x, 1.0) * 3.0)
        >>> [round(float(v), 4) for v in customgrad.grad(f)(keras.ops.zeros((4,)))]
        [0.5, 0.5, 0.5, 0.5]
    """
    if not max_norm > 0:
        raise msg.clip_norm(max_norm)
    if not isinstance(across_replicas, bool):
        raise msg.bool_option("customgrad.ops.clip_gradient_norm", "across_replicas",
                             across_replicas)

    @custom_gradient
    def clip(x):
        def grad(upstream):
            sum_of_squares = kops.sum(kops.square(kops.cast(upstream, "float32")))
            if across_replicas:
                sum_of_squares = backend_module().one_device_sum_of_squares(sum_of_squares)
            norm = kops.sqrt(sum_of_squares)
            factor = kops.minimum(1.0, max_norm / kops.maximum(norm, 1e-12))
            return upstream * _cast(factor, upstream)

        return x, nonlinear(grad, "it rescales the upstream by its norm")

    return clip(x)


def scale_gradient(x: Any, scale: float) -> Any:
    """Identity forward; the gradient flowing back through `x` is multiplied by `scale`.

    Examples:
        >>> import keras, customgrad
        >>> float(customgrad.grad(lambda x: customgrad.ops.scale_gradient(x, 0.1))(
        ...     keras.ops.convert_to_tensor(3.0)))
        0.1...
    """

    @custom_gradient
    def scaled(x):
        return x, lambda upstream: upstream * scale

    return scaled(x)


def reverse_gradient(x: Any, scale: float = 1.0) -> Any:
    """Identity forward; the gradient is multiplied by -scale (domain-adversarial training).

    Examples:
        >>> import keras, customgrad
        >>> float(customgrad.grad(lambda x: customgrad.ops.reverse_gradient(x, 2.0))(
        ...     keras.ops.convert_to_tensor(3.0)))
        -2.0
    """
    return scale_gradient(x, -scale)


def straight_through(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wraps `fn` so that its forward is `fn(x)` and its gradient is the identity.

    Examples:
        >>> import keras, customgrad
        >>> floor_ste = customgrad.ops.straight_through(keras.ops.floor)
        >>> float(customgrad.grad(lambda x: floor_ste(x) * 3.0)(keras.ops.convert_to_tensor(1.7)))
        3.0
    """

    @custom_gradient
    def ste(x):
        return _cast(fn(x), x), lambda upstream: upstream

    ste.__name__ = f"straight_through({getattr(fn, '__name__', 'fn')})"
    return ste


round_ste: Callable[[Any], Any] = straight_through(kops.round)
round_ste.__doc__ = "round(x) forward, identity gradient (straight-through estimator)."
sign_ste: Callable[[Any], Any] = straight_through(kops.sign)
sign_ste.__doc__ = "sign(x) forward, identity gradient (straight-through estimator)."


def safe_sqrt(x: Any) -> Any:
    """sqrt(x) whose gradient at 0 is 0 instead of inf (and NaN through a zero upstream).

    Examples:
        >>> import keras, customgrad
        >>> float(customgrad.grad(lambda x: customgrad.ops.safe_sqrt(x))(
        ...     keras.ops.convert_to_tensor(0.0)))
        0.0
    """

    @custom_gradient
    def root(x):
        y = kops.sqrt(x)

        def grad(upstream):
            safe = kops.where(y > 0, y, kops.ones_like(y))
            return kops.where(y > 0, upstream * 0.5 / safe, kops.zeros_like(upstream))

        return y, grad

    return root(x)


def safe_norm(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """The L2 norm of `x` along `axis`, with gradient x / norm, and 0 (not NaN) where norm = 0.

    Examples:
        >>> import keras, customgrad
        >>> g = customgrad.grad(lambda x: customgrad.ops.safe_norm(x))(keras.ops.zeros((3,)))
        >>> [float(v) for v in g]
        [0.0, 0.0, 0.0]
    """

    @custom_gradient
    def norm(x):
        n = kops.sqrt(kops.sum(kops.square(x), axis=axis, keepdims=True))

        def grad(upstream):
            if not keepdims and axis is not None:
                upstream = kops.expand_dims(upstream, axis)
            safe = kops.where(n > 0, n, kops.ones_like(n))
            return kops.where(n > 0, upstream * x / safe, kops.zeros_like(x))

        out = n if keepdims else (kops.squeeze(n, axis) if axis is not None else kops.reshape(n, ()))
        return out, grad

    return norm(x)


def logsumexp(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """log(sum(exp(x))) along `axis`, with a softmax gradient that is 0 (not NaN) for entries
    of -inf, also when a whole slice is -inf.

    Examples:
        >>> import keras, customgrad
        >>> x = keras.ops.convert_to_tensor([float("-inf"), float("-inf")])
        >>> [float(v) for v in customgrad.grad(lambda x: customgrad.ops.logsumexp(x))(x)]
        [0.0, 0.0]
    """

    @custom_gradient
    def lse(x):
        peak = kops.max(x, axis=axis, keepdims=True)
        peak = kops.where(kops.isfinite(peak), peak, kops.zeros_like(peak))
        total = kops.sum(kops.exp(x - peak), axis=axis, keepdims=True)
        value = kops.log(total) + peak

        def grad(upstream):
            if not keepdims and axis is not None:
                upstream = kops.expand_dims(upstream, axis)
            safe_total = kops.where(total > 0, total, kops.ones_like(total))
            weights = kops.where(total > 0, kops.exp(x - peak) / safe_total, kops.zeros_like(x))
            return upstream * weights

        if not keepdims:
            value = kops.squeeze(value, axis) if axis is not None else kops.reshape(value, ())
        return value, grad

    return lse(x)


@custom_gradient
def _swish(x):
    # grad_fn closes over x only and recomputes the sigmoid: the forward keeps nothing else.
    def grad(upstream):
        s = kops.sigmoid(x)
        # s * (1 + x * (1 - s)), nested so that at most two full-size temporaries live at once
        # besides s: the backward peaks no higher than plain autodiff's fused gradient kernels
        return upstream * (s * (1.0 + x * (1.0 - s)))

    return x * kops.sigmoid(x), grad


def swish(x: Any) -> Any:
    """x * sigmoid(x), memory-efficient: the backward recomputes sigmoid(x) from x instead of
    keeping the forward's intermediates.

    Examples:
        >>> import keras, customgrad
        >>> round(float(customgrad.grad(customgrad.ops.swish)(keras.ops.convert_to_tensor(0.0))), 4)
        0.5
    """
    return _swish(x)
