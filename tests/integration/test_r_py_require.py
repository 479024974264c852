"""keras3's own set-up route, end to end: no RETICULATE_PYTHON, reticulate (>= 1.41) builds an
ephemeral environment with uv from what keras3 and customgrad declare with py_require().

Both orders an R user meets: keras3 starts Python before customgrad is loaded (customgrad's
requirement then joins the running environment), and customgrad is loaded before Python starts.
On jax only: keras3 declares torch from the PyTorch wheel index, which these machines cannot
reach, and tensorflow's wheels are several hundred MB more to resolve on every run. Each R
session resolves against PyPI (45-90 s); the two run side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 480  # seconds per R session

LOG1PEXP = r"""
log1pexp <- op_custom_gradient(\(x) {
  e <- op_exp(x)
  tuple(op_log(1 + e), \(upstream) upstream * (1 - 1 / (1 + e)))
})
cat("grad:", as.numeric(op_grad(log1pexp)(100)), "\n")
cat("python:", reticulate::py_config()$python, "\n")
cat("customgrad from:", reticulate::import("customgrad")$`__file__`, "\n")
"""

ORDERS = {
    "keras3 starts Python first": "library(keras3)\nx <- op_convert_to_tensor(1)\n"
                                  "stopifnot(reticulate::py_available())\nlibrary(customgrad)\n",
    "customgrad loaded before Python starts": "library(customgrad)\n"
                                              "stopifnot(!reticulate::py_available())\n",
}


def _env() -> dict:
    env = dict(os.environ)
    env.pop("RETICULATE_PYTHON", None)
    env["R_LIBS"] = str(ROOT / ".Rlib")
    env["KERAS_BACKEND"] = "jax"
    env["RETICULATE_UV"] = str(ROOT / ".venv" / "bin" / "uv")  # uv from PyPI (requirements.txt)
    env["UV_PYTHON_PREFERENCE"] = "only-system"  # no managed Python can be downloaded here
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def test_py_require_route_on_jax():
    if not (ROOT / ".Rlib" / "keras3").exists():
        pytest.fail("keras3 is not in .Rlib; run `make setup`")
    procs = {}
    # a neutral working directory: reticulate would otherwise pick up the project's .venv
    with tempfile.TemporaryDirectory() as work:
        for name, prelude in ORDERS.items():
            script = Path(work) / f"{len(procs)}.R"
            script.write_text(prelude + LOG1PEXP)
            procs[name] = subprocess.Popen(["Rscript", "--vanilla", str(script)], cwd=work,
                                           env=_env(), stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
        outputs = {name: proc.communicate(timeout=TIMEOUT)[0] for name, proc in procs.items()}
    for name, out in outputs.items():
        sys.stdout.write(f"--- {name}\n{out[-3000:]}\n")
        assert procs[name].returncode == 0, f"{name}: R exited {procs[name].returncode}\n{out[-4000:]}"
        assert "grad: 1 \n" in out, f"{name}: log1pexp's gradient at 100 is not 1\n{out[-4000:]}"
        python = out.split("python: ", 1)[1].split()[0]
        assert not python.startswith(str(ROOT)), f"{name}: used the project venv {python}"
        module = out.split("customgrad from: ", 1)[1].split()[0]
        assert not module.startswith(str(ROOT / "python")), f"{name}: not the shipped wheel"
