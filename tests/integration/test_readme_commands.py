"""The README's R install line, run as written in a scratch clone of this repository, as an R
user with keras3 and reticulate from CRAN would run it: `bash scripts/ship_python.sh && R CMD
INSTALL .` builds the wheel with whatever Python has pip (the clone has no venv), installs the
package, and `library(customgrad)` then loads it and ships that wheel."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _readme_line(containing: str) -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines() if containing in line]
    assert len(lines) == 1, f"the README has {len(lines)} sh lines with {containing!r}"
    return lines[0]


def test_the_readme_r_install_line_works_in_a_fresh_clone(tmp_path):
    if shutil.which("Rscript") is None or shutil.which("git") is None:
        pytest.fail("R and git are needed; `make setup` installs R")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git clone, so there is nothing to clone from")
    if not (ROOT / ".Rlib" / "keras3").is_dir():
        pytest.fail("keras3 is not in .Rlib; run `make setup`")
    line = _readme_line("R CMD INSTALL")
    clone = tmp_path / "customgrad"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    library = tmp_path / "library"
    library.mkdir()
    # keras3 and reticulate from CRAN: here the project library holds them; nothing of the
    # project's venv is on the PATH, as for a user who has no clone set up
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    env = dict(os.environ, PATH=path, R_LIBS=f"{library}{os.pathsep}{ROOT / '.Rlib'}",
               R_LIBS_USER=str(library))
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    loaded = subprocess.run(
        ["Rscript", "-e", "library(customgrad); cat(basename(Sys.glob(file.path("
         "system.file('python', 'dist', package = 'customgrad'), '*.whl'))))"],
        env=env, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert re.fullmatch(r"customgrad-[\w.]+-py3-none-any\.whl", loaded.stdout.strip()), loaded.stdout
    assert (library / "customgrad").is_dir()
