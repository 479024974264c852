"""A guard on the work customgrad does per eager call: the Python functions of customgrad's own
code that one forward + backward enters, counted with `sys.setprofile`.

Times move with the neighbours of a shared machine; these counts do not (nor with the
framework's version: only customgrad's own frames count). A change that adds work to every
eager call shows here as a count above its pin; one that removes some, as a count below it,
and the pin is then lowered, so that the guard stays tight. What each piece of that work costs
and buys is docs/benchmarks.md's cost table (`bench/cost_table.py`).
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import keras
import pytest
from keras import ops

import customgrad

from helpers import BACKEND

PACKAGE = str(Path(customgrad.__file__).parent)

# {backend: {function: customgrad frames per eager forward + backward}}
PINNED = {
    # torch softplus 15: tensors.plain_outputs reads f's result for both fast paths, eager and
    # compiled (one call more than the inline check it replaced, to keep one reader)
    "torch": {"softplus": 15, "three": 21},
    "tensorflow": {"softplus": 70, "three": 105},
    "jax": {"softplus": 78, "three": 114},
}
MARGIN = 2  # frames either way: a branch taken by a framework version, not new work


@customgrad.custom_gradient
def softplus(x):
    e = ops.exp(x)
    return ops.log1p(e), lambda dy: dy - dy / (1.0 + e)


@customgrad.custom_gradient
def three(a, b, c):
    def grad(du, dv):
        return du * b + dv * ops.cos(a) * c, du * a, du + dv * ops.sin(a)

    return (a * b + c, ops.sin(a) * c), grad


FUNCTIONS = {"softplus": (softplus, 1), "three": (three, 3)}


def _eager_step(fn, n_inputs):
    """forward + backward of the sum of fn's outputs, with the backend's own autodiff."""

    def loss(*xs):
        out = fn(*xs)
        return sum(ops.sum(o) for o in (out if isinstance(out, tuple) else (out,)))

    if BACKEND == "jax":
        import jax

        return jax.grad(loss, argnums=tuple(range(n_inputs)))
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def step(*xs):
            with tf.GradientTape() as tape:
                tape.watch(xs)
                value = loss(*xs)
            return tape.gradient(value, xs)

        return step
    import torch

    def step(*xs):
        xs = [x.detach().requires_grad_(True) for x in xs]
        return torch.autograd.grad(loss(*xs), xs)

    return step


# comprehensions are frames of their own on Python 3.11, inlined from 3.12 on (PEP 709)
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>"}


def customgrad_frames(step, xs) -> collections.Counter:
    """{"module path:function": calls} of customgrad's own Python functions during one
    `step(*xs)` (comprehensions not counted: they are no frame from Python 3.12 on).
    bench/cost_table.py reports the same count by module."""
    counts = collections.Counter()

    def profile(frame, event, _arg):
        if (event == "call" and frame.f_code.co_filename.startswith(PACKAGE)
                and frame.f_code.co_name not in COMPREHENSIONS):
            code = frame.f_code
            counts[f"{Path(code.co_filename).relative_to(PACKAGE)}:{code.co_qualname}"] += 1

    sys.setprofile(profile)
    try:
        step(*xs)
    finally:
        sys.setprofile(None)
    return counts


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_an_eager_call_does_the_pinned_work(name):
    if BACKEND not in PINNED:
        pytest.skip(f"no eager autodiff on the {BACKEND} backend")
    fn, n_inputs = FUNCTIONS[name]
    xs = [keras.ops.convert_to_tensor([0.5, -1.0, 2.0]) for _ in range(n_inputs)]
    step = _eager_step(fn, n_inputs)
    for _ in range(3):  # first calls fill caches (signatures, imports)
        step(*xs)
    counts = customgrad_frames(step, xs)
    total = sum(counts.values())
    pinned = PINNED[BACKEND][name]
    listing = "\n".join(f"  {n} {where}" for where, n in sorted(counts.items()))
    assert abs(total - pinned) <= MARGIN, (
        f"one eager forward + backward of {name} on {BACKEND} enters {total} of customgrad's "
        f"Python functions; the pin is {pinned} (± {MARGIN}). Above it: new work on every call, "
        f"to remove or to justify in docs/benchmarks.md's cost table; below it: lower the pin "
        f"in {Path(__file__).name}.\n{listing}")


@pytest.mark.backends("torch")
def test_every_row_of_the_cost_table_computes_softplus_gradient():
    """bench/cost_table.py builds an eager call up from the design floor, one piece of
    customgrad's work per row, with customgrad's internals: each row still runs and gives
    softplus's gradient (the sigmoid), so the table measures working steps."""
    import numpy as np

    bench = str(Path(__file__).resolve().parents[2] / "bench")
    sys.path.insert(0, bench)
    try:
        import cost_table
    finally:
        sys.path.remove(bench)
    x = keras.ops.convert_to_tensor([0.5, -1.0, 2.0])
    rows = cost_table._torch_rows()
    assert list(rows) == [row for row, _ in cost_table.TORCH_ROWS]
    sigmoid = 1.0 / (1.0 + np.exp(-np.array([0.5, -1.0, 2.0])))
    for row, step in rows.items():
        (gx,) = step(x)
        np.testing.assert_allclose(gx.detach().cpu().numpy(), sigmoid, rtol=1e-5, err_msg=row)
