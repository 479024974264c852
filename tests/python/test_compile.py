"""torch.compile: what dynamo traces per custom-gradient call site (the lean path,
`backends/torch/compiled.py`), and that the lean path keeps the general path's rules."""

import collections
from pathlib import Path

import numpy as np
import pytest
from helpers import npy, only_on, t

pytestmark = only_on("torch")

import keras  # noqa: E402
import torch  # noqa: E402
from keras import ops  # noqa: E402

import customgrad  # noqa: E402

PACKAGE = str(Path(customgrad.__file__).parent)  # (a venv's path may say "customgrad" too)

# customgrad's own frames dynamo inlines per call site of a one-input, one-output f whose grad_fn
# takes `dy` (forward and backward together): 11 with the lean path, 63 before it
OWN_FRAMES_PER_CALL = 12


def _swish_bwd(x, dy):
    s = ops.sigmoid(x)
    return dy * (s * (1.0 + x * (1.0 - s)))


@customgrad.custom_gradient
def swish(x):
    return x * ops.sigmoid(x), lambda dy: _swish_bwd(x, dy)


class _Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * ops.sigmoid(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return _swish_bwd(x, dy)


def _inlined_frames(fn, depth):
    """{(file, function): count} of the frames dynamo inlines compiling `depth` calls of `fn`
    (forward and backward), read by wrapping its inlining translator's `inline_call`."""
    from torch._dynamo import symbolic_convert

    translator = symbolic_convert.InliningInstructionTranslator
    if not hasattr(translator, "inline_call"):
        pytest.skip("this torch's dynamo has no InliningInstructionTranslator.inline_call to "
                    "count inlined frames with")
    counts = collections.Counter()
    original = translator.inline_call.__func__

    def counting(cls, parent, func, args, kwargs, **kw):
        code = func.get_code()
        counts[(code.co_filename, code.co_name)] += 1
        return original(cls, parent, func, args, kwargs, **kw)

    def step(x):
        for _ in range(depth):
            x = fn(x)
        return x.sum()

    x = t(np.linspace(-2.0, 2.0, 8)).requires_grad_(True)
    torch._dynamo.reset()
    translator.inline_call = classmethod(counting)
    try:
        torch.compile(step, backend="eager", fullgraph=True)(x).backward()
    finally:
        translator.inline_call = classmethod(original)
        torch._dynamo.reset()
    return counts, x.grad


def test_dynamo_inlines_few_customgrad_frames_per_call_site():
    """Per call site dynamo inlines at most OWN_FRAMES_PER_CALL of customgrad's frames, and of
    the others about as many as for a torch.autograd.Function of the same forward and backward:
    compile time grows with what it inlines (docs/benchmarks.md, "Time to the first step")."""
    depth = 3
    ours, grad = _inlined_frames(swish, depth)
    native, native_grad = _inlined_frames(_Swish.apply, depth)
    own = sum(n for (path, _), n in ours.items() if path.startswith(PACKAGE)) / depth
    total, native_total = sum(ours.values()) / depth, sum(native.values()) / depth
    listing = sorted((n, name) for (path, name), n in ours.items() if path.startswith(PACKAGE))
    assert 0 < own <= OWN_FRAMES_PER_CALL, listing
    # the others are f's and grad_fn's (as in the Function) and torch's handling of the
    # Function, which takes a tuple and a list besides the tensors: 1 more on torch 2.13, 3 on 2.11
    assert total - own <= native_total + 4, (total, own, native_total)
    np.testing.assert_allclose(npy(grad), npy(native_grad), rtol=1e-6)


def _compiled_grad(f, *values, fullgraph=True):
    xs = [t(v).requires_grad_(True) for v in values]
    torch._dynamo.reset()
    out = torch.compile(lambda *a: ops.sum(f(*a)), backend="eager", fullgraph=fullgraph)(*xs)
    out.backward()
    torch._dynamo.reset()
    return [None if x.grad is None else npy(x.grad) for x in xs]


def test_the_lean_path_takes_grad_fn_results_the_general_rules_accept():
    """grad_fn's result under torch.compile follows the general rules (docs/convention.md), as
    in an eager call: an exact zero is a zero gradient, None no gradient; a float64 gradient is
    cast to the input's dtype; several outputs reach a grad_fn of one upstream per output."""

    @customgrad.custom_gradient
    def zero_for_y(x, y):
        return x * y, lambda dy: (dy * y, 0.0)

    @customgrad.custom_gradient
    def none_for_y(x, y):
        return x * y, lambda dy: (dy * y, None)

    @customgrad.custom_gradient
    def two_outputs(x):
        return (2.0 * x, 3.0 * x), lambda du, dv: 2.0 * du + 3.0 * dv

    @customgrad.custom_gradient
    def wider(x):
        return x * 4.0, lambda dy: ops.cast(dy * 4.0, "float64")

    for f, expected in ((zero_for_y, [0.0, 0.0]), (none_for_y, None)):
        gx, gy = _compiled_grad(f, [1.0, 2.0], [3.0, 5.0])
        np.testing.assert_allclose(gx, [3.0, 5.0])
        eager_y = t([3.0, 5.0]).requires_grad_(True)
        ops.sum(f(t([1.0, 2.0]), eager_y)).backward()
        if expected is None:
            assert gy is None and eager_y.grad is None, f.__name__
        else:
            np.testing.assert_allclose(gy, expected)
            np.testing.assert_allclose(npy(eager_y.grad), expected)
    (g,) = _compiled_grad(lambda x: ops.add(*two_outputs(x)), [1.0, 2.0])
    np.testing.assert_allclose(g, [5.0, 5.0])
    (g,) = _compiled_grad(wider, [1.0, 2.0])
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [4.0, 4.0])


