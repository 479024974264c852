"""R CMD check of the built tarball, with Python found and the whole testthat suite run.

The tarball is built the way a user gets it (R CMD build, after scripts/setup.sh has shipped the
Python package into inst/python/dist) and checked with RETICULATE_PYTHON pointing at the project's
venv. One backend runs here, jax: the testthat suite skips nothing there (on torch the trace-only
test has nothing to test), and test_r_package.py already runs the suite on all three backends.
The vignettes are not rebuilt here (--no-build-vignettes / --ignore-vignettes): test_r_package.py
renders each of them on every backend.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKEND = "jax"


def _env() -> dict:
    env = dict(os.environ)
    # the venv folder may be a link; its bin/python must stay the venv's (not the base Python)
    env["RETICULATE_PYTHON"] = str(Path(os.path.realpath(ROOT / ".venv")) / "bin" / "python")
    env["KERAS_BACKEND"] = BACKEND
    env["NOT_CRAN"] = "true"  # testthat's snapshot tests run only then
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["R_LIBS"] = str(ROOT / ".Rlib")  # keras3 and reticulate, installed by scripts/setup.sh
    return env


def _run(cmd: list, cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _package_source(dest: Path) -> Path:
    """The files R CMD build needs, copied to `dest`: what git tracks or would track (so not the
    multi-GB .venv or the .Rlib, which R CMD build would copy before applying .Rbuildignore),
    plus the shipped Python package in inst/python/dist (made by setup, ignored by git)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "inst" / "python" / "dist").glob("*")]
    src = dest / "customgrad"
    for name in filter(None, files):
        if name.startswith(("python/", "tests/python/", "bench/", "tools/")) or name == ".venv":
            continue  # Rbuildignored anyway
        if not (ROOT / name).is_file():
            continue  # deleted in the working tree
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    return src


def test_r_cmd_check_runs_every_test_with_python(tmp_path):
    if shutil.which("R") is None:
        pytest.fail("R is not installed; run `make setup` (installs R from Debian)")
    setup = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True,
                           text=True, timeout=900)
    assert setup.returncode == 0, f"scripts/setup.sh failed:\n{setup.stdout}\n{setup.stderr}"

    src = _package_source(tmp_path / "src")
    build = _run(["R", "CMD", "build", "--no-build-vignettes", "--no-manual", str(src)],
                 tmp_path, 300)
    assert build.returncode == 0, f"R CMD build failed:\n{build.stdout}\n{build.stderr}"
    tarballs = list(tmp_path.glob("customgrad_*.tar.gz"))
    assert len(tarballs) == 1, f"R CMD build made {tarballs}"
    listing = subprocess.run(["tar", "tzf", str(tarballs[0])], capture_output=True, text=True)
    assert re.search(r"customgrad/inst/python/dist/customgrad-[^/]+\.whl", listing.stdout), \
        "the tarball does not ship the Python package (inst/python/dist)"

    check = _run(["R", "CMD", "check", "--no-manual", "--ignore-vignettes", tarballs[0].name],
                 tmp_path, 900)
    rcheck = tmp_path / "customgrad.Rcheck"
    log = (rcheck / "00check.log").read_text(errors="replace")
    print(log[-3000:])
    status = re.search(r"^Status: (.*)$", log, re.M)
    assert status, f"no Status line in 00check.log:\n{log[-4000:]}\n{check.stdout[-4000:]}"
    assert "ERROR" not in status.group(1) and "WARNING" not in status.group(1), (
        f"R CMD check: {status.group(1)}\n{log[-6000:]}")
    assert check.returncode == 0, f"R CMD check exited {check.returncode}:\n{check.stdout[-4000:]}"
    notes = re.findall(r"^\* checking (.*) \.\.\. NOTE$", log, re.M)
    print(f"R CMD check on {BACKEND}: {status.group(1)}; NOTEs: {notes}")

    # the testthat suite ran whole: Python was found and nothing was skipped
    rout = (rcheck / "tests" / "testthat.Rout").read_text(errors="replace")
    counts = re.findall(r"\[ FAIL (\d+) \| WARN (\d+) \| SKIP (\d+) \| PASS (\d+) \]", rout)
    assert counts, f"no testthat summary in testthat.Rout:\n{rout[-3000:]}"
    fail, warn, skip, passed = map(int, counts[-1])
    assert fail == 0 and skip == 0, f"testthat under R CMD check: {counts[-1]}\n{rout[-5000:]}"
    # ~455 on jax since the copy of keras3's op surface (and its parity tests) went
    assert passed >= 400, f"only {passed} expectations passed under R CMD check"

    # the examples ran against Python: ?customgrad_ops printed op_log1pexp's gradient at 100
    examples = (rcheck / "customgrad-Ex.Rout").read_text(errors="replace")
    assert "> op_grad(op_log1pexp)(100)\nArray(1., dtype=float32)" in examples, \
        "the examples did not reach Python"
