"""TensorFlow Probability, a library written against `tf.custom_gradient`, gives the same gradients
under `customgrad.patch_tensorflow()` as natively: reparameterized samplers (Gamma,
StudentT, VonMises), special functions (`bessel_ive`, `log_cosh`) and the ODE
solver's adjoint (a namedtuple result), eagerly and inside `tf.function`.

TFP applies `tf.custom_gradient` at each call through its own wrapper, and at import for a few
module-level functions (VonMises's cdf), so the native and the customgrad values come from two
processes, each importing TFP afresh: the customgrad one inside the patch. This file is also the
script those processes run (`python test_tfp_client.py native|customgrad` prints JSON). The whole
TFP test suite is `tests/clients/tfp_suite.py`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import pytest
from two_processes import run_modes

MODES = ("native", "customgrad")
SUBPROCESS_TIMEOUT_S = 240


def cases(tf, tfp) -> dict:
    """{name: (function of one float64 tensor, its argument)}; each function reaches TFP code
    built on `tf.custom_gradient`."""
    tfd = tfp.distributions
    seed = (1, 2)

    def ode(x):
        """DormandPrince with the adjoint gradient; `solve` returns the namedtuple Results, which
        TFP's grad function rebuilds from one upstream per leaf."""
        solver = tfp.math.ode.DormandPrince()
        results = solver.solve(lambda t, y, k: -k * y, 0.0, x[:2], solution_times=[0.5, 1.0],
                               constants={"k": x[2]})
        return results.states

    return {
        "gamma_sample": (lambda c: tfd.Gamma(c, 1.5).sample(4, seed=seed), [0.7, 3.0]),
        "student_t_sample": (lambda df: tfd.StudentT(df, 0.5, 2.0).sample(4, seed=seed),
                             [2.5, 7.0]),
        "von_mises_sample": (lambda c: tfd.VonMises(0.3, c).sample(4, seed=seed), [0.8, 5.0]),
        "bessel_ive": (lambda z: tfp.math.bessel_ive(1.5, z), [0.3, 2.0, 11.0]),
        "log_cosh": (lambda x: tfp.math.log_cosh(x), [-30.0, 0.4, 3.0]),
        "ode_adjoint": (ode, [1.0, 2.0, 0.7]),
    }


