"""Runs programs on the Keras backend of this process (KERAS_BACKEND) and writes one JSON line
per program: its output values and gradients, or the exception it raised (type and message).

    KERAS_BACKEND=torch python tests/differential/runner.py --seed 0 --start 0 --stop 20

A program's mode says how the gradient is taken: customgrad's own `grad`, `value_and_grad` and
`vjp`; the framework's autodiff (`native`: jax.value_and_grad, tf.GradientTape,
torch.autograd.grad); compiled (jax.jit, tf.function, torch.compile) around customgrad's API,
around the framework's autodiff, or inside it; second order through grad_fn's own ops.
"""

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # after the path, so the sibling modules import
import numpy as np
from keras import ops

import customgrad
from build import assemble, build, flatten, leaves_like
from programs import (COMPILE_RATE, arg_leaves, argnums, differentiated,
                      loss_weights, program)

BACKEND = keras.backend.backend()
# torch.compile's aot_eager backend traces with dynamo and AOTAutograd, where a custom
# autograd.Function is handled, and skips inductor's code generation (seconds per program).
TORCH_COMPILE_BACKEND = "aot_eager"


def loss_of(p, output):
    """sum_j sum(w_j * out_j) over the output leaves the loss uses."""
    total = None
    for j, (out, y) in enumerate(zip(p["outputs"], flatten(output))):
        if y is None or not out.get("used"):
            continue
        y = ops.convert_to_tensor(y)
        dtype = keras.backend.standardize_dtype(y.dtype)
        w = ops.convert_to_tensor(np.asarray(loss_weights(tuple(y.shape), j), dtype))
        term = ops.sum(ops.multiply(y, w))
        total = term if total is None else ops.add(total, term)
    return total


def cotangents(p, output):
    """The weights of the loss in the structure of the output (zeros for unused leaves)."""
    leaves = []
    for j, (out, y) in enumerate(zip(p["outputs"], flatten(output))):
        if y is None:
            leaves.append(None)
            continue
        y = ops.convert_to_tensor(y)
        w = np.asarray(loss_weights(tuple(y.shape), j), keras.backend.standardize_dtype(y.dtype))
        leaves.append(ops.convert_to_tensor(w if out.get("used") else np.zeros_like(w)))
    it = iter(leaves)
    return _restructure(output, it)


def _restructure(tree, it):
    if isinstance(tree, dict):
        return {k: _restructure(tree[k], it) for k in sorted(tree)}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_restructure(item, it) for item in tree)
    return next(it)


class Program:
    """Program p made real: `loss(*args)` on the whole arguments, `loss_of_leaves(*xs)` on the
    leaves the mode differentiates (the others are constants)."""

    def __init__(self, p):
        self.p = p
        self.f, self.values, self.variable = build(p)
        self.args = [assemble(arg, self.values) for arg in p["args"]]
        self.kwargs = {k: _keyword(kw) for k, kw in p["kwargs"].items()}
        self.wrt = differentiated(p)

    def call_kwargs(self, args):
        if self.p["fault"] != "keyword_differentiated":
            return self.kwargs
        # a tensor being differentiated, passed by keyword: it would lose its gradient
        first = flatten(args)[0]
        return dict(self.kwargs, gamma=ops.multiply(first, 1.0))

    def loss(self, *args):
        return loss_of(self.p, self.f(*args, **self.call_kwargs(args)))

    def loss_of_leaves(self, *xs):
        values = list(self.values)
        for i, x in zip(self.wrt, xs):
            values[i] = x
        return self.loss(*[assemble(arg, values) for arg in self.p["args"]])

    def wrt_values(self):
        return [self.values[i] for i in self.wrt]


def _keyword(kw):
    if kw["kind"] == "pyfloat":
        return float(kw["value"])
    return ops.convert_to_tensor(np.asarray(kw["values"], kw["dtype"]))


def by_leaf(prog, grads) -> list:
    """Per leaf of the program: the gradient of a differentiated leaf, else None."""
    found = [None] * len(prog.p["leaves"])
    for i, g in zip(prog.wrt, grads):
        found[i] = g
    return found