def test_the_lean_path_names_a_wrong_gradient_and_a_wrong_forward():
    """A grad_fn returning a gradient of another shape, and an f that returns no (output,
    grad_fn) pair, get the named errors under torch.compile too, naming f. (Under
    fullgraph=True dynamo itself reports any exception raised while it traces as its own
    `Unsupported: Observed exception`, with ours in its debug context: torch's rule.)"""

    @customgrad.custom_gradient
    def wrong_shape(x):
        return x * 2.0, lambda dy: ops.sum(dy)

    @customgrad.custom_gradient
    def no_pair(x):
        return x * 2.0

    with pytest.raises(customgrad.CustomGradientError, match=r"wrong_shape[\s\S]*shape"):
        _compiled_grad(wrong_shape, [1.0, 2.0], fullgraph=False)
    with pytest.raises(customgrad.CustomGradientError, match="no_pair"):
        _compiled_grad(no_pair, [1.0, 2.0], fullgraph=False)


def test_the_lean_path_hands_variables_and_hidden_tensors_to_the_general_path():
    """Under torch.compile, a keras.Variable f reads reaches grad_fn's variables=, and a tensor
    requiring grad f reads without receiving it is found (the call runs eagerly) and reaches
    grad_fn's variables= too: the lean path keeps neither."""
    scale = keras.Variable(3.0)
    hidden = t([2.0, 4.0]).requires_grad_(True)
    box = {"t": hidden}

    @customgrad.custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return dy * scale, [ops.sum(dy * x)]
        return x * scale, grad

    @customgrad.custom_gradient
    def reads_box(x):
        h = box["t"]

        def grad(dy, variables=None):
            return dy * h, [dy * x]
        return x * h, grad

    x = t([1.0, 2.0]).requires_grad_(True)
    torch._dynamo.reset()
    loss = torch.compile(lambda x: ops.sum(scaled(x)), backend="eager")(x)
    (gx, gv) = torch.autograd.grad(loss, [x, scale.value])
    np.testing.assert_allclose(npy(gx), [3.0, 3.0])
    np.testing.assert_allclose(float(gv), 3.0)
    torch._dynamo.reset()
    loss = torch.compile(lambda x: ops.sum(reads_box(x)), backend="eager")(x)
    (gx, gh) = torch.autograd.grad(loss, [x, hidden])
    torch._dynamo.reset()
    np.testing.assert_allclose(npy(gx), [2.0, 4.0])
    np.testing.assert_allclose(npy(gh), [1.0, 2.0])
