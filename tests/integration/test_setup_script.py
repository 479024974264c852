"""scripts/setup.sh's check of the R stack (scripts/r_stack.R): reticulate and keras3 count only
when they are in the project's library itself, since `R_LIBS=.Rlib` sessions see no other user
library; its report says where each one is. Run on small fake libraries, not through setup.sh."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fake_package(lib: Path, name: str, version: str) -> Path:
    """An installed-looking package: only its DESCRIPTION, which is what find.package() reads."""
    (lib / name).mkdir(parents=True)
    (lib / name / "DESCRIPTION").write_text(f"Package: {name}\nVersion: {version}\nTitle: fake\n")
    return lib / name


def _r_stack(lib: Path, user_library: Path) -> subprocess.CompletedProcess:
    if shutil.which("Rscript") is None:
        pytest.fail("Rscript is needed; `make setup` installs R")
    env = dict(os.environ, R_LIBS=str(user_library), R_LIBS_USER=str(user_library))
    return subprocess.run(["Rscript", str(ROOT / "scripts" / "r_stack.R"), str(lib)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_keras3_in_the_user_library_does_not_count(tmp_path):
    user_library, project = tmp_path / "user", tmp_path / "Rlib"
    project.mkdir()
    elsewhere = _fake_package(user_library, "keras3", "1.5.1")
    _fake_package(project, "reticulate", "1.30")
    proc = _r_stack(project, user_library)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"keras3 is not in {project}" in proc.stdout, proc.stdout
    assert f"keras3 1.5.1 is in {elsewhere}" in proc.stdout, proc.stdout
    assert f"reticulate in {project} is 1.30; customgrad needs >= 1.41" in proc.stdout, proc.stdout


def test_the_report_names_each_package_path_in_the_project_library(tmp_path):
    lib = ROOT / ".Rlib"
    if not (lib / "keras3").is_dir():
        pytest.fail("keras3 is not in .Rlib; run `make setup`")
    proc = _r_stack(lib, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("reticulate", "keras3"):
        assert f"({lib.resolve() / name})" in proc.stdout, proc.stdout
    assert f"in {lib.resolve()}, " in proc.stdout, proc.stdout


def test_setup_checks_and_reports_the_r_stack_with_that_script():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert setup.count("Rscript scripts/r_stack.R .Rlib") == 2, "setup.sh: check, then recheck"
    assert 'echo "setup: R stack: $r_stack"' in setup
