"""The README's R install line, run as written in a scratch clone of this repository, as an R
user with keras3 and reticulate from CRAN would run it (`bash scripts/install_r.sh`, or the
R CMD INSTALL of a tarball from scripts/build_r_tarball.sh, which it wraps) builds the package's
tarball as for CRAN (the wheel with whatever Python has pip, since the clone has no venv;
the vignettes from their recorded outputs) and installs it. `library(customgrad)` then loads it
from that library alone, beside keras3's, ships that wheel, and `vignette(package = "customgrad")`
lists the R vignettes."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
R_VIGNETTES = ["checking-gradients", "getting-started", "gradient-reversal"]


def _readme_line(pattern: str) -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines() if re.search(pattern, line)]
    assert len(lines) == 1, f"the README has {len(lines)} sh lines matching {pattern!r}: {lines}"
    return lines[0]


def _scratch_clone(clone: Path) -> None:
    """A git clone of ROOT holding its working tree as it is now (uncommitted edits, new files
    git does not ignore, deletions), so that the test runs the scripts being changed."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True, timeout=60).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = ROOT / name, clone / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.is_file():
            target.unlink()


def test_the_readme_r_install_line_works_in_a_fresh_clone(tmp_path):
    if shutil.which("Rscript") is None or shutil.which("git") is None:
        pytest.fail("R and git are needed; `make setup` installs R")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git clone, so there is nothing to clone from")
    if not (ROOT / ".Rlib" / "keras3").is_dir():
        pytest.fail("keras3 is not in .Rlib; run `make setup`")
    line = _readme_line(r"scripts/install_r\.sh|R CMD INSTALL")
    clone = tmp_path / "customgrad"
    _scratch_clone(clone)
    library = tmp_path / "library"
    library.mkdir()
    # keras3 and reticulate from CRAN: here the project library holds them; nothing of the
    # project's venv is on the PATH, as for a user who has no clone set up
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    env = dict(os.environ, PATH=path, R_LIBS=f"{library}{os.pathsep}{ROOT / '.Rlib'}",
               R_LIBS_USER=str(library))
    for name in ("VIRTUAL_ENV", "RETICULATE_PYTHON", "NOT_CRAN"):
        env.pop(name, None)
    proc = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    loaded = subprocess.run(
        ["Rscript", "-e", "library(customgrad)\n"
         "cat('path:', find.package('customgrad'), '\\n')\n"
         "cat('wheel:', basename(Sys.glob(file.path("
         "system.file('python', 'dist', package = 'customgrad'), '*.whl'))), '\\n')\n"
         "cat('vignettes:', sort(vignette(package = 'customgrad')$results[, 'Item']), '\\n')"],
        env=env, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    said = dict(out.split(":", 1) for out in loaded.stdout.splitlines() if ":" in out)
    assert Path(said["path"].strip()).resolve() == (library / "customgrad").resolve(), loaded.stdout
    assert re.fullmatch(r"customgrad-[\w.]+-py3-none-any\.whl", said["wheel"].strip()), loaded.stdout
    assert said["vignettes"].split() == R_VIGNETTES, loaded.stdout
