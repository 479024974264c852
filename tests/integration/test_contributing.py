"""CONTRIBUTING.md says how to run each part of the tests by hand: what it names exists (make
targets, scripts, test folders, pip extras), and its Python command, read from the page, runs
(on one file): on jax, and on torch without upstream warnings."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "CONTRIBUTING.md").read_text()


def sh_lines() -> list:
    blocks = re.findall(r"^```sh\n(.*?)^```", PAGE, flags=re.S | re.M)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def pytest_command() -> str:
    (line,) = [line for line in sh_lines() if "pytest" in line and "tests/python" in line]
    return line


def test_the_readme_links_it():
    assert "[CONTRIBUTING.md](CONTRIBUTING.md)" in (ROOT / "README.md").read_text()


def test_what_it_names_exists():
    targets = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    named = re.findall(r"^(?:\w+=\w+ )?make ([\w-]+)", "\n".join(sh_lines()), flags=re.M)
    assert {"check", "test", "test-python", "test-r", "test-integration", "matrix", "fuzz", "tfp",
            "bench", "docs"} <= set(named), named
    assert set(named) <= set(targets.split()), named
    for path in set(re.findall(r"\b((?:scripts|tests)/[\w/.-]+)", PAGE)):
        assert (ROOT / path.rstrip(".")).exists(), f"CONTRIBUTING.md names {path}, which is missing"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for group in re.findall(r'pip install -e "\.\[([\w,-]+)\]"', PAGE):
        assert set(group.split(",")) <= set(extras), group
    assert "test" in extras
    assert any(line.startswith(".venv/bin/python -m pytest") and "tests/integration" in line
               for line in sh_lines())
    assert any("scripts/run_r_tests.R" in line for line in sh_lines())


def _run(command: str, backend: str, selection: str, *extra: str) -> subprocess.CompletedProcess:
    """The page's pytest command on `backend`, over `selection` instead of all of tests/python."""
    assert command.startswith("KERAS_BACKEND=jax .venv/bin/python -m pytest"), command
    args = command.split()[2:]  # from "-m pytest"
    args[args.index("tests/python")] = selection
    env = dict(os.environ, KERAS_BACKEND=backend)
    env.pop("PYTHONWARNINGS", None)  # as a contributor's shell: scripts/run_tests.py sets it
    return subprocess.run([sys.executable, *args, "-p", "no:cacheprovider", *extra], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_its_pytest_command_runs_on_jax():
    proc = _run(pytest_command(), "jax", "tests/python/test_readme.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b2 passed\b", proc.stdout), proc.stdout[-1000:]


def test_a_direct_run_on_torch_is_quiet():
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode:
        pytest.skip("torch is not installed in this Python")
    proc = _run(pytest_command(), "torch", "tests/python/test_ops.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed" in proc.stdout and "warning" not in proc.stdout, proc.stdout[-3000:]
