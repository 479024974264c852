"""The one rule for how grad_fn receives upstream gradients, case by case from
tests/upstream_rule.json (the R suite reads the same table)."""

import collections
import json
import re
from pathlib import Path

import pytest
from helpers import native_grad, npy, t
import keras
from keras import ops

import customgrad
from customgrad import CustomGradientError

CASES = json.loads((Path(__file__).parents[1] / "upstream_rule.json").read_text())["cases"]


def make_grad_fn(name, received):
    """The grad_fn signatures the table names; each records what it was called with and returns
    the gradient the test sets in `received_total`."""

    def answer(*args, **kwargs):
        received.append((args, kwargs))
        return ops.convert_to_tensor(received_total[0])

    received_total = [None]

    grad_fns = {
        "one": lambda dy: answer(dy),
        "two": lambda dy1, dy2: answer(dy1, dy2),
        "three": lambda a, b, c: answer(a, b, c),
        "varargs": lambda *dys: answer(*dys),
        "varargs_kwargs": lambda *g, **kwargs: answer(*g, **kwargs),
        "upstream_only": lambda *, upstream: answer(upstream=upstream),
        "varargs_upstream": lambda *dys, upstream: answer(*dys, upstream=upstream),
        "none": lambda: answer(),
    }
    return grad_fns[name], received_total


Pair = collections.namedtuple("Pair", ["first", "second"])


def make_output(kind, x):
    """The output kinds of the table, each leaf x times its place in flattening order (1, 2, 3)."""
    return {
        "single": lambda: x * 1.0,
        "pair": lambda: (x * 1.0, x * 2.0),
        "tuple1": lambda: (x * 1.0,),
        "nested": lambda: (x * 1.0, (x * 2.0, x * 3.0)),
        "dict": lambda: {"b": x * 2.0, "a": x * 1.0},  # flattened in key order: a, b
        "dict1": lambda: {"a": x * 1.0},
        "namedtuple": lambda: Pair(x * 1.0, x * 2.0),
    }[kind]()


def make_f(output_kind, grad_fn):
    @customgrad.custom_gradient
    def f(x):
        return make_output(output_kind, x), grad_fn

    return f


def loss(output):
    """Weights the i-th leaf (flattening order) by i: the upstream of leaf i is i."""
    return sum(ops.sum(leaf) * (i + 1) for i, leaf in enumerate(keras.tree.flatten(output)))


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
        assert "<lambda>` of `make_f.<locals>.f` has the signature" in str(info.value)
        assert "upstream gradient" in str(info.value)
        assert received == []
        return
    (g,) = native_grad(lambda x: loss(f(x)), x)
    assert float(npy(g)) == 7.0
    (args, kwargs), = received
    output = make_output(case["output"], x)
    n_leaves = len(keras.tree.flatten(output))
    per_leaf = [float(i + 1) for i in range(n_leaves)]  # d loss / d leaf i
    if case["positional"] == "per_leaf":
        assert [float(npy(a)) for a in args] == per_leaf
    elif case["positional"] == "whole":
        (whole,) = args
        assert type(whole) is type(output) or (isinstance(whole, (list, tuple))
                                                and type(output) is tuple)
        assert [float(npy(leaf)) for leaf in keras.tree.flatten(whole)] == per_leaf
    else:
        assert args == ()
    if case["upstream"]:
        upstream = kwargs["upstream"]
        assert [float(npy(leaf)) for leaf in keras.tree.flatten(upstream)] == per_leaf
        assert keras.tree.is_nested(upstream) == keras.tree.is_nested(output)
    else:
        assert "upstream" not in kwargs


@pytest.mark.autodiff
def test_a_grad_fn_for_tf_custom_gradient_forwards_its_kwargs_unchanged():
    """tf.custom_gradient passes `**kwargs` only `variables=` (when f read variables); code
    written for it, as TensorFlow Probability's wrapper, forwards them to a function that takes
    no `upstream`: customgrad passes none either."""
    def bwd(g):
        return g * 3.0

    @customgrad.custom_gradient
    def triple(x):
        def grad_fn(*g, **kwargs):
            return bwd(*g, **kwargs)
        return x * 3.0, grad_fn

    (g,) = native_grad(lambda x: ops.sum(triple(x)), t(2.0))
    assert float(npy(g)) == 3.0


# grad_fns with defaults, whose defaults torch.compile's tracer cannot read (see below)
WITH_DEFAULTS = {
    "defaulted_second": lambda dy, dy2=None: None,
    "upstream_none": lambda *args, upstream=None: None,
    "variables_none": lambda dy, variables=None: None,
    "keyword_defaults": lambda dy, *, scale=1.0, upstream=None: None,
}
OUTPUTS = {"single": 1.0, "pair": (1.0, 2.0), "tuple1": (1.0,), "nested": (1.0, (2.0, 3.0)),
           "dict": {"b": 2.0, "a": 1.0}, "dict1": {"a": 1.0}, "namedtuple": Pair(1.0, 2.0)}


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
