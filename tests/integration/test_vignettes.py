"""The Python vignettes execute: their ```python blocks run in order, in a fresh process per
backend (so a walkthrough can never rot). The R vignettes are rendered by test_r_package.py."""

import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the one list of backends, read without importing Keras in this process
ALL = list(runpy.run_path(
    str(ROOT / "python" / "customgrad" / "_backend_names.py"))["AUTODIFF"])
VIGNETTES = {
    "getting-started": ALL,
    "checking-gradients": ALL,
    "gradient-reversal": ALL,
    "straight-through": ALL,
}


def code_blocks(path: Path) -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    assert blocks, f"{path.name} has no python code blocks"
    return "\n\n".join(blocks)


@pytest.mark.parametrize("name,backend", [(n, b) for n, bs in VIGNETTES.items() for b in bs])
def test_python_vignette_runs(name, backend, tmp_path):
    code = code_blocks(ROOT / "vignettes" / f"{name}.md")
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    print(proc.stdout[-3000:])
    print(f"{name} on {backend}: {seconds:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    if name == "getting-started":
        assert (tmp_path / f"log1pexp-gradient-{backend}.png").stat().st_size > 10_000


def test_readme_links_every_vignette():
    readme = (ROOT / "README.md").read_text()
    for name in VIGNETTES:
        assert f"vignettes/{name}.md" in readme, f"README does not link vignettes/{name}.md"
