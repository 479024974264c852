"""Python and R in one process through rpy2: the R package against the Python package it wraps.

One worker process per Keras backend (Keras fixes its backend per process),
tests/integration/rpy2_worker.py: Python imports keras and customgrad, starts R through rpy2 and
attaches customgrad there, so R's reticulate runs on that same interpreter. The worker runs the
upstream rule table from both languages (each language's own test of it), computes the same
cases through customgrad.custom_gradient in Python and op_custom_gradient() in R
(rpy2_worker.R), repeats log1pexp's gradient under R's full garbage collections, and reports
JSON; the tests here assert on that report. This complements the testthat suite
(test_r_package.py), which runs R on its own through Rscript.
"""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# the one list of backends, read without importing Keras in this process
BACKENDS = list(runpy.run_path(
    str(ROOT / "python" / "customgrad" / "_backend_names.py"))["AUTODIFF"])
WORKER = Path(__file__).with_name("rpy2_worker.py")
# the project venv's Python runs the worker and is the one R's reticulate is told to use (the venv
# folder may be a link; its bin/python must stay the venv's, not the base Python)
PYTHON = str(Path(os.path.realpath(ROOT / ".venv")) / "bin" / "python")
TIMEOUT = 240  # seconds per backend; each takes about 10 s on 2 cores
CASES = ["log1pexp", "two_outputs", "reads_variable", "gradient_reversal"]
RULE_CASES = json.loads((ROOT / "tests" / "upstream_rule.json").read_text())["cases"]
# the rows R runs: those with an R twin (the table's "python_only" rows have none)
R_RULE_CASES = [case for case in RULE_CASES if not case.get("python_only")]

if importlib.util.find_spec("rpy2") is None:
    pytest.skip("rpy2 is not installed in this Python: scripts/setup.sh could not build it "
                "(/tmp/customgrad-rpy2.log has why)", allow_module_level=True)


def _env(backend: str) -> dict:
    env = dict(os.environ)
    env["KERAS_BACKEND"] = backend
    env["R_LIBS"] = str(ROOT / ".Rlib")
    # rpy2 starts the R that `R RHOME` names (the one Rscript runs) and needs no LD_LIBRARY_PATH
    env["R_HOME"] = subprocess.run(["R", "RHOME"], capture_output=True, text=True,
                                   check=True).stdout.strip()
    # R's reticulate attaches to the Python rpy2 runs in; RETICULATE_PYTHON names that Python too
    # (with it set, customgrad declares nothing with py_require())
    env["RETICULATE_PYTHON"] = PYTHON
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