# ---- the modes: each returns (loss or None, one gradient or None per leaf, the variable's
# gradient or NOT_TAKEN)
NOT_TAKEN = "not taken"


def mode_grad(prog, with_value=False):
    nums = argnums(prog.p)
    fn = customgrad.value_and_grad if with_value else customgrad.grad
    result = fn(prog.loss, argnums=tuple(nums))(*prog.args)
    loss, grads = result if with_value else (None, result)  # a tuple: argnums is a tuple
    return loss, per_leaf(prog, nums, grads), NOT_TAKEN


def mode_vjp(prog):
    output, vjp_fn = customgrad.vjp(lambda *a: prog.f(*a, **prog.kwargs), *prog.args)
    grads = vjp_fn(cotangents(prog.p, output))
    return None, per_leaf(prog, range(len(prog.args)), grads), NOT_TAKEN


def per_leaf(prog, positions, grads) -> list:
    """Per leaf of the program: its gradient among `grads`, one per argument at `positions`,
    each in that argument's structure (None for leaves of other arguments)."""
    found = [None] * len(prog.p["leaves"])
    for position, grad in zip(positions, grads):
        node = prog.p["args"][position]
        for i, leaf_grad in zip(arg_leaves(node), leaves_like(grad, node)):
            found[i] = leaf_grad
    return found


def native(prog, loss_fn, xs, create_graph=False):
    """The framework's own value and gradient of `loss_fn(*xs)`, and of the variable f reads
    (None if it reads none)."""
    if BACKEND == "jax":
        import jax
        if prog.variable is None:
            loss, grads = jax.value_and_grad(loss_fn, argnums=tuple(range(len(xs))))(*xs)
            return loss, list(grads), None

        def with_variable(*values):  # jax differentiates a variable's value, as Keras's trainer
            with keras.StatelessScope(state_mapping=[(prog.variable, values[-1])]):
                return loss_fn(*values[:-1])

        loss, grads = jax.value_and_grad(with_variable, argnums=tuple(range(len(xs) + 1)))(
            *xs, prog.variable.value)
        return loss, list(grads[:-1]), grads[-1]
    sources = list(xs) + ([prog.variable.value] if prog.variable is not None else [])
    if BACKEND == "tensorflow":
        import tensorflow as tf
        with tf.GradientTape() as tape:
            tape.watch(list(xs))
            loss = loss_fn(*xs)
        grads = tape.gradient(loss, sources)
    else:
        import torch
        xs = [x if x.requires_grad else x.detach().requires_grad_(True) for x in xs]
        loss = loss_fn(*xs)
        grads = torch.autograd.grad(loss, xs + sources[len(xs):], allow_unused=True,
                                    create_graph=create_graph)
    var_grad = grads[len(xs)] if prog.variable is not None else None
    return loss, list(grads[:len(xs)]), var_grad


def compiled(fn):
    if BACKEND == "jax":
        import jax
        return jax.jit(fn)
    if BACKEND == "tensorflow":
        import tensorflow as tf
        return tf.function(fn)
    import torch
    # every program compiles the same runner code: without a reset dynamo would count them as
    # recompilations of one function and, past its limit, run them eagerly
    torch._dynamo.reset()
    return torch.compile(fn, backend=TORCH_COMPILE_BACKEND)


def mode_native(prog, compile_where=None):
    xs = prog.wrt_values()
    if compile_where == "around_api":
        nums = tuple(range(len(xs)))
        loss, grads = compiled(customgrad.value_and_grad(prog.loss_of_leaves, argnums=nums))(*xs)
        return loss, by_leaf(prog, grads), NOT_TAKEN
    if compile_where == "around_native" and BACKEND != "torch":
        # jax.jit(jax.value_and_grad(...)); the tape inside tf.function (torch: backward()
        # outside a compiled forward is its own way, as below)
        loss, grads, var_grad = compiled(lambda *a: native(prog, prog.loss_of_leaves, a))(*xs)
    elif compile_where is not None:
        loss, grads, var_grad = native(prog, compiled(prog.loss_of_leaves), xs)
    else:
        loss, grads, var_grad = native(prog, prog.loss_of_leaves, xs)
    # the framework's own None for a leaf it saw no path to is zero here
    grads = [ops.zeros_like(x) if g is None else g for x, g in zip(xs, grads)]
    if prog.variable is None:
        return loss, by_leaf(prog, grads), NOT_TAKEN
    if var_grad is None:
        var_grad = ops.zeros_like(prog.variable.value)
    return loss, by_leaf(prog, grads), var_grad


