"""The version matrix: the Python suite of one backend in a venv holding only that backend, at the
floor and the newest version of each framework in the supported range (pyproject.toml).

Each cell is a one-backend install, as a user makes it (`pip install ".[torch]"` plus the versions
of the cell), in a venv cached outside the clone and rebuilt only when the cell or pyproject.toml
or its extra changes; the suite then runs on this clone's sources (PYTHONPATH=python).

    python3 scripts/matrix.py            # every cell (make matrix)
    python3 scripts/matrix.py --ci       # the cells the README's test command runs
    python3 scripts/matrix.py torch-2.11 # one cell
    python3 scripts/matrix.py --list
    python3 scripts/matrix.py --bench torch-2.11 torch-2.15  # compiled customgrad / native

A cell whose Python is not on the machine is skipped with a printed reason. The project venv's
pinned stack (requirements.txt: all three backends in one venv) is not a cell: scripts/run_tests.sh
runs it first. It needs only Python >= 3.11's standard library.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("CUSTOMGRAD_MATRIX_DIR",
                            Path.home() / ".cache" / "customgrad" / "matrix"))


@dataclass(frozen=True)
class Cell:
    backend: str  # the KERAS_BACKEND, and the extra installed
    python: str  # "3.11"
    pins: tuple  # the versions of this cell, beside the extra's range
    extra: str = ""  # the pyproject extra, when it is not the backend's name
    # pip here is capped at torch 2.14.1 by a constraint file; a cell past it lifts the cap
    lift_pip_cap: bool = False
    env: dict = field(default_factory=dict)


CELLS = {
    "torch-2.11": Cell("torch", "3.11", ("torch==2.11.0", "keras==3.15.0"), lift_pip_cap=True),
    "torch-2.15": Cell("torch", "3.11", ("torch==2.15.0", "keras==3.15.1"), lift_pip_cap=True),
    "jax-0.10": Cell("jax", "3.11", ("jax==0.10.2", "jaxlib==0.10.2", "keras==3.15.0")),
    "jax-0.12": Cell("jax", "3.12", ("jax==0.12.*", "jaxlib==0.12.*", "keras==3.15.1")),
    # tensorflow 2.16 passes every test but one: its eager calls grow memory by ~2 KB each
    "tensorflow-2.17": Cell("tensorflow", "3.11", ("tensorflow-cpu==2.17.1", "keras==3.15.0"),
                            extra="tensorflow-cpu"),
    "tensorflow-2.21": Cell("tensorflow", "3.11", ("tensorflow-cpu==2.21.0", "keras==3.15.1"),
                            extra="tensorflow-cpu"),
}
# The newest torch and jax: what `make test` runs beside the pinned stack (time: see README)
CI_CELLS = ("torch-2.15", "jax-0.12")
# customgrad's record over another's, as `make bench` computes it (the median of paired rounds)
BENCH_RATIO = runpy.run_path(str(ROOT / "bench" / "run.py"), run_name="bench")["ratio"]
TEST_TOOLS = ("pytest", "hypothesis")


def find_python(version: str) -> str | None:
    """An interpreter of `version` ("3.12"): on the PATH, else one pyenv keeps."""
    found = shutil.which(f"python{version}")
    if found:
        # the interpreter itself (a pyenv shim of a version not selected fails here), so that
        # the cache does not depend on how the PATH reaches it
        probe = subprocess.run([found, "-c", "import sys; print(sys.executable)"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return probe.stdout.strip()
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"))
    return candidates[-1] if candidates else None


def venv_of(name: str, cell: Cell, python: str) -> tuple[Path, bool]:
    """The cell's venv, built if missing or stale; (its python, whether it was built now)."""
    home = CACHE / name
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"][cell.extra or cell.backend]
    recipe = json.dumps([cell, python, project["dependencies"], extra], default=str)
    stamp, want = home / ".customgrad-cell", hashlib.sha256(recipe.encode()).hexdigest()
    py = home / "bin" / "python"
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        _refresh_customgrad(py)
        return py, False
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([python, "-m", "venv", str(home)], check=True)
    env = dict(os.environ)
    if cell.lift_pip_cap:
        env["PIP_CONSTRAINT"] = "/dev/null"
    # A pure-Python wheel of this clone with the cell's extra: the one-backend install of the README
    install = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
               f"{ROOT}[{cell.extra or cell.backend}]", *cell.pins, *TEST_TOOLS]
    print(f"matrix: building {name}: {' '.join(install[5:])}", flush=True)
    with _building_from_clone():
        subprocess.run(install, check=True, env=env)
    stamp.write_text(want)
    return py, True


@contextlib.contextmanager
def _building_from_clone():
    """One wheel build from this clone at a time: setuptools builds in the clone's own build/
    directory, and two cells building side by side (run_tests.py runs two jobs at a time) made
    one fail there ("[Errno 2] No such file or directory" while copying build/lib)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".build-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _refresh_customgrad(py: Path):
    """Reinstalls this clone's customgrad (no dependencies) where the venv holds another
    version: the tests run on the sources, but read the installed distribution's metadata."""
    source = re.search(r'^__version__ = "(.+)"$',
                       (ROOT / "python" / "customgrad" / "__init__.py").read_text(), re.M)[1]
    installed = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(m.version('customgrad'))"],
        capture_output=True, text=True).stdout.strip()
    if installed != source:
        with _building_from_clone():
            subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--no-deps", "--force-reinstall", str(ROOT)], check=True)


