"""Runs the R package's testthat suite and renders its vignettes, once per Keras backend.

Each backend gets its own Rscript process (Keras fixes its backend per process; reticulate
starts Python inside R), scripts/run_r_tests.R, which writes testthat's own JUnit XML
(JunitReporter: one testcase per expectation), so a failing R test fails here with its file, name
and message (testthat_results.py). The testthat suite runs here on every backend but one: on
testthat_results.CHECK_BACKEND it runs inside R CMD check (test_r_check.py), once. R runs here on
its own, as R users run it; test_rpy2.py runs it inside Python through rpy2.
"""

from __future__ import annotations

import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import testthat_results

ROOT = Path(__file__).resolve().parents[2]
# the one list of backends, read without importing Keras in this process
BACKENDS = list(runpy.run_path(
    str(ROOT / "python" / "customgrad" / "_backend_names.py"))["AUTODIFF"])
VIGNETTES = ["getting-started", "checking-gradients", "gradient-reversal"]
R_TIMEOUT = 900  # seconds per backend; about 2-3 minutes each on 2 cores

RENDER = r"""
args <- commandArgs(trailingOnly = TRUE)
out <- rmarkdown::render(args[[1]], output_dir = args[[2]], intermediates_dir = args[[2]],
                         envir = new.env(), quiet = TRUE, clean = FALSE)
cat(out, "\n")
"""


def _env(backend: str) -> dict:
    env = dict(os.environ)
    lib = str(ROOT / ".Rlib")
    env["R_LIBS"] = lib + (os.pathsep + env["R_LIBS"] if env.get("R_LIBS") else "")
    env["KERAS_BACKEND"] = backend
    env["NOT_CRAN"] = "true"  # testthat runs its snapshot tests (expect_snapshot) only then
    # the project venv, chosen the way a keras3 user picks a Python of their own (the venv folder
    # may be a link; its bin/python must stay the venv's, not the base Python)
    env["RETICULATE_PYTHON"] = str(Path(os.path.realpath(ROOT / ".venv")) / "bin" / "python")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


@pytest.fixture(scope="session")
def r_package():
    """Rscript exists and the package is installed (and current) in .Rlib via scripts/setup.sh."""
    if shutil.which("Rscript") is None:
        pytest.fail("Rscript is not installed; run `make setup` (installs R from Debian)")
    if not (ROOT / "DESCRIPTION").exists():
        pytest.fail("no DESCRIPTION at the repository root: the R package is missing")
    proc = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, f"scripts/setup.sh failed:\n{proc.stdout}\n{proc.stderr}"
    assert (ROOT / ".Rlib" / "customgrad" / "DESCRIPTION").exists(), "customgrad not in .Rlib"
    return ROOT / ".Rlib"


def _rscript(code: str, args: list, backend: str, tmp: Path) -> subprocess.CompletedProcess:
    script = tmp / "run.R"
    script.write_text(code)
    return subprocess.run(["Rscript", "--vanilla", str(script), *map(str, args)], cwd=ROOT,
                          env=_env(backend), capture_output=True, text=True, timeout=R_TIMEOUT)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != testthat_results.CHECK_BACKEND])
def test_r_testthat_suite(backend, r_package, tmp_path):
    """testthat on `backend`; on CHECK_BACKEND it runs inside R CMD check (test_r_check.py)."""
    results = tmp_path / f"r-{backend}.xml"
    proc = subprocess.run(["Rscript", "--vanilla", "scripts/run_r_tests.R", str(results)],
                          cwd=ROOT, env=_env(backend), capture_output=True, text=True,
                          timeout=R_TIMEOUT, check=False)
    output = proc.stdout + proc.stderr
    sys.stdout.write(output[-4000:])  # shown by pytest for failing tests (and with -s)
    assert results.exists(), f"the R suite did not finish (exit {proc.returncode}):\n{output[-6000:]}"
    testthat_results.check(results, backend)
    assert proc.returncode == 0, f"Rscript exited with {proc.returncode}:\n{output[-6000:]}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vignette", VIGNETTES)
def test_r_vignette_renders(vignette, backend, r_package, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # render from a copy so that nothing is written next to the sources
    src = tmp_path / f"{vignette}.Rmd"
    shutil.copy(ROOT / "vignettes" / f"{vignette}.Rmd", src)
    proc = _rscript(RENDER, [src, out_dir], backend, tmp_path)
    html = out_dir / f"{vignette}.html"
    assert proc.returncode == 0 and html.exists(), (
        f"rendering {vignette}.Rmd failed on {backend}:\n{(proc.stdout + proc.stderr)[-6000:]}")
    assert html.stat().st_size > 1000
    # the knitted markdown (kept with clean = FALSE) has the chunk outputs as plain text
    knit_md = out_dir / f"{vignette}.knit.md"
    text = knit_md.read_text(errors="replace")
    assert f'#> [1] "{backend}"' in text, "the vignette does not show the active backend"
    assert "Error" not in text.replace("customgrad_error_gradient_check", ""), "an R error in the output"
    if vignette == "getting-started":
        assert "NaN" in text, "plain autodiff should give NaN at 100"
        assert "as.numeric(g)\n#> [1] 1\n" in text, "the custom gradient at 100 should be exactly 1"
    elif vignette == "gradient-reversal":
        # the three claims the vignette checks after training with fit(): all TRUE
        claims = text.split("results$plain[[\"domain_head\"]] > 0.85", 1)[-1]
        assert claims.count("#> [1] TRUE") == 3 and "FALSE" not in claims, claims[:600]
    else:
        assert '#> [1] "customgrad_error_gradient_check"' in text, "the wrong gradient was not caught"
        assert "report$passed\n#> [1] TRUE" in text, "the fixed gradient did not pass"


def _readme_r_blocks() -> list:
    text = (ROOT / "README.md").read_text()
    return [block.split("```", 1)[0] for block in text.split("```r\n")[1:]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_readme_r_examples_run_with_keras3_attached(backend, r_package, tmp_path):
    blocks = _readme_r_blocks()
    assert blocks, "the README has no R example"
    claim = "as.numeric(op_grad(log1pexp)(100))   # [1] 1 on"
    assert any(claim in block for block in blocks), f"no README R block has `{claim}`"
    for i, block in enumerate(blocks):
        assert "library(keras3)" in block, f"README R block {i + 1} does not attach keras3"
        # the block's use_backend() line, on the backend under test
        code = block.replace('use_backend("jax")', f'use_backend("{backend}")')
        code += '\ncat("\\nREADME-BLOCK-OK\\n")\n'
        proc = _rscript(code, [], backend, tmp_path)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "README-BLOCK-OK" in out, (
            f"README R block {i + 1} failed on {backend}:\n{out[-4000:]}")
        if claim in block:
            # what the block prints is what its comment says
            assert re.search(r"(?m)^\[1\] 1$", proc.stdout), proc.stdout[-2000:]
