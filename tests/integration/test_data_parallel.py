"""Data-parallel training on each framework's own engine gives the weights of single-device
training (each backend in its own process: see data_parallel.py)."""

import importlib.util
import os
import runpy
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
# the one list of backends, read without importing Keras in this process
AUTODIFF = runpy.run_path(os.path.join(HERE, "..", "..", "python", "customgrad",
                                       "_backend_names.py"))["AUTODIFF"]


@pytest.mark.parametrize("backend", [*AUTODIFF, "jax_processes", "tensorflow_workers"])
def test_data_parallel_training_matches_single_device(backend):
    framework = backend.split("_")[0]
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed here (a one-backend install)")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "data_parallel.py"), backend],
                          capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if "max weight difference" in line
             or "smallest change" in line]
    print("\n".join(lines))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert any("max weight difference" in line for line in lines)
