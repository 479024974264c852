"""customgrad.patch_keras(): every name Keras binds keras.ops.custom_gradient under becomes
customgrad's (and, on tensorflow, Keras's remat becomes customgrad.remat) until unpatch_keras()
puts back the very objects Keras had; Keras's own float8 training and remat then work alike on
every backend."""

import sys

import keras
import numpy as np
import pytest
from helpers import BACKEND, npy

import customgrad
from customgrad._patching import OPS_BINDINGS

pytestmark = pytest.mark.autodiff


@pytest.fixture(autouse=True)
def never_leave_keras_patched():
    yield
    customgrad.unpatch_keras()


def keras_bindings():
    """(module name, attribute) -> object, for every attribute of a loaded Keras module whose
    name is custom_gradient or remat: where patch_keras may act, and what is there now."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] != "keras" or module is None:
            continue
        for attribute in ("custom_gradient", "remat"):
            if attribute in vars(module):
                found[name, attribute] = vars(module)[attribute]
    return found


def test_patch_makes_every_binding_of_keras_custom_gradient_customgrads():
    original = keras.ops.custom_gradient
    originals = keras_bindings()
    customgrad.patch_keras()
    now = keras_bindings()
    still_original = [key for key, value in now.items() if value is original]
    assert not still_original  # no name still binds Keras's decorator
    for name in OPS_BINDINGS:
        assert sys.modules[name].custom_gradient is customgrad.custom_gradient, name
    core = sys.modules["keras.src.backend"].core
    assert core.custom_gradient is customgrad.custom_gradient
    assert (core.remat is customgrad.remat) == (BACKEND == "tensorflow")
    changed = {key for key in now if now[key] is not originals.get(key)}
    expected = {(name, "custom_gradient") for name in OPS_BINDINGS}
    expected.add((core.__name__, "custom_gradient"))
    if BACKEND == "tensorflow":
        expected.add((core.__name__, "remat"))
    assert changed == expected  # nothing else was touched


def test_unpatch_puts_back_the_very_objects_keras_had():
    before = keras_bindings()
    customgrad.patch_keras()
    customgrad.unpatch_keras()
    after = keras_bindings()
    assert after.keys() == before.keys()
    assert all(after[key] is before[key] for key in before)
    customgrad.unpatch_keras()  # unpatching an unpatched Keras changes nothing
    assert all(keras_bindings()[key] is before[key] for key in before)


def test_patching_twice_is_a_no_op():
    before = keras_bindings()
    customgrad.patch_keras()
    patched = keras_bindings()
    customgrad.patch_keras()
    assert all(keras_bindings()[key] is patched[key] for key in patched)
    customgrad.unpatch_keras()  # one unpatch restores Keras, however often it was patched
    assert all(keras_bindings()[key] is before[key] for key in before)


def test_as_a_context_manager_it_patches_for_the_block_only():
    original = keras.ops.custom_gradient
    with customgrad.patch_keras():
        assert keras.ops.custom_gradient is customgrad.custom_gradient
    assert keras.ops.custom_gradient is original
    with pytest.raises(RuntimeError, match="inside"):
        with customgrad.patch_keras():
            raise RuntimeError("inside")
    assert keras.ops.custom_gradient is original  # also when the block raised
    customgrad.patch_keras()
    with customgrad.patch_keras():  # a block that finds Keras patched leaves it patched
        pass
    assert keras.ops.custom_gradient is customgrad.custom_gradient


# -- Keras's own code, patched -------------------------------------------------------------------

def _train_float8(run_eagerly):
    """A float8 (quantized) Sequential of Dense layers trained for a few steps: its losses and
    weights."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(4)])
    model.quantize("float8")
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", run_eagerly=run_eagerly)
    rng = np.random.RandomState(0)
    x, y = rng.randn(32, 8).astype("float32"), rng.randn(32, 4).astype("float32")
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return history.history["loss"], [npy(w) for w in model.weights]


@pytest.mark.backends("tensorflow")
@pytest.mark.filterwarnings("ignore")
def test_tensorflow_float8_dense_trains_eagerly_as_compiled_when_patched():
    # (unpatched, tf.custom_gradient's eager path fails: "too many values to unpack")
    with customgrad.patch_keras():
        eager_losses, eager_weights = _train_float8(run_eagerly=True)
        compiled_losses, compiled_weights = _train_float8(run_eagerly=False)
    assert eager_losses[-1] < eager_losses[0]
    np.testing.assert_allclose(eager_losses, compiled_losses, rtol=1e-6)
    for eager, compiled in zip(eager_weights, compiled_weights):
        np.testing.assert_allclose(eager, compiled, rtol=1e-6, atol=1e-7)


@pytest.mark.backends("jax", "torch")
@pytest.mark.filterwarnings("ignore")
def test_float8_training_gives_keras_own_weights_when_patched():
    unpatched_losses, unpatched_weights = _train_float8(run_eagerly=False)
    with customgrad.patch_keras():
        patched_losses, patched_weights = _train_float8(run_eagerly=False)
    np.testing.assert_array_equal(patched_losses, unpatched_losses)
    assert len(patched_weights) == len(unpatched_weights) > 4
    for patched, unpatched in zip(patched_weights, unpatched_weights):
        np.testing.assert_array_equal(patched, unpatched)


@pytest.mark.backends("torch")
def test_torch_keras_variable_passed_to_keras_custom_gradient_gets_its_rule_gradient():
    def flip(x):  # a gradient flip, as on a Lagrange multiplier
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            return -3.0 * upstream

        return x * 3.0, grad

    multiplier = keras.Variable(np.float32(1.0), name="multiplier")
    with customgrad.patch_keras():
        y = keras.ops.custom_gradient(flip)(multiplier)
    y.backward()
    assert float(multiplier.value.grad) == -3.0  # the rule's, as on jax and tensorflow


def _fit_losses(remat):
    """Losses of a small Sequential of Dense layers trained for a few steps, its layers built
    under keras.RematScope(mode="full") or not."""
    keras.utils.set_random_seed(0)
    with keras.RematScope(mode="full" if remat else None):
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    rng = np.random.RandomState(0)
    x, y = rng.randn(64, 8).astype("float32"), rng.randn(64, 1).astype("float32")
    return model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0).history["loss"]


def test_keras_remat_scope_trains_as_without_remat_when_patched():
    # on tensorflow, unpatched, tf.recompute_grad refuses the layer call's keyword arguments
    without = _fit_losses(remat=False)
    with customgrad.patch_keras():
        with_remat = _fit_losses(remat=True)
    assert without[-1] < without[0]
    assert with_remat[-1] < with_remat[0]
    # Alone, the two runs give bitwise-equal losses. In a full suite run TensorFlow's threaded
    # float32 kernels moved the losses by up to 4.3e-4 (relative), and by 2.1e-3 on a machine
    # loaded by two other processes (the first epoch's too, before most updates); a wrong or
    # missing gradient moves them by far more (the loss drops by half in three epochs)
    np.testing.assert_allclose(with_remat, without, rtol=1e-2)
