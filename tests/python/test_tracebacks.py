"""A mistake in grad_fn or f prints a short traceback that ends at the user's call: no customgrad
frame between the user's line and the message, at most 15 lines above it, on every backend, under
customgrad's transforms and the framework's own; CUSTOMGRAD_TRACEBACK_FILTERING=off keeps
customgrad's frames (python/customgrad/_tracebacks.py).
"""

import traceback

import keras
import pytest
from keras import ops

import customgrad
from customgrad import CustomGradientError
from customgrad._tracebacks import OWN_DIR

BACKEND = keras.backend.backend()


@customgrad.custom_gradient
def wrong_shape(x):
    def grad(upstream):
        return ops.ones((3,))  # x has shape (2,): the mistake
    return ops.log(1.0 + ops.exp(x)), grad


@customgrad.custom_gradient
def no_pair(x):
    return ops.exp(x)  # the mistake: no (output, grad_fn) pair


def _framework_gradient(fn, x):
    """The framework's own gradient of sum(fn(x)), as a user of that framework writes it."""
    if BACKEND == "jax":
        import jax
        return jax.grad(lambda v: ops.sum(fn(v)))(x)
    if BACKEND == "tensorflow":
        import tensorflow as tf
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ops.sum(fn(x))
        return tape.gradient(y, x)
    import torch
    x = x.detach().requires_grad_()
    torch.sum(fn(x)).backward()
    return x.grad


CASES = {
    "grad_fn, customgrad.grad": lambda x: customgrad.grad(lambda v: ops.sum(wrong_shape(v)))(x),
    "grad_fn, the framework's gradient": lambda x: _framework_gradient(wrong_shape, x),
    "f, a direct call": lambda x: no_pair(x),
}


def _printed(case) -> list:
    """The lines Python prints for the case's exception: its last traceback block."""
    x = ops.convert_to_tensor([1.0, 2.0])
    with pytest.raises(CustomGradientError) as caught:
        CASES[case](x)
    text = "".join(traceback.format_exception(caught.value))
    return text[text.rindex("Traceback (most recent call last):"):].splitlines()


@pytest.mark.skipif(BACKEND == "numpy", reason="the numpy backend has no autodiff")
@pytest.mark.parametrize("case", CASES)
def test_a_mistake_prints_a_short_traceback_without_customgrads_frames(case, monkeypatch):
    monkeypatch.delenv("CUSTOMGRAD_TRACEBACK_FILTERING", raising=False)
    lines = _printed(case)
    message = next(i for i, line in enumerate(lines) if line.startswith("customgrad."))
    assert __file__ in lines[1]  # the first frame is the user's (this test's) call
    # this test's own frames (three) stand for the user's one line: "Traceback", that frame
    ours = max(i for i, line in enumerate(lines[:message]) if line.startswith(f'  File "{__file__}'))
    after = next((i for i in range(ours + 1, message) if lines[i].startswith("  File ")), message)
    above = 3 + message - after
    print(f"{BACKEND}, {case}: {above} lines above the message, for a one-line script")
    assert above <= 15, "\n".join(lines)
    assert not [line for line in lines if OWN_DIR in line], "\n".join(lines)
    # the note says how to have every frame (under jax's own transformations, jax's note)
    assert any("CUSTOMGRAD_TRACEBACK_FILTERING=off keeps them" in line
               or "JAX_TRACEBACK_FILTERING=off" in line for line in lines)


@pytest.mark.skipif(BACKEND == "numpy", reason="the numpy backend has no autodiff")
@pytest.mark.parametrize("case", ["grad_fn, customgrad.grad", "f, a direct call"])
def test_filtering_off_keeps_customgrads_frames(case, monkeypatch):
    monkeypatch.setenv("CUSTOMGRAD_TRACEBACK_FILTERING", "off")
    lines = _printed(case)
    assert [line for line in lines if OWN_DIR in line], "\n".join(lines)
    assert not any("CUSTOMGRAD_TRACEBACK_FILTERING" in line for line in lines)
