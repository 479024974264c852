"""Four clients of `tf.custom_gradient` give the same values under `customgrad.patch_tensorflow()`
as natively, one test per way each uses it that once set customgrad apart: GPflow's MCMC helper
(f of *tf.Variables, a tf.function grad_fn taking `variables=`, `__original_wrapped__` called
directly), YOLO's Darknet BCE from tf-models-official (its grad_fn returns the Python number 0.0
for a tensor input), a larq quantized layer under `model.fit`, and a tfmot clustered layer
(methods decorated at class definition).

The clients decorate at import, so native and customgrad values come from two processes, each
importing the clients afresh, the customgrad one inside the patch: this file is also the script
they run (`python test_clients.py native|customgrad` prints JSON). The clients' whole test
modules are `tests/clients/clients_suite.py` (`make clients`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

import numpy as np
import pytest
from two_processes import run_modes

MODES = ("native", "customgrad")
SUBPROCESS_TIMEOUT_S = 240
# case: the module it needs (its client's distribution, for the skip reason)
CLIENTS = {"gpflow_mcmc": ("gpflow", "gpflow==2.11.2"),
           "yolo_bce": ("official", "tf-models-official==2.20.0"),
           "larq_fit": ("larq", "larq==0.14.0"),
           "tfmot_cluster": ("tensorflow_model_optimization", "tensorflow-model-optimization==0.8.1")}


def gpflow_mcmc(tf):
    """SamplingHelper's target log prob at the model's variables and its gradient (a tape), and
    the gradient from the undecorated closure (`__original_wrapped__`), as GPflow's test calls."""
    import gpflow
    from tensorflow_probability.python.distributions import Gamma

    rng = np.random.default_rng(1)
    x = rng.random((20, 1))
    y = np.sin(12 * x) + 0.1 * rng.standard_normal((20, 1))
    model = gpflow.models.GPR((x, y), gpflow.kernels.Matern52(lengthscales=0.3),
                              noise_variance=0.01)
    for p in model.parameters:
        p.prior = Gamma(gpflow.utilities.to_default_float(1.0),
                        gpflow.utilities.to_default_float(1.0))
    helper = gpflow.optimizers.SamplingHelper(model.log_posterior_density,
                                              model.trainable_parameters)
    state = [tf.identity(v) for v in helper.current_state]  # as tfp.mcmc passes its state
    with tf.GradientTape() as tape:
        tape.watch(state)
        log_prob = helper.target_log_prob_fn(*state)
    grads = tape.gradient(log_prob, state)
    wrapped_log_prob, grad_fn = helper.target_log_prob_fn.__original_wrapped__(*state)
    wrapped_grads, nones = grad_fn(1, [None] * len(state))
    assert nones == [None] * len(state), nones
    return {"log_prob": float(log_prob), "grads": [g.numpy().tolist() for g in grads],
            "wrapped_log_prob": float(wrapped_log_prob),
            "wrapped_grads": [g.numpy().tolist() for g in wrapped_grads]}


def yolo_bce(tf):
    """The Darknet BCE's gradient for the labels, the logits and label_smoothing (a tensor, for
    which its grad_fn returns 0.0), eagerly and inside tf.function."""
    from official.projects.yolo.ops import loss_utils

    labels = tf.constant([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    logits = tf.constant([[-1.5, 0.3, 2.0], [0.7, -0.2, 4.0]])
    smoothing = tf.constant(0.1)

    def value_and_grads(labels, logits, smoothing):
        with tf.GradientTape() as tape:
            tape.watch([labels, logits, smoothing])
            loss = tf.reduce_sum(loss_utils.sigmoid_bce(labels, logits, smoothing)
                                 * tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
        return loss, tape.gradient(loss, [labels, logits, smoothing])

    out = {}
    for regime, run in (("eager", value_and_grads), ("function", tf.function(value_and_grads))):
        loss, grads = run(labels, logits, smoothing)
        # natively the 0.0 comes back as it is, a Python float: compared as an array
        out[regime] = {"loss": float(loss), "grads": [np.asarray(g).tolist() for g in grads],
                       "shapes": [list(np.shape(g)) for g in grads]}
    return out


def larq_fit(tf):
    """A QuantDense with ste_sign on its inputs and kernel, trained 3 epochs by model.fit: the
    weights (bitwise), the losses and the initial kernel."""
    import larq

    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 6)).astype("float32")
    y = rng.standard_normal((32, 3)).astype("float32")
    model = tf.keras.Sequential([
        tf.keras.Input((6,)),
        larq.layers.QuantDense(8, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                               kernel_constraint="weight_clip"),
        tf.keras.layers.Dense(3)])
    initial = [w.tolist() for w in model.get_weights()]
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    return {"initial": initial, "weights": [w.tolist() for w in model.get_weights()],
            "loss": history.history["loss"]}


def tfmot_cluster(tf):
    """A Dense layer clustered by tfmot (3 centroids, linear init): the gradient of a loss for
    its trainable weights, then the weights after one model.fit step."""
    import tensorflow_model_optimization as tfmot
    from tensorflow_model_optimization.python.core.keras.compat import keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5)).astype("float32")
    y = rng.standard_normal((8, 4)).astype("float32")
    clustering = tfmot.clustering.keras
    model = keras.Sequential([keras.Input((5,)), clustering.cluster_weights(
        keras.layers.Dense(4), number_of_clusters=3,
        cluster_centroids_init=clustering.CentroidInitialization.LINEAR)])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    grads = tape.gradient(loss, model.trainable_weights)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    return {"loss": float(loss), "names": [w.name for w in model.trainable_weights],
            "grads": [tf.convert_to_tensor(g).numpy().tolist() for g in grads],
            "weights": [w.numpy().tolist() for w in model.trainable_weights]}


