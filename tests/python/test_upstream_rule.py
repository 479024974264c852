"""The one rule for how grad_fn receives upstream gradients, case by case from
tests/upstream_rule.json (the R suite reads the same table)."""

import json
import re
from pathlib import Path

import pytest
from helpers import native_grad, npy, t
from keras import ops

import customgrad
from customgrad import CustomGradientError

CASES = json.loads((Path(__file__).parents[1] / "upstream_rule.json").read_text())["cases"]


def make_grad_fn(name, received):
    """The grad_fn signatures the table names; each records what it was called with and returns
    the gradient of sum(outputs) for an f whose outputs are x * (1, 2, ...)."""

    def answer(*args, **kwargs):
        received.append((args, kwargs))
        return ops.convert_to_tensor(received_total[0])

    received_total = [None]

    grad_fns = {
        "one": lambda dy: answer(dy),
        "two": lambda dy1, dy2: answer(dy1, dy2),
        "three": lambda a, b, c: answer(a, b, c),
        "varargs": lambda *dys: answer(*dys),
        "upstream_only": lambda *, upstream: answer(upstream=upstream),
        "varargs_upstream": lambda *dys, upstream: answer(*dys, upstream=upstream),
        "none": lambda: answer(),
    }
    return grad_fns[name], received_total


def make_f(output_kind, grad_fn):
    @customgrad.custom_gradient
    def f(x):
        if output_kind == "single":
            return x * 1.0, grad_fn
        if output_kind == "pair":
            return (x * 1.0, x * 2.0), grad_fn
        return (x * 1.0,), grad_fn

    return f


def loss(output):
    if isinstance(output, tuple):
        return sum(ops.sum(o) * (i + 1) for i, o in enumerate(output))
    return ops.sum(output)


@pytest.mark.autodiff
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['grad_fn']}-{c['output']}")
def test_upstream_rule(case):
    received = []
    grad_fn, total = make_grad_fn(case["grad_fn"], received)
    total[0] = 7.0  # what grad_fn answers: checked to arrive as the gradient
    f = make_f(case["output"], grad_fn)
    x = t(2.0)
    if case["positional"] == "error":
        with pytest.raises(CustomGradientError, match=re.escape("has the signature (")) as info:
            native_grad(lambda x: loss(f(x)), x)
        assert "<lambda>` of `make_f.<locals>.f` has the signature" in str(info.value) and "upstream gradient" in str(info.value)
        assert received == []
        return
    (g,) = native_grad(lambda x: loss(f(x)), x)
    assert float(npy(g)) == 7.0
    (args, kwargs), = received
    n_outputs = {"single": 1, "pair": 2, "tuple1": 1}[case["output"]]
    per_output = [float(i + 1) for i in range(n_outputs)]  # d loss / d output_i
    whole = per_output[0] if case["output"] == "single" else tuple(per_output)
    as_floats = lambda v: tuple(float(npy(e)) for e in v) if isinstance(v, tuple) else float(npy(v))
    expected = {"per_output": per_output, "whole": [whole], "none": []}[case["positional"]]
    assert [as_floats(a) for a in args] == expected
    if case["upstream"]:
        assert as_floats(kwargs["upstream"]) == whole
    else:
        assert "upstream" not in kwargs


# grad_fns with defaults, whose defaults torch.compile's tracer cannot read (see below)
WITH_DEFAULTS = {
    "defaulted_second": lambda dy, dy2=None: None,
    "upstream_none": lambda *args, upstream=None: None,
    "variables_none": lambda dy, variables=None: None,
    "keyword_defaults": lambda dy, *, scale=1.0, upstream=None: None,
}
OUTPUTS = {"single": 1.0, "pair": (1.0, 2.0), "tuple1": (1.0,)}


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("grad_fn", sorted({c["grad_fn"] for c in CASES} | set(WITH_DEFAULTS)))
def test_the_rule_reads_no_defaults_while_compiling_and_calls_alike(grad_fn, output):
    """While torch.compile traces (`introspect=False`) the rule reads no function defaults, which
    its tracer cannot: every call that works eagerly is made the same way, and a call refused
    eagerly is at most left to Python's own TypeError."""
    from customgrad._convention import inspect_grad_fn, upstream_arguments

    fn = WITH_DEFAULTS.get(grad_fn) or make_grad_fn(grad_fn, [])[0]
    out = OUTPUTS[output]
    try:
        eager = upstream_arguments(fn, fn, out, out, inspect_grad_fn(fn))
    except CustomGradientError:
        return  # refused eagerly, by name; while compiling Python may be the one to refuse
    compiling = inspect_grad_fn(fn, introspect=False)
    assert upstream_arguments(fn, fn, out, out, compiling) == eager
