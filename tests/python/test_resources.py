"""Resources: memory stays flat over many eager calls, nothing keeps forward tensors alive after
backward, and eager calls from several threads at once get correct gradients."""

import os
import threading
import weakref

import numpy as np
import pytest
from helpers import BACKEND, log1pexp, npy, t
from keras import ops

import customgrad

pytestmark = pytest.mark.autodiff


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.slow
def test_ten_thousand_eager_forward_backward_calls_keep_memory_flat():
    step = customgrad.grad(lambda x: ops.sum(log1pexp(x)))
    x = t(np.linspace(-5, 100, 64))
    for _ in range(1000):  # warm up caches and allocators
        step(x)
    before = rss_mib()
    for _ in range(10_000):
        g = step(x)
    growth = rss_mib() - before
    print(f"RSS growth over 10,000 calls on {BACKEND}: {growth:.1f} MiB")
    assert float(npy(g)[-1]) == 1.0
    assert growth < 16.0, f"memory grew by {growth:.1f} MiB over 10,000 calls"


@pytest.mark.backends("torch")
def test_forward_tensors_are_freed_after_backward_without_garbage_collection():
    import gc

    refs = {}

    @customgrad.custom_gradient
    def f(x):
        e = ops.exp(x)
        hidden = ops.sin(x)  # used by the forward only
        refs["e"], refs["hidden"] = weakref.ref(e), weakref.ref(hidden)
        return ops.log(1.0 + e) + hidden * 0.0, lambda dy: dy * ops.sigmoid(x)

    gc.disable()  # a reference cycle would keep them alive until a collection
    try:
        x = t([1.0, 2.0]).requires_grad_(True)
        y = f(x).sum()
        assert refs["hidden"]() is None, "the forward graph grad_fn does not use was kept"
        y.backward()
        del y
        assert refs["e"]() is None, "a tensor of the forward outlived backward"
    finally:
        gc.enable()


@pytest.mark.backends("torch", "tensorflow")
def test_eager_calls_from_four_threads_give_correct_gradients():
    step = customgrad.grad(lambda x: ops.sum(log1pexp(x) * 2.0))
    errors, results = [], {}

    def worker(k):
        xs = np.linspace(-3, 3, 16) + k
        for _ in range(50):
            g = npy(step(t(xs)))
        results[k] = (g, 2.0 / (1.0 + np.exp(-xs)))

    threads = [threading.Thread(target=lambda k=k: _capture(errors, worker, k)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert sorted(results) == [0, 1, 2, 3]
    for got, expected in results.values():
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def _capture(errors, fn, *args):
    try:
        fn(*args)
    except Exception as e:  # reported by the test, never swallowed
        errors.append(repr(e))


def test_no_reference_cycle_keeps_forward_tensors_alive_after_backward():
    import gc

    refs = {}

    @customgrad.custom_gradient
    def f(x):
        e = ops.exp(x)
        hidden = ops.sin(x)
        refs["e"], refs["hidden"] = weakref.ref(e), weakref.ref(hidden)
        return ops.log(1.0 + e) + hidden * 0.0, lambda dy: dy * (1.0 - 1.0 / (1.0 + e))

    gc.disable()  # only reference counting frees now: a cycle would keep them alive
    try:
        g = customgrad.grad(lambda x: ops.sum(f(x)))(t([1.0, 2.0]))
        assert refs["e"]() is None and refs["hidden"]() is None
    finally:
        gc.enable()
    np.testing.assert_allclose(npy(g), 1 / (1 + np.exp(-np.array([1.0, 2.0]))), rtol=1e-6)


@pytest.mark.backends("torch")
def test_an_input_grad_fn_does_not_use_is_not_kept_until_backward():
    # h (a previous layer's activation) is freed by plain autodiff of log(1 + exp(h)); holding
    # it in customgrad's bookkeeping until backward would cost one activation per layer
    x = t([1.0, 2.0]).requires_grad_(True)
    h = x * 2.0
    ref = weakref.ref(h)
    y = log1pexp(h).sum()
    del h
    assert ref() is None
    y.backward()
    np.testing.assert_allclose(npy(x.grad), 2.0 / (1.0 + np.exp(-2.0 * np.array([1.0, 2.0]))),
                               rtol=1e-6)


@pytest.mark.backends("torch", "tensorflow")
def test_outputs_are_not_kept_until_backward():
    # plain autodiff of -y keeps nothing of y; tf.custom_gradient's backward keeps the tensors f
    # returned until the tape goes: one tensor per call more than autodiff, over a network's layers
    refs = []

    @customgrad.custom_gradient
    def f(x):
        out = ops.sin(x)
        refs.append(weakref.ref(out))
        return out, lambda dy: dy * ops.cos(x)

    freed = []

    def loss(x):
        total = ops.sum(ops.negative(f(x)))  # negation keeps neither its input nor its output
        freed.append(refs[0]() is None)
        return total

    g = customgrad.grad(loss)(t([1.0, 2.0]))
    assert freed == [True], "a tensor f returned was kept for the backward"
    np.testing.assert_allclose(npy(g), -np.cos([1.0, 2.0]), rtol=1e-6)


@pytest.mark.backends("torch")
def test_what_grad_fn_holds_goes_when_its_backward_ran():
    # plain autograd frees a node's saved tensors once the node ran, not when the graph goes:
    # h, a previous layer's output that only grad_fn holds, must not outlive its backward

    held = []

    @customgrad.custom_gradient
    def square(x):
        held.append(weakref.ref(x))
        return x * x, lambda dy: dy * 2.0 * x

    x = t([1.0, 2.0]).requires_grad_(True)
    loss = square(square(x) * 1.0).sum()  # the inner output times a number: only grad_fn holds h
    loss.backward()
    assert held[1]() is None, "a tensor grad_fn holds outlived its backward"
    np.testing.assert_allclose(npy(x.grad), 4.0 * np.array([1.0, 2.0]) ** 3)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()

    x.grad = None
    loss = square(x).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # kept by retain_graph=True
    np.testing.assert_allclose(npy(x.grad), 2 * 2.0 * np.array([1.0, 2.0]))
