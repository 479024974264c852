"""Readable helpers shared by the Python tests: the active backend, numpy conversion, and
native (backend-specific) gradients to compare customgrad against."""

import importlib.util

import keras
import numpy as np
import pytest

import customgrad

BACKEND = keras.backend.backend()
# the framework each backend's tests import
FRAMEWORKS = {"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}


def only_on_reason(backends):
    """Why a test of `backends` does not run in this process: the one wording of the `backends`
    marker (conftest.py) and of `only_on`."""
    return f"only on {', '.join(backends)}; this process runs {BACKEND}"


def only_on(*backends):
    """The `backends` marker for a whole module: `pytestmark = only_on("torch")`, written before
    the module imports that framework. Where no framework of `backends` is installed (a
    one-backend venv of another backend), those imports would fail, so the module is skipped
    whole, with the marker's reason; elsewhere each test is collected and the marker skips it.

        pytestmark = only_on("jax")
        import jax  # noqa: E402
    """
    installed = [b for b in backends
                 if b not in FRAMEWORKS or importlib.util.find_spec(FRAMEWORKS[b]) is not None]
    if BACKEND not in backends and not installed:
        pytest.skip(only_on_reason(backends), allow_module_level=True)
    return pytest.mark.backends(*backends)


def require(framework):
    """Skips the calling test, saying why, when `framework` cannot be imported here: a
    one-backend install (`pip install ".[jax]"`) has no tensorflow, and customgrad must not need
    it."""
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed here (a one-backend install)")


def torch_device():
    """Where Keras puts torch tensors (CUDA where there is one): a test that makes tensors with
    torch itself puts them there too, as a user mixing both would."""
    return keras.ops.zeros(()).device


def t(value, dtype="float32"):
    """A backend tensor from a Python value."""
    return keras.ops.convert_to_tensor(np.asarray(value, dtype=dtype))


def npy(x):
    """A numpy array from a backend tensor (or nested list/tuple/dict of them)."""
    if isinstance(x, dict):
        return {k: npy(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(npy(v) for v in x)
    if x is None:
        return None
    return np.asarray(keras.ops.convert_to_numpy(x))


def native_grad(f, *args):
    """Gradient of scalar f with respect to every positional (tensor) argument, computed with the
    backend's own tool (jax.grad, tf.GradientTape, torch.autograd.grad); returns a tuple."""
    if BACKEND == "jax":
        import jax

        return tuple(jax.grad(f, argnums=tuple(range(len(args))))(*args))
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            for a in args:
                tape.watch(a)
            y = f(*args)
        return tuple(tape.gradient(y, list(args)))
    if BACKEND == "torch":
        import torch

        args = [a.detach().requires_grad_(True) for a in args]
        y = f(*args)
        return tuple(torch.autograd.grad(y, args, allow_unused=True))
    raise RuntimeError(f"no autodiff on the {BACKEND} backend")


def float64_enabled():
    """A context in which float64 tensors exist (JAX needs its x64 mode; a no-op elsewhere)."""
    from customgrad._core import backend_module

    return backend_module().float64_scope()



def _log1pexp(x):
    e = keras.ops.exp(x)

    def grad(upstream):
        return upstream * (1.0 - 1.0 / (1.0 + e))

    return keras.ops.log(1.0 + e), grad


# The seed example, decorated: log(1 + exp(x)) with the stable gradient (1.0 at x = 100).
log1pexp = customgrad.custom_gradient(_log1pexp)
