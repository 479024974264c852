"""Training through a custom-gradient layer under torch FSDP1 and FSDP2 (gloo, two processes on
the CPU) gives the weights of one device (see torch_sharded.py)."""

import importlib.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)


@pytest.mark.parametrize("engine", ["fsdp1", "fsdp2"])
def test_sharded_training_matches_one_device(engine):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    env = dict(os.environ, KERAS_BACKEND="torch", PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "torch_sharded.py"), engine],
                          capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if "max weight difference" in line]
    print("\n".join(lines))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert lines, proc.stdout[-3000:]
