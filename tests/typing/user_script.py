"""A typical user script, type-checked by tests/integration/test_types_and_lint.py: pyright must
report no error in it. It runs too (`KERAS_BACKEND=jax python tests/typing/user_script.py`).

`assert_type` pins what a type checker infers where customgrad's annotations decide it, and each
`# pyright: ignore[...]` marks a call that must be an error: the check reports an ignore comment
that is not needed, so these lines fail the test if a signature is lost (becomes `...` or Any).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, assert_type

import keras
from keras import ops

import customgrad
from customgrad import GradientCheckReport
from customgrad.layers import ClipGradient, GradientReversal, StraightThroughQuantizer

if TYPE_CHECKING:
    from collections.abc import Callable


# custom_gradient keeps the decorated function's parameters
@customgrad.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(upstream):
        return upstream * (1.0 - 1.0 / (1.0 + e))

    return ops.log(1.0 + e), grad


@customgrad.custom_gradient(forward_mode=True)
def scaled(x, scale: float = 2.0):
    return x * scale, lambda dy: dy * scale


x = ops.convert_to_tensor(100.0)
y = log1pexp(x)
print(float(customgrad.grad(log1pexp)(x)))
print(float(scaled(x, scale=3.0)))


# a function with annotations keeps them through the decorator
@customgrad.custom_gradient
def typed(x: Any, factor: int) -> tuple[Any, Callable[[Any], Any]]:
    return x * factor, lambda dy: dy * factor


typed(x, factor=2)

# grad, value_and_grad: the return arity follows has_aux
g = customgrad.grad(log1pexp)(x)
g_aux, aux = customgrad.grad(lambda v: (v * v, {"n": v + 1.0}), has_aux=True)(x)
value, g2 = customgrad.value_and_grad(log1pexp)(x)
(value2, aux2), g3 = customgrad.value_and_grad(lambda v: (v * v, v), has_aux=True)(x)
two = customgrad.grad(lambda a, b: a * b, argnums=(0, 1))(x, x)
d2 = customgrad.grad(customgrad.grad(lambda v: v**3))(ops.convert_to_tensor(2.0))
print(float(g), float(value), float(g2), float(g3), float(d2), len(two), float(aux["n"]), float(aux2))

# vjp and jvp: two values, three with has_aux
out, vjp_fn = customgrad.vjp(log1pexp, x)
(dx,) = vjp_fn(ops.ones_like(out))
out, vjp_fn, vjp_aux = customgrad.vjp(lambda v: (v * 2.0, [v]), x, has_aux=True)
primal_out, tangent_out = customgrad.jvp(scaled, (x,), (ops.ones_like(x),))
_, _, jvp_aux = customgrad.jvp(lambda v: (v * 2.0, v), (x,), (ops.ones_like(x),), has_aux=True)
(hv,) = customgrad.hvp(lambda v: ops.sum(customgrad.ops.log1pexp(v)), (x,), (ops.ones_like(x),))
print(float(dx), float(tangent_out), float(hv), float(jvp_aux), len(vjp_aux))

# check_gradients returns a report whose checks are typed
report = customgrad.check_gradients(log1pexp, ops.convert_to_tensor([0.0, 1.0]), modes=("rev",))
assert_type(report, GradientCheckReport)
assert report.passed and not report.failures
worst = max(check.error for check in report.checks)
try:
    customgrad.check_gradients(scaled, ops.convert_to_tensor(1.0), order=2, jacobian=True)
except customgrad.GradientCheckError as error:
    print(error.report.failures[0].where)
except customgrad.CustomGradientError as error:
    print(str(error))

# remat and patch_keras
block = customgrad.remat(lambda v, k=1.0: ops.sum(ops.tanh(v) * k))
print(float(customgrad.grad(block)(x, k=2.0)))
with customgrad.patch_keras():
    pass
customgrad.unpatch_keras()

# the ready-made ops and layers
ops_out = [
    customgrad.ops.log1pexp(x),
    customgrad.ops.clip_gradient(x, -1.0, 1.0),
    customgrad.ops.clip_gradient_norm(x, 1.0, across_replicas=False),
    customgrad.ops.scale_gradient(x, 0.5),
    customgrad.ops.reverse_gradient(x),
    customgrad.ops.round_ste(x),
    customgrad.ops.sign_ste(x),
    customgrad.ops.straight_through(ops.floor)(x),
    customgrad.ops.safe_sqrt(x),
    customgrad.ops.safe_norm(ops.stack([x, x]), axis=0),
    customgrad.ops.logsumexp(ops.stack([x, x])),
    customgrad.ops.swish(x),
]
inputs = keras.Input((4,))
hidden = GradientReversal(0.5)(inputs)
hidden = ClipGradient(min_value=-1.0, max_value=1.0, max_norm=5.0)(hidden)
hidden = StraightThroughQuantizer(levels=8)(hidden)
model = keras.Model(inputs, customgrad.layers.ScaleGradient(2.0)(hidden))
print(len(ops_out), worst, model.count_params())


def _calls_a_type_checker_must_refuse() -> None:
    """Never called: each line is an error at run time too."""
    scaled(x, scael=3.0)  # pyright: ignore[reportCallIssue]
    log1pexp(x, x)  # pyright: ignore[reportCallIssue]
    typed(x, factor="2")  # pyright: ignore[reportArgumentType]
    customgrad.ops.clip_gradient_norm(x, 1.0, True)  # pyright: ignore[reportCallIssue]
