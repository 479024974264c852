"""One Keras backend's run of tests/integration/test_rpy2.py: Python and R in one process.

Run with KERAS_BACKEND set (Keras fixes its backend per process). Python imports keras and
customgrad, starts R through rpy2 and attaches customgrad there (which attaches keras3), so R's
reticulate runs on this very interpreter. Then the same checks run from both languages: the
upstream rule table (each language's own test of it), cases computed through
customgrad.custom_gradient here and op_custom_gradient() in R (rpy2_worker.R), and log1pexp's
gradient under R's full garbage collections. Prints one JSON report on stdout (everything else
goes to stderr) and ends with os._exit(): the interpreter otherwise hangs at exit, as rpy2's exit
finalizers wait for the GIL (seen on jax and on torch).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))  # the Python tests' helpers, for both languages

import keras  # noqa: E402  (the path above first)
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from helpers import log1pexp, npy, t  # noqa: E402
from keras import ops  # noqa: E402

import customgrad  # noqa: E402

# The inputs of the cross-language cases, the same for both languages (R gets them as JSON).
INPUTS = {
    "log1pexp": {"x": [-100.0, -20.0, -1.0, 0.0, 0.5, 20.0, 100.0]},
    "two_outputs": {"x": [0.5, -1.5, 2.0], "y": [3.0, 0.25, -2.0]},
    "reads_variable": {"x": [1.5, -2.0], "w": [2.0, 3.0]},
    "gradient_reversal": {"x": [1.0, -2.0, 3.0], "weights": [1.0, 2.0, -4.0]},
}


def floats(x) -> list:
    """A tensor's values as a flat list of Python floats (JSON keeps every float32 exactly)."""
    return np.ravel(npy(x)).tolist()


# The Python half of each case (rpy2_worker.R has the R half): the same function, inputs and loss.


@customgrad.custom_gradient
def two_outputs(x, y):
    return (x * y, x + y), lambda dz1, dz2: (dz1 * y + 2.0 * dz2, dz1 * x - dz2)


def python_log1pexp(x):
    x = t(x)
    return {"value": floats(log1pexp(x)),
            "grad": floats(customgrad.grad(lambda x: ops.sum(log1pexp(x)))(x))}


def python_two_outputs(x, y):
    x, y = t(x), t(y)

    def loss(x, y):
        out = two_outputs(x, y)
        return ops.sum(out[0]) + 3.0 * ops.sum(out[1])

    out = two_outputs(x, y)
    grad_x, grad_y = customgrad.grad(loss, argnums=(0, 1))(x, y)
    return {"value": floats(out[0]) + floats(out[1]), "grad_x": floats(grad_x),
            "grad_y": floats(grad_y)}


def python_reads_variable(x, w):
    from test_framework_variables import keras_variable_grads

    x = t(x)
    w = keras.Variable(np.asarray(w, dtype="float32"), name="w")
    seen = []

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen[:] = [v.name for v in variables]
            return dy * w * 3.0, [dy * x * 10.0]

        return ops.sum(x * w), grad

    (grad_w,) = keras_variable_grads(lambda: f(x), [w])
    return {"value": floats(f(x)), "grad_x": floats(customgrad.grad(f)(x)),
            "grad_w": floats(grad_w), "variables": seen}


def python_gradient_reversal(x, weights):
    x, weights = t(x), t(weights)
    layer = customgrad.layers.GradientReversal(scale=0.5)
    return {"value": floats(layer(x)),
            "grad": floats(customgrad.grad(lambda x: ops.sum(layer(x) * weights))(x))}


PYTHON_CASES = {"log1pexp": python_log1pexp, "two_outputs": python_two_outputs,
                "reads_variable": python_reads_variable,
                "gradient_reversal": python_gradient_reversal}


def python_upstream_rule() -> list:
    """tests/python/test_upstream_rule.py's test, run here once per case of the table."""
    import test_upstream_rule

    rows = []
    for case in test_upstream_rule.CASES:
        try:
            test_upstream_rule.test_upstream_rule(case)
            problem = None
        except (Exception, pytest.fail.Exception) as error:  # pytest.raises' Failed is neither
            problem = f"{type(error).__name__}: {error}"
        rows.append({"test": f"{case['grad_fn']}-{case['output']}", "problem": problem})
    return rows


def start_r():
    """R inside this process, with customgrad attached and rpy2_worker.R sourced."""
    import rpy2.robjects as ro

    # rpy2 makes reticulate's loading print a warning about a fix reticulate has long had
    ro.r('setHook(packageEvent("reticulate", "onLoad"), NULL, "replace")')
    ro.r("suppressPackageStartupMessages(library(customgrad))")
    ro.r.source(str(Path(__file__).with_suffix(".R")))
    return lambda function, *args: json.loads(ro.r[function](*args)[0])


def run_checks() -> dict:
    backend = keras.backend.backend()
    sys.customgrad_rpy2_token = f"{backend}-{os.getpid()}"  # R must see it: one interpreter
    call_r = start_r()  # call_r("f", ...): rpy2_worker.R's f(...), its JSON answer read back
    report: dict = {"backend": backend, "pid": os.getpid(), "errors": {}}

    def attempt(name, check):
        """Runs one check; its failure is reported (and fails its test), the others still run."""
        try:
            report[name] = check()
        except Exception:
            report["errors"][name] = traceback.format_exc()

    attempt("r_python", lambda: call_r("python_seen_from_r"))
    attempt("r_load_hooks", lambda: call_r("load_hooks_seen_from_r"))
    attempt("upstream_rule_python", python_upstream_rule)
    test_file = ROOT / "tests" / "testthat" / "test-upstream-rule.R"
    attempt("upstream_rule_r", lambda: call_r("upstream_rule", str(test_file)))
    for name, python_case in PYTHON_CASES.items():
        inputs = INPUTS[name]
        attempt(f"python:{name}", lambda: python_case(**inputs))
        attempt(f"r:{name}", lambda: call_r("run_case", name, json.dumps(inputs)))
    attempt("gc_stress", lambda: call_r("gc_stress"))
    return report


def main():
    report_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # Python's, R's and the backends' printing goes to stderr, the report to stdout
    status = 1
    try:
        report = run_checks()
        report_out.write(json.dumps(report) + "\n")
        report_out.flush()
        status = 0
    except Exception:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)  # not a normal exit, which hangs: rpy2's exit finalizers wait for the GIL


if __name__ == "__main__":
    main()
