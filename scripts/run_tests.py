"""The test command, in tiers: each tier is a few jobs, each job one process writing JUnit XML, and
the jobs run side by side.

    python scripts/run_tests.py check        # make check: the inner loop (about 2-3 min)
    python scripts/run_tests.py python       # make test-python
    python scripts/run_tests.py r            # make test-r
    python scripts/run_tests.py integration  # make test-integration
    python scripts/run_tests.py all          # make test: python, r and integration

- check: ruff and pyright (tests/integration/test_types_and_lint.py), then tests/python on one
  backend (BACKEND, default jax) with the tests marked `slow` skipped, saying so.
- python: tests/python on every backend (Keras fixes its backend per process: one job each),
  every test; the version-matrix cells of `scripts/matrix.py --ci`.
- r: R CMD check with Python on jax, whose testthat run is jax's; testthat on the other backends;
  the R vignettes and README blocks on every backend; the `--as-cran` checks; rpy2.
- integration: the rest of tests/integration, in two jobs: the programs (bench smoke, route grid,
  differential programs, distributed training) and the others (sites, release builds, set-up,
  py_require, Python vignettes, lint and types).

CUSTOMGRAD_TEST_JOBS jobs run at once (default: the CPU count), longest first, each with its math
libraries held to one thread so that two jobs do not fight for the cores. A job's output is
printed whole when it ends. The run ends with the total (scripts/summarize_junit.py), the 15
slowest tests, and each job's and each tier's time. Exit status: 1 when a job failed or no test
passed.
"""
from __future__ import annotations

import os
import runpy
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
BACKENDS = runpy.run_path(str(ROOT / "python" / "customgrad" / "_backend_names.py"))["NAMES"]
CI_CELLS = runpy.run_path(str(ROOT / "scripts" / "matrix.py"), run_name="matrix")["CI_CELLS"]
SUMMARY = runpy.run_path(str(ROOT / "scripts" / "summarize_junit.py"), run_name="summary")

# The files of tests/integration that make the R tier; every other file there is the integration
# tier's (a new file lands there unless it is named here).
R_FILES = ("test_r_check.py", "test_r_package.py", "test_rpy2.py", "test_readme_commands.py")
# The integration tier's second job (so that it runs beside the first): the files that run many
# programs (the benchmark smoke run, the route grid, the differential programs, distributed training)
PROGRAM_FILES = ("test_bench_smoke.py", "test_route_grid.py", "test_differential.py",
                 "test_data_parallel.py", "test_torch_sharded.py")
# Held to one thread each: jobs run side by side, one a core (the benchmarks' setting)
ONE_THREAD = runpy.run_path(str(ROOT / "bench" / "run.py"), run_name="bench")["ONE_THREAD"]
QUIET = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
         "PYTHONWARNINGS": "ignore::DeprecationWarning"}


@dataclass
class Job:
    name: str  # also its JUnit file's name: <name>.xml
    tier: str
    args: list  # after the Python
    env: dict = field(default_factory=dict)
    # seconds in a full run on 2 cores (the order jobs start in: longest first)
    expected_s: int = 60
    start: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None


def pytest_job(name: str, tier: str, paths: list, expected_s: int, env: dict | None = None) -> Job:
    return Job(name, tier, ["-m", "pytest", "-q", "-p", "no:cacheprovider", *paths,
                            "--junitxml={out}/" + name + ".xml", "-o",
                            f"junit_suite_name={name}"], env or {}, expected_s)