def versions(py: Path, backend: str) -> str:
    # the backend's name is its framework's module name
    code = (f"import sys, keras, {backend} as fw; print(f'python {{sys.version.split()[0]}}, "
            f"keras {{keras.__version__}}, {backend} {{fw.__version__}}')")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True,
                         env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return out.stdout.strip() or f"(versions unreadable: {out.stderr.strip()[-200:]})"


def run_cell(name: str, junit_dir: Path | None, pytest_args: list,
             setup_only: bool = False) -> tuple[str, str, int, float]:
    cell = CELLS[name]
    python = find_python(cell.python)
    if python is None:
        reason = f"no Python {cell.python} on this machine (PATH or pyenv)"
        print(f"matrix: SKIPPED {name}: {reason}", flush=True)
        return name, f"skipped: {reason}", 0, 0.0
    py, _ = venv_of(name, cell, python)
    about = versions(py, cell.backend)
    if setup_only:
        print(f"matrix: {name} ready ({about})", flush=True)
        return name, about, 0, 0.0
    print(f"=== matrix cell {name} ({about}): pytest tests/python with "
          f"KERAS_BACKEND={cell.backend} ===", flush=True)
    env = {**os.environ, **cell.env, "KERAS_BACKEND": cell.backend,
           "PYTHONPATH": str(ROOT / "python"), "PYTHONUNBUFFERED": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/python", *pytest_args]
    if junit_dir is not None:
        cmd += [f"--junitxml={junit_dir}/matrix-{name}.xml", "-o",
                f"junit_suite_name=matrix-{name}"]
    start = time.monotonic()
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    return name, about, rc, time.monotonic() - start


def bench_cell(name: str) -> list[str]:
    """The compiled benchmark row of one cell (bench/bench_backend.py's compiled_large on 2^20
    elements): customgrad over a hand-written native custom gradient, per function, as the
    median of per-round ratios (both timed back to back in each round)."""
    cell = CELLS[name]
    python = find_python(cell.python)
    if python is None:
        return [f"{name}: skipped: no Python {cell.python} on this machine"]
    py, _ = venv_of(name, cell, python)
    env = {**os.environ, "KERAS_BACKEND": cell.backend, "PYTHONPATH": str(ROOT / "python"),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([str(py), "bench/bench_backend.py", "--only", "compiled_large",
                           "--large", "20"], cwd=ROOT, env=env, capture_output=True, text=True)
    records = {(r["fn"], r["kind"]): r for r in map(json.loads, proc.stdout.splitlines())
               if "rounds" in r}
    rows = []
    for fn in ("softplus", "swish", "three"):
        cg, native = records.get((fn, "customgrad")), records.get((fn, "native"))
        if cg and native:
            ratio = BENCH_RATIO(cg, native)
            rows.append(f"{name}: compiled {fn}, 2^20 elements: customgrad {cg['median']:.3g} ms, "
                        f"native {native['median']:.3g} ms, customgrad / native {ratio:.2f}x")
    return rows or [f"{name}: the benchmark failed: {proc.stderr.strip()[-500:]}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cells", nargs="*", help="cells to run (default: all)")
    parser.add_argument("--ci", action="store_true", help=f"run {', '.join(CI_CELLS)}")
    parser.add_argument("--list", action="store_true", help="list the cells and exit")
    parser.add_argument("--bench", action="store_true",
                        help="time the compiled benchmark row in each cell instead of the tests")
    parser.add_argument("--setup-only", action="store_true", help="build the venvs, run nothing")
    parser.add_argument("--junit-dir", type=Path, help="write one JUnit file per cell here")
    args, pytest_args = parser.parse_known_args()
    if args.list:
        for name, cell in CELLS.items():
            print(f"{name:18} python {cell.python}  {' '.join(cell.pins)}"
                  + ("  (CI)" if name in CI_CELLS else ""))
        return 0
    names = list(CI_CELLS) if args.ci else (args.cells or list(CELLS))
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        parser.error(f"unknown cell(s) {unknown}; the cells are {list(CELLS)}")
    if args.bench:
        for name in names:
            print("\n".join(bench_cell(name)), flush=True)
        return 0
    results = [run_cell(n, args.junit_dir, pytest_args, args.setup_only) for n in names]
    print("\nmatrix: cell | versions | result | time")
    for name, about, rc, seconds in results:
        verdict = "passed" if rc == 0 else f"FAILED (pytest exit {rc})"
        if about.startswith("skipped"):
            verdict, about = about, "-"
        print(f"matrix: {name} | {about} | {verdict} | {seconds:.0f} s")
    return 1 if any(rc for _, _, rc, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