def mode_second(prog, native_grads=False):
    """The gradient of sum(u * dloss/dx): customgrad.grad twice, or the framework's own."""
    u = ops.convert_to_tensor(np.asarray(prog.p["second_weights"], prog.p["leaves"][0]["dtype"]))
    if native_grads:
        def inner(x):
            return ops.sum(ops.multiply(native(prog, prog.loss, [x], True)[1][0], u))
        loss, grads, _ = native(prog, inner, prog.args)
    else:
        def inner(x):
            return ops.sum(ops.multiply(customgrad.grad(prog.loss)(x), u))
        loss, g = customgrad.value_and_grad(inner)(*prog.args)
        grads = [g]
    return loss, by_leaf(prog, grads), NOT_TAKEN


MODES = {
    "grad": mode_grad,
    "value_and_grad": lambda prog: mode_grad(prog, with_value=True),
    "vjp": mode_vjp,
    "native": mode_native,
    "compiled_api": lambda prog: mode_native(prog, "around_api"),
    "compiled_native": lambda prog: mode_native(prog, "around_native"),
    "native_of_compiled": lambda prog: mode_native(prog, "inside_native"),
    "second": mode_second,
    "second_native": lambda prog: mode_second(prog, native_grads=True),
}


def plain(x):
    """A tensor as (nested list of float64, dtype name); None stays None."""
    if x is None:
        return None, None
    if hasattr(x, "detach"):
        x = x.detach()
    dtype = keras.backend.standardize_dtype(x.dtype) if hasattr(x, "dtype") else type(x).__name__
    return np.asarray(ops.convert_to_numpy(x), dtype=np.float64).tolist(), dtype


def run(p: dict) -> dict:
    """The outcome of program p on this backend (never raises for the program's sake)."""
    record = {"id": p["id"], "backend": BACKEND, "mode": p["mode"], "error": None}
    began = time.perf_counter()
    uses_float64 = any(leaf["dtype"] == "float64" for leaf in p["leaves"])
    scope = customgrad._core.backend_module().float64_scope() if uses_float64 else _nothing()
    try:
        with scope:
            prog = Program(p)
            output = prog.f(*prog.args, **prog.kwargs)
            record["values"], record["value_dtypes"] = _columns(flatten(output))
            loss, grads, var_grad = MODES[p["mode"]](prog)
            record["loss"] = None if loss is None else float(plain(loss)[0])
            record["grads"], record["grad_dtypes"] = _columns(grads)
            if var_grad is not NOT_TAKEN:
                record["var_grad"] = plain(var_grad)[0]
    except Exception as e:  # a program's failure is its outcome, recorded
        record.update(error=type(e).__name__, message=str(e)[:2000],
                      where=traceback.format_exc(limit=-3)[-1500:])
    record["seconds"] = round(time.perf_counter() - began, 3)
    return record


def _columns(tensors):
    """([values], [dtypes]) of a list of tensors (None for None)."""
    pairs = [plain(x) for x in tensors]
    return [v for v, _ in pairs], [d for _, d in pairs]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=100)
    parser.add_argument("--compile-rate", type=float, default=COMPILE_RATE)
    parser.add_argument("--out", help="the JSON lines file (default: stdout)")
    a = parser.parse_args(argv)
    stream = open(a.out, "w") if a.out else sys.stdout
    with stream:
        for index in range(a.start, a.stop):
            record = run(program(a.seed, index, a.compile_rate))
            stream.write(json.dumps(record) + "\n")
            stream.flush()


if __name__ == "__main__":
    main()
