"""customgrad: custom gradients that behave the same on every Keras 3 backend.

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
"""

from types import ModuleType
from typing import TYPE_CHECKING

from ._messages import CustomGradientError, GradFnArityError, GradFnResultError
from ._autodiff import grad, hvp, jvp, value_and_grad, vjp
from ._checker import Check, GradientCheckError, GradientCheckReport, check_gradients
from ._core import custom_gradient
from ._patching import patch_keras, patch_tensorflow, unpatch_keras, unpatch_tensorflow
from ._remat import remat

if TYPE_CHECKING:  # what `customgrad.ops` and `customgrad.layers` are, for type checkers
    from . import layers, ops

__all__ = ["custom_gradient", "CustomGradientError", "GradFnArityError", "GradFnResultError",
           "grad", "value_and_grad", "vjp", "jvp", "hvp", "check_gradients", "GradientCheckError",
           "GradientCheckReport", "Check", "remat", "patch_keras", "unpatch_keras",
           "patch_tensorflow", "unpatch_tensorflow", "ops", "layers"]
__version__ = "0.1.0"


def __getattr__(name: str) -> ModuleType:
    # `customgrad.ops` and `customgrad.layers` load on first use, so `import customgrad`
    # decorates nothing and imports no backend module.
    if name in ("ops", "layers"):
        import importlib

        return importlib.import_module(f"customgrad.{name}")
    raise AttributeError(f"module 'customgrad' has no attribute {name!r}")