@pytest.fixture(scope="module", params=BACKENDS)
def report(request, tmp_path_factory) -> dict:
    """The worker's report for one backend (the worker runs once per backend)."""
    backend = request.param
    if shutil.which("R") is None or not (ROOT / ".Rlib" / "customgrad").exists():
        pytest.fail("R or the R package in .Rlib is missing; run `make setup`")
    # a neutral working directory: reticulate reads a pyproject.toml it finds in the current one
    work = tmp_path_factory.mktemp(f"rpy2-{backend}")
    try:
        proc = subprocess.run([PYTHON, str(WORKER)], cwd=work, env=_env(backend),
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as error:
        stderr = (error.stderr or b"").decode(errors="replace")
        pytest.fail(f"the rpy2 worker on {backend} ran past {TIMEOUT} s:\n{stderr[-4000:]}")
    assert proc.returncode == 0 and proc.stdout.strip(), (
        f"the rpy2 worker on {backend} exited {proc.returncode} without a report:\n"
        f"{proc.stderr[-6000:]}")
    result = json.loads(proc.stdout)
    assert result["backend"] == backend
    return result


def _checked(report: dict, name: str):
    """One check's result from the report; a check that raised fails with its traceback."""
    assert name not in report["errors"], f"{name} raised:\n{report['errors'][name]}"
    return report[name]


def _float32(values) -> np.ndarray:
    # R writes 15 significant digits (and Inf as "Inf"): plenty to give back every float32 exactly
    return np.ravel(np.asarray(values, dtype=np.float32))


def test_r_runs_on_the_same_python(report):
    r_python = _checked(report, "r_python")
    assert r_python["pid"] == report["pid"], "R's reticulate runs in another process"
    assert r_python["token"] == f"{report['backend']}-{report['pid']}", (
        "R's reticulate does not see the sys module of the worker's interpreter")
    assert r_python["backend"] == report["backend"]


def test_keras3_load_hooks_ran_though_python_started_first(report):
    """keras3 registers as.array() for torch tensors in a reticulate load hook of keras; with
    Python started before R, customgrad runs it (and every other pending hook of a module already
    imported) when reticulate attaches. Without that, as.array() of a torch tensor fails."""
    hooks = _checked(report, "r_load_hooks")
    assert hooks["pending"] == [], f"load hooks never run for {hooks['pending']}"
    assert hooks["dim"] == [3, 1]
    assert hooks["as_array"] == [[1.5], [-2.0], [3.0]], hooks
    expected_class = {"jax": "jaxlib", "tensorflow": "tensorflow", "torch": "torch"}
    assert hooks["tensor_class"].startswith(expected_class[report["backend"]]), hooks


def test_upstream_rule_from_python(report):
    rows = _checked(report, "upstream_rule_python")
    assert len(rows) == len(RULE_CASES)
    failed = [f"{row['test']}: {row['problem']}" for row in rows if row["problem"]]
    assert not failed, "tests/python/test_upstream_rule.py failed here:\n" + "\n".join(failed)


def test_upstream_rule_from_r(report):
    rows = _checked(report, "upstream_rule_r")
    assert len(rows) == len(R_RULE_CASES) + 1  # one test per R case and one of the table itself
    failed = [f"{row['test']}: {row['problems']}" for row in rows if row["problems"]]
    assert not failed, "tests/testthat/test-upstream-rule.R failed here:\n" + "\n".join(failed)
    assert all(row["expectations"] >= 3 for row in rows), rows


@pytest.mark.parametrize("case", CASES)
def test_same_values_and_gradients_in_python_and_r(report, case):
    python, r = _checked(report, f"python:{case}"), _checked(report, f"r:{case}")
    assert python.keys() == r.keys()
    for key, value in python.items():
        if key == "variables":  # the keras.Variables the grad function was handed
            assert value == r[key] == ["w"]
        else:
            np.testing.assert_array_equal(_float32(value), _float32(r[key]),
                                          err_msg=f"{case}: {key} differs (python, R)")


def test_the_gradients_are_the_grad_functions(report):
    """The cases' gradients are those their grad functions compute (not plain autodiff's)."""
    log1pexp = _checked(report, "python:log1pexp")
    assert log1pexp["grad"][-1] == 1.0  # at 100, where plain autodiff gives NaN
    two = _checked(report, "python:two_outputs")
    np.testing.assert_array_equal(two["grad_x"], [9.0, 6.25, 4.0])  # y + 2 * 3
    np.testing.assert_array_equal(two["grad_y"], [-2.5, -4.5, -1.0])  # x - 3
    variable = _checked(report, "python:reads_variable")
    np.testing.assert_array_equal(variable["grad_x"], [6.0, 9.0])  # 3 w
    np.testing.assert_array_equal(variable["grad_w"], [15.0, -20.0])  # 10 x
    reversal = _checked(report, "python:gradient_reversal")
    np.testing.assert_array_equal(reversal["grad"], [-0.5, -1.0, 2.0])  # -0.5 * weights


def test_log1pexp_gradient_survives_r_garbage_collection(report):
    stress = _checked(report, "gc_stress")
    assert stress["calls"] >= 300 and stress["full_gcs"] >= 6
    assert stress["ones"] == stress["calls"], f"gradients other than 1: {stress['others']}"
