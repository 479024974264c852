"""The differential test's short run (tests/differential/driver.py): a few hundred random
custom-gradient programs on every installed backend, each in its own process, agree with the
numpy float64 truth and with each other, but for the differences docs/backend-differences.md
documents (and the driver's temporary list of known defects). `make fuzz` runs thousands."""

import importlib.util
import os
import re
import runpy
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DRIVER = os.path.join(ROOT, "tests", "differential", "driver.py")
AUTODIFF = runpy.run_path(os.path.join(ROOT, "python", "customgrad", "_backend_names.py"))[
    "AUTODIFF"]
COUNT = 300


def test_random_programs_agree_on_every_backend():
    installed = [b for b in AUTODIFF if importlib.util.find_spec(b) is not None]
    for backend in sorted(set(AUTODIFF) - set(installed)):
        print(f"differential: {backend} is not installed here, so it is not compared")
    if not installed:
        pytest.skip(f"none of {', '.join(AUTODIFF)} is installed here")
    proc = subprocess.run([sys.executable, DRIVER, "--seed", "0", "--count", str(COUNT)],
                          capture_output=True, text=True, timeout=900)
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    runs = dict(re.findall(r"^(\w+): (\d+) run,", proc.stdout, flags=re.M))
    assert runs == {b: str(COUNT) for b in installed}
    assert "no undocumented difference" in proc.stdout


def _driver():
    sys.path.insert(0, os.path.dirname(DRIVER))
    import driver
    return driver


def test_the_driver_sees_a_wrong_gradient_a_wrong_error_and_an_unnamed_function():
    driver = _driver()
    right = next(p for p in map(lambda i: driver.program(0, i), range(100))
                 if p["fault"] is None and p["mode"] == "grad")
    want = driver.expected(right)
    assert driver.compare(right, want, dict(want)) == []
    wrong = dict(want, grads=[None if g is None else (np.asarray(g) * 1.01 + 0.01).tolist()
                              for g in want["grads"]])
    assert any("gradient of leaf" in d for d in driver.compare(right, want, wrong))
    faulty = next(p for p in map(lambda i: driver.program(0, i), range(100))
                  if p["fault"] == "string_gradient")
    want = driver.expected(faulty)
    faulty_name = f"`program_{faulty['seed']}_{faulty['index']}`"
    assert driver.compare(faulty, want, {"error": "TypeError", "message": "bare"})
    assert driver.compare(faulty, want, {"error": "CustomGradientError", "message": faulty_name})
    assert driver.compare(faulty, want, {"error": "GradFnResultError", "message": "`f`"})
    assert driver.compare(faulty, want, {"error": "GradFnResultError",
                                         "message": faulty_name}) == []


def test_the_allow_list_is_the_table_of_the_differences_page():
    driver = _driver()
    rows = driver.documented_rows()
    assert rows["op:sin:float64"] == {"jax"}
    p = next(p for p in map(lambda i: driver.program(0, i), range(300))
             if "op:sin:float64" in driver.tags(p))
    assert driver.allowed(rows, p, "jax") == "op:sin:float64"
    assert driver.allowed(rows, p, "torch") is None