def jobs_of(tier: str, backend: str) -> list:
    """The jobs of `tier`; `backend` is the one `check` runs."""
    integration = ROOT / "tests" / "integration"
    if tier == "check":
        return [pytest_job("lint-and-types", "check",
                           ["tests/integration/test_types_and_lint.py"], 40),
                pytest_job(f"python-{backend}", "check", ["tests/python"], 150,
                           {"KERAS_BACKEND": backend, "CUSTOMGRAD_SKIP_SLOW": "1"})]
    if tier == "python":
        expected = {"tensorflow": 100, "torch": 100, "jax": 100, "numpy": 15}
        return ([pytest_job(f"python-{b}", "python", ["tests/python"], expected.get(b, 120),
                            {"KERAS_BACKEND": b}) for b in BACKENDS]
                + [Job(f"matrix-{cell}", "python",
                       ["scripts/matrix.py", cell, "--junit-dir", "{out}"], {}, 100)
                   for cell in CI_CELLS])  # ~100 s each once its venv is cached
    if tier == "r":
        return [pytest_job("r-check", "r", ["tests/integration/test_r_check.py"], 230),
                pytest_job("r-package", "r", ["tests/integration/test_r_package.py"], 380),
                pytest_job("r-rpy2-and-install", "r",
                           ["tests/integration/test_rpy2.py",
                            "tests/integration/test_readme_commands.py"], 60)]
    if tier == "integration":
        ignored = [f"--ignore={integration / name}" for name in R_FILES + PROGRAM_FILES]
        return [pytest_job("integration", "integration", ["tests/integration", *ignored], 460),
                pytest_job("integration-programs", "integration",
                           [f"tests/integration/{name}" for name in PROGRAM_FILES], 480)]
    if tier == "all":
        return [job for t in ("python", "r", "integration") for job in jobs_of(t, backend)]
    raise SystemExit(f"run_tests.py: unknown tier {tier!r}; the tiers are check, python, r, "
                     "integration and all")


def run(job: Job, out: Path, lock) -> Job:
    env = {**os.environ, **QUIET, **ONE_THREAD, **job.env, "CUSTOMGRAD_JUNIT_DIR": str(out)}
    args = [a.replace("{out}", str(out)) for a in job.args]
    log = out / f"{job.name}.log"
    with lock:
        print(f"--- started {job.name} ({job.tier})", flush=True)
    job.start = time.monotonic()
    with log.open("w") as handle:
        job.returncode = subprocess.run([PY, *args], cwd=ROOT, env=env, stdout=handle,
                                        stderr=subprocess.STDOUT).returncode
    job.seconds = time.monotonic() - job.start
    verdict = "passed" if job.returncode == 0 else f"FAILED (exit {job.returncode})"
    with lock:
        print(f"=== {job.name} ({job.tier}): {verdict} in {job.seconds:.0f} s; its output: ===",
              flush=True)
        sys.stdout.write(log.read_text(errors="replace"))
        print(f"=== end of {job.name} ===", flush=True)
    return job


def report_times(jobs: list, wall: float) -> None:
    print("\nTime per job (side by side; a tier's time is its first start to its last end):")
    for job in sorted(jobs, key=lambda j: -j.seconds):
        print(f"  {job.name:24} {job.tier:12} {job.seconds:7.0f} s")
    begin = min(j.start for j in jobs)
    for tier in dict.fromkeys(j.tier for j in jobs):
        mine = [j for j in jobs if j.tier == tier]
        span = max(j.start + j.seconds for j in mine) - min(j.start for j in mine)
        print(f"  tier {tier:12} {span:7.0f} s wall, {sum(j.seconds for j in mine):6.0f} s of "
              f"jobs, from +{min(j.start for j in mine) - begin:.0f} s")
    print(f"  all tiers: {wall:.0f} s ({wall / 60:.1f} min)")


def main(argv: list) -> int:
    tier = argv[0] if argv else "all"
    backend = os.environ.get("BACKEND", "jax")
    jobs = sorted(jobs_of(tier, backend), key=lambda j: -j.expected_s)
    workers = int(os.environ.get("CUSTOMGRAD_TEST_JOBS", os.cpu_count() or 1))
    out = Path(tempfile.mkdtemp(prefix=f"customgrad-{tier}-"))
    print(f"run_tests.py {tier}: {len(jobs)} jobs, {workers} at a time; JUnit and logs in {out}",
          flush=True)
    lock = threading.Lock()
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(lambda job: run(job, out, lock), jobs))
    wall = time.monotonic() - start
    xml = sorted(str(p) for p in out.glob("*.xml"))
    status, slowest = SUMMARY["read"](xml)
    print()
    SUMMARY["print_slowest"](slowest, 15)
    report_times(jobs, wall)
    failed = [j.name for j in jobs if j.returncode != 0]
    if failed:
        print(f"failed jobs: {', '.join(failed)}")
    return max(SUMMARY["print_total"](status), 1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