CASES = {"gpflow_mcmc": gpflow_mcmc, "yolo_bce": yolo_bce, "larq_fit": larq_fit,
         "tfmot_cluster": tfmot_cluster}


def main(mode: str) -> dict:
    """Every installed client's case in `mode` ({case: result or {"error": traceback}}), with
    the module of the tf.custom_gradient the clients read."""
    import tensorflow as tf

    if any(module in sys.modules for module, _ in CLIENTS.values()):
        raise RuntimeError("a client was imported before the patch")
    if mode == "customgrad":
        import customgrad

        customgrad.patch_tensorflow()
    results = {"installed_module": getattr(tf.custom_gradient, "__module__", "")}
    for case, run in CASES.items():
        if importlib.util.find_spec(CLIENTS[case][0]) is None:
            continue
        try:
            results[case] = run(tf)
        except Exception:  # reported by that case's test only
            results[case] = {"error": traceback.format_exc()[-3000:]}
    return results


# the clients are TensorFlow code, in the pinned venv (scripts/setup.sh installs them)
pytestmark = [pytest.mark.backends("tensorflow"), pytest.mark.slow]  # two processes import all four


def need(case: str):
    """Skips when `case`'s client is not installed, saying which and how to get it."""
    module, pin = CLIENTS[case]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{pin} is not installed (pip install --no-deps -r "
                    f"tests/clients/clients-requirements.txt)")


@pytest.fixture(scope="module")
def runs() -> dict:
    """{mode: main(mode)}, from this file run as a script in two processes at once."""
    if not any(importlib.util.find_spec(module) for module, _ in CLIENTS.values()):
        pytest.skip("none of the clients is installed (pip install --no-deps -r "
                    "tests/clients/clients-requirements.txt)")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_USE_LEGACY_KERAS="1",
               TF_CPP_MIN_LOG_LEVEL="2", TF_DETERMINISTIC_OPS="1")
    results = run_modes(__file__, MODES, "CLIENTS_JSON", env, SUBPROCESS_TIMEOUT_S)
    assert results["native"]["installed_module"].startswith("tensorflow")
    assert results["customgrad"]["installed_module"].startswith("customgrad")
    return results


def both(runs, case):
    """The native and the customgrad result of `case`; a case that raised fails here."""
    need(case)
    native, patched = runs["native"][case], runs["customgrad"][case]
    assert "error" not in native, f"natively:\n{native['error']}"
    assert "error" not in patched, f"with customgrad:\n{patched['error']}"
    return native, patched


def close(a, b, rtol):
    """Nested lists (ragged across entries) equal to rtol, entry by entry."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.array(y), np.array(x), rtol=rtol, atol=0)


def test_gpflow_mcmc_helper(runs):
    """Log prob and gradient through the tape and through `__original_wrapped__` equal the
    native ones; the gradient is not all zero."""
    native, patched = both(runs, "gpflow_mcmc")
    for key in ("log_prob", "wrapped_log_prob"):
        np.testing.assert_allclose(patched[key], native[key], rtol=1e-12)
    close(native["grads"], patched["grads"], 1e-10)
    close(native["wrapped_grads"], patched["wrapped_grads"], 1e-10)
    close(patched["grads"], patched["wrapped_grads"], 1e-10)
    assert any(np.any(np.array(g) != 0) for g in patched["grads"])


@pytest.mark.parametrize("regime", ["eager", "function"])
def test_yolo_bce_gradient_with_a_python_zero(runs, regime):
    """Loss and gradients (labels: zeros, logits: Darknet's, label_smoothing: grad_fn's 0.0)
    equal TensorFlow's, shapes included."""
    native, patched = (r[regime] for r in both(runs, "yolo_bce"))
    np.testing.assert_allclose(patched["loss"], native["loss"], rtol=1e-6)
    assert patched["shapes"] == native["shapes"] == [[2, 3], [2, 3], []]
    close(native["grads"], patched["grads"], 1e-6)
    assert np.any(np.array(patched["grads"][1]) != 0)


def test_larq_quantdense_fit_bitwise(runs):
    """After model.fit the weights are bitwise the native ones, and training changed them."""
    native, patched = both(runs, "larq_fit")
    assert patched["initial"] == native["initial"]
    assert patched["loss"] == native["loss"]
    assert patched["weights"] == native["weights"]
    assert patched["weights"][0] != patched["initial"][0]


def test_tfmot_clustered_layer_step(runs):
    """The clustered layer's gradient and the weights after one fit step equal the native ones;
    the centroids' gradient is not all zero."""
    native, patched = both(runs, "tfmot_cluster")
    assert patched["names"] == native["names"]
    np.testing.assert_allclose(patched["loss"], native["loss"], rtol=1e-6)
    close(native["grads"], patched["grads"], 1e-6)
    close(native["weights"], patched["weights"], 1e-6)
    centroids = [g for name, g in zip(patched["names"], patched["grads"]) if "centroid" in name]
    assert centroids and np.any(np.array(centroids[0]) != 0), patched["names"]


if __name__ == "__main__":
    print("CLIENTS_JSON " + json.dumps(main(sys.argv[1])))