def gradients(tf, tfp, decorated: list | None = None) -> tuple[dict, dict]:
    """{"case/eager" or "case/function": [output, gradient]} as nested lists, and {case: how many
    functions were decorated while it ran} (from the spy's list `decorated`, when given). The loss
    weighs each output element differently, so the upstream is not all ones."""

    def value_and_gradient(function, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function(x)
            weights = tf.reshape(tf.range(1, 1 + tf.size(y)), tf.shape(y))
            loss = tf.reduce_sum(y * tf.cast(weights, y.dtype))
        return y, tape.gradient(loss, x)

    results, counts = {}, {}
    for name, (function, argument) in cases(tf, tfp).items():
        before = len(decorated) if decorated is not None else 0
        x = tf.constant(argument, tf.float64)
        for regime, run in (("eager", value_and_gradient),
                            ("function", tf.function(value_and_gradient, autograph=False))):
            y, dx = run(function, x)
            results[f"{name}/{regime}"] = [y.numpy().tolist(), dx.numpy().tolist()]
        if decorated is not None:
            counts[name] = len(decorated) - before
    return results, counts


def _spy(installed) -> list:
    """Replaces `installed` (customgrad's patched decorator) wherever TensorFlow's public modules
    bind it by a spy that records the name of each function it decorates, and returns that list:
    it shows that the decorator TFP applied was customgrad's. The patch's exit puts back
    TensorFlow's own over the spy."""
    decorated = []

    def spy(f=None):
        if f is None:
            return spy
        decorated.append(getattr(f, "__name__", repr(f)))
        return installed(f)

    for name, module in list(sys.modules.items()):
        if name.startswith("tensorflow") and module is not None \
                and vars(module).get("custom_gradient") is installed:
            module.custom_gradient = spy
    return decorated


def main(mode: str) -> dict:
    """The gradients of every case in `mode` (TFP imported here: natively or inside the patch)
    and, with customgrad, what the spy saw: the functions decorated at TFP's import, and how many
    were decorated during each case."""
    import tensorflow as tf

    if "tensorflow_probability" in sys.modules:
        raise RuntimeError("tensorflow_probability was imported before the patch")
    # TFP's samplers leave Grappler to swap in a CPU implementation, which it does for an eager
    # tf.function call on no tape but not for one a tape records natively; customgrad runs f on
    # no tape. Same distribution, other numbers for one seed: the default implementation for all.
    tf.config.optimizer.set_experimental_options({"implementation_selector": False})
    if mode == "native":
        import tensorflow_probability as tfp

        return {"gradients": gradients(tf, tfp)[0]}
    import customgrad

    with customgrad.patch_tensorflow():
        installed = tf.compat.v2.custom_gradient
        decorated = _spy(installed)
        import tensorflow_probability as tfp

        at_import = list(decorated)
        results, counts = gradients(tf, tfp, decorated)
        return {"gradients": results, "at_import": at_import, "per_case": counts,
                "installed_module": getattr(installed, "__module__", "")}


# TFP's tests need the tensorflow backend and TFP itself (in the pinned venv; not in a one-backend
# install)
TFP_MISSING = importlib.util.find_spec("tensorflow_probability") is None
pytestmark = [pytest.mark.backends("tensorflow"), pytest.mark.slow,  # two processes import TFP
              pytest.mark.skipif(TFP_MISSING, reason="tensorflow_probability is not installed "
                                                     "(pip install tfp-nightly tf-keras)")]
CASES = ("gamma_sample", "student_t_sample", "von_mises_sample", "bessel_ive", "log_cosh",
         "ode_adjoint")
# Functions TFP decorates with tf.custom_gradient at its import (module level).
DECORATED_AT_IMPORT = ("von_mises_cdf",)


@pytest.fixture(scope="module")
def runs() -> dict:
    """{mode: main(mode)}, from this file run as a script in two processes at once."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    return run_modes(__file__, MODES, "TFP_CLIENT_JSON", env, SUBPROCESS_TIMEOUT_S)


def test_cases_are_the_ones_listed(runs):
    """Both runs computed exactly the cases CASES (the parametrization) names, in both regimes."""
    expected = {f"{case}/{regime}" for case in CASES for regime in ("eager", "function")}
    assert set(runs["native"]["gradients"]) == expected
    assert set(runs["customgrad"]["gradients"]) == expected


def test_customgrad_decorated_tfp(runs):
    """The decorator in tf.custom_gradient was customgrad's, TFP's module-level custom gradients
    took it at import, and every case decorated functions with it while it ran."""
    run = runs["customgrad"]
    assert run["installed_module"].startswith("customgrad"), run["installed_module"]
    assert set(DECORATED_AT_IMPORT) <= set(run["at_import"]), run["at_import"]
    assert set(run["per_case"]) == set(CASES)
    assert all(count > 0 for count in run["per_case"].values()), run["per_case"]


@pytest.mark.parametrize("regime", ["eager", "function"])
@pytest.mark.parametrize("case", CASES)
def test_same_as_native(runs, case, regime):
    """Output and gradient with customgrad equal the native ones (rtol 1e-6); the gradient is
    finite and not all zero, so equality is not two empty answers agreeing."""
    native_y, native_dx = (np.array(v) for v in runs["native"]["gradients"][f"{case}/{regime}"])
    y, dx = (np.array(v) for v in runs["customgrad"]["gradients"][f"{case}/{regime}"])
    np.testing.assert_allclose(y, native_y, rtol=1e-6)
    np.testing.assert_allclose(dx, native_dx, rtol=1e-6)
    assert np.all(np.isfinite(dx)) and np.any(dx != 0), dx


if __name__ == "__main__":
    print("TFP_CLIENT_JSON " + json.dumps(main(sys.argv[1])))
