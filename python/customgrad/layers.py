"""Keras layers built on `customgrad.ops`, serializable so that models using them save to
`.keras` files and load back (registered in the "customgrad" package).

Examples:
    >>> import keras, customgrad
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, customgrad.layers.GradientReversal(0.5)(inputs))
    >>> config = model.get_config()  # doctest: +ELLIPSIS
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops as kops

from . import _messages as msg, ops


def _check_number(layer: str, name: str, value: Any, positive: bool = False) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise msg.layer_not_a_number(layer, name, value)
    if positive and not value > 0:
        raise msg.layer_not_positive(layer, name, value)
    return float(value)


@keras.saving.register_keras_serializable(package="customgrad")
class ScaleGradient(keras.layers.Layer):
    """Identity forward; multiplies the gradient flowing back by `scale`."""

    def __init__(self, scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = _check_number(type(self).__name__, "scale", scale)

    def call(self, inputs: Any) -> Any:
        return ops.scale_gradient(inputs, self.scale)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="customgrad")
class GradientReversal(ScaleGradient):
    """Identity forward; multiplies the gradient flowing back by -scale (the gradient reversal
    layer of domain-adversarial training)."""

    def call(self, inputs: Any) -> Any:
        return ops.reverse_gradient(inputs, self.scale)


@keras.saving.register_keras_serializable(package="customgrad")
class ClipGradient(keras.layers.Layer):
    """Identity forward; clips the gradient flowing back, element-wise to [min_value, max_value]
    and/or to an L2 norm of at most `max_norm` (with `across_replicas=True`, the norm one device
    would see under a data-parallel engine: see `customgrad.ops.clip_gradient_norm`)."""

    def __init__(self, min_value: float | None = None, max_value: float | None = None,
                 max_norm: float | None = None, across_replicas: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if min_value is None and max_value is None and max_norm is None:
            raise msg.clip_layer_without_bounds()
        if (min_value is None) != (max_value is None):
            raise msg.clip_layer_half_bounds(min_value, max_value)
        self.min_value = None if min_value is None else _check_number(
            "ClipGradient", "min_value", min_value)
        self.max_value = None if max_value is None else _check_number(
            "ClipGradient", "max_value", max_value)
        self.max_norm = None if max_norm is None else _check_number(
            "ClipGradient", "max_norm", max_norm, positive=True)
        if not isinstance(across_replicas, bool):
            raise msg.bool_option("customgrad.layers.ClipGradient", "across_replicas",
                                  across_replicas)
        self.across_replicas = across_replicas

    def call(self, inputs: Any) -> Any:
        x = inputs
        if self.max_norm is not None:
            x = ops.clip_gradient_norm(x, self.max_norm,
                                        across_replicas=self.across_replicas)
        if self.min_value is not None:
            x = ops.clip_gradient(x, self.min_value, self.max_value)
        return x

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "min_value": self.min_value,
                "max_value": self.max_value, "max_norm": self.max_norm,
                "across_replicas": self.across_replicas}


@keras.saving.register_keras_serializable(package="customgrad")
class StraightThroughQuantizer(keras.layers.Layer):
    """Quantizes to `levels` evenly spaced values in [min_value, max_value] in the forward pass;
    the gradient passes straight through (identity), so layers before it still train."""

    def __init__(self, levels: int = 16, min_value: float = -1.0, max_value: float = 1.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(levels, int) or isinstance(levels, bool) or levels < 2:
            raise msg.quantizer_levels(levels)
        self.levels = levels
        self.min_value = _check_number("StraightThroughQuantizer", "min_value", min_value)
        self.max_value = _check_number("StraightThroughQuantizer", "max_value", max_value)
        if not self.max_value > self.min_value:
            raise msg.quantizer_range(min_value, max_value)

    def call(self, inputs: Any) -> Any:
        step = (self.max_value - self.min_value) / (self.levels - 1)
        clipped = kops.clip(inputs, self.min_value, self.max_value)
        return ops.round_ste((clipped - self.min_value) / step) * step + self.min_value

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "levels": self.levels, "min_value": self.min_value,
                "max_value": self.max_value}
