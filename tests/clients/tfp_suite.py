"""TensorFlow Probability's own tests, natively and with customgrad in place of
`tf.custom_gradient`: counts per module, and the tests that pass natively but fail with
customgrad.

    .venv/bin/python tests/clients/tfp_suite.py --tfp-source DIR [--modules a,b] [--jobs N]
        [--out report.md] [-k EXPR] [--sample N] [--timeout S] [--logs DIR]

DIR is a checkout of TFP's source (the folder holding `tensorflow_probability/`, or that folder
itself). Nothing is fetched or built: TFP's test modules are copied from DIR into a temporary
folder and run by pytest against the INSTALLED `tensorflow_probability` wheel, each module twice,
in separate processes: natively and with customgrad's patch applied before TFP is imported (the
plugin `tfp_plugin.py` beside this file does both; only the test libraries the wheel does not ship
come from DIR). KERAS_BACKEND=tensorflow in both. The exit status is 1 when a test passes natively
and fails with customgrad, 2 when a run could not complete (timeout, crash), else 0.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("native", "customgrad")
SLOW_NATIVE_S = 600  # a module slower than this natively is flagged: run it with -k or --sample

# TFP's test modules that exercise custom gradients (`git grep -l custom_gradient` users), as
# paths under tensorflow_probability/python/ without `.py`. internal/variadic_reduce has no test
# module of its own: math/generic_test covers it (reduce_logsumexp and friends).
DEFAULT_MODULES = (
    "math/bessel_test",
    "math/generic_test",
    "math/special_test",
    "math/hypergeometric_test",
    "math/custom_gradient_test",
    "math/linalg_test",
    "math/gradient_test",
    "math/ode/ode_test",
    "distributions/gamma_test",
    "distributions/student_t_test",
    "distributions/inverse_gaussian_test",
    "distributions/von_mises_test",
    "distributions/two_piece_normal_test",
    "distributions/noncentral_chi2_test",
    "distributions/mixture_same_family_test",
    "bijectors/sigmoid_test",
    "bijectors/softplus_test",
    "experimental/linalg/linear_operator_psd_kernel_test",
    "math/psd_kernels/internal/util_test",
    "experimental/math/manual_special_functions_test",
    "experimental/bijectors/scalar_function_with_inferred_inverse_test",
    "experimental/distributions/marginal_fns_test",
    "internal/distribute_lib_test",
    "internal/custom_gradient_test",
)


@dataclasses.dataclass
class Run:
    """One pytest process: a module in a mode, and what came of it."""

    module: str
    mode: str
    seconds: float = 0.0
    returncode: int | None = None  # None: killed at the timeout
    outcomes: dict = dataclasses.field(default_factory=dict)  # test id -> passed/failed/skipped
    errors: dict = dataclasses.field(default_factory=dict)  # test id -> first line of its error
    problem: str = ""  # why the run gives no usable result ("" when it does)
    log: str = ""

    def count(self, outcome: str) -> int:
        """How many tests had `outcome`."""
        return sum(1 for value in self.outcomes.values() if value == outcome)


def source_root(path: str) -> str:
    """The folder holding `tensorflow_probability/python` (`path` or its parent)."""
    path = os.path.abspath(path)
    for root in (path, os.path.dirname(path)):
        if os.path.isdir(os.path.join(root, "tensorflow_probability", "python")):
            return root
    raise SystemExit(f"--tfp-source {path}: no tensorflow_probability/python there")


def module_name(text: str) -> str:
    """`math/bessel_test` from `math/bessel_test`, `math/bessel_test.py` or `math.bessel_test`."""
    text = text.strip().removesuffix(".py")
    return text if "/" in text else text.replace(".", "/")


def first_line(text: str | None, limit: int = 300) -> str:
    """The first non-empty line of an error message, cut at `limit` characters."""
    line = next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[:limit] + " ..."


def last_error_line(traceback: str | None) -> str:
    """The last `E   ...` line of a pytest traceback (the exception), or ""."""
    lines = [line[1:].strip() for line in (traceback or "").splitlines() if line.startswith("E ")]
    return lines[-1] if lines else ""


def run_pytest(command: list, run: Run, folder: str, env: dict, timeout: float) -> None:
    """Runs a pytest `command` in `folder`, its output into `run.log`; sets `run.returncode`
    (None where it timed out: then `run.problem`) and `run.seconds`."""
    start = time.monotonic()
    with open(run.log, "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        try:
            run.returncode = subprocess.run(command, cwd=folder, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, timeout=timeout,
                                            check=False).returncode
        except subprocess.TimeoutExpired:
            run.problem = f"timed out after {timeout} s"
    run.seconds = time.monotonic() - start


def read_junit(path: str, run: Run) -> None:
    """Fills `run.outcomes` and `run.errors` from pytest's junit XML. A test with a failure or an
    error (setup, call or teardown) failed; one with `skipped` (skip, xfail) was skipped."""
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if not case.get("classname") and bad is not None:  # a collection error
            run.problem = f"collection error: {last_error_line(bad.text) or bad.get('message')}"
            continue
        if bad is not None:
            run.outcomes[test] = "failed"
            run.errors.setdefault(test, first_line(bad.get("message")) or first_line(bad.text))
        elif case.find("skipped") is not None:
            run.outcomes.setdefault(test, "skipped")
        else:
            run.outcomes.setdefault(test, "passed")


def run_module(run: Run, source: str, work: str, options) -> Run:
    """Runs `run.module` in `run.mode` in its own pytest process and reads its result."""
    folder = os.path.join(work, run.module.replace("/", "__"))
    test_file = os.path.join(folder, os.path.basename(run.module) + ".py")
    junit = os.path.join(folder, f"{run.mode}.xml")
    run.log = os.path.join(options.logs, f"{run.module.replace('/', '__')}.{run.mode}.log")
    pythonpath = os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, KERAS_BACKEND="tensorflow", CUSTOMGRAD_TFP_MODE=run.mode,
               CUSTOMGRAD_TFP_SOURCE=source, CUSTOMGRAD_TFP_SAMPLE=str(options.sample),
               PYTHONPATH=pythonpath,
               TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(options.threads),
               OMP_NUM_THREADS=str(options.threads))
    command = [sys.executable, "-m", "pytest", test_file, "-p", "tfp_plugin",
               "-p", "no:cacheprovider", "-q", "-rN", "--tb=short", f"--junitxml={junit}",
               "-c", os.path.join(folder, "pytest.ini"), "--rootdir", folder]
    if options.k:
        command += ["-k", options.k]
    run_pytest(command, run, folder, env, options.timeout)
    if run.returncode is None:
        return run
    if os.path.exists(junit):
        read_junit(junit, run)
    if not run.problem and run.returncode not in (0, 1):
        run.problem = f"pytest exited with {run.returncode} (see {run.log})"
    return run


def prepare(modules, source: str, work: str) -> dict:
    """Copies each module's test file into a folder of its own (with an empty pytest.ini, so no
    project configuration applies); returns {module: why it cannot run} for missing files."""
    missing = {}
    for module in modules:
        original = os.path.join(source, "tensorflow_probability", "python", module + ".py")
        if not os.path.isfile(original):
            missing[module] = f"no such file: {original}"
            continue
        folder = os.path.join(work, module.replace("/", "__"))
        os.makedirs(folder)
        shutil.copy(original, folder)
        with open(os.path.join(folder, "pytest.ini"), "w") as ini:
            ini.write("[pytest]\n")
    return missing


def markdown(runs: dict, dropped: dict, options, wall: float) -> tuple[str, int]:
    """The report, and how many tests pass natively and fail with customgrad."""
    lines = ["# TFP's tests: native tf.custom_gradient vs customgrad", "",
             f"tfp_suite.py, {len(runs)} modules, --jobs {options.jobs}"
             + (f", -k {options.k!r}" if options.k else "")
             + (f", --sample {options.sample}" if options.sample > 1 else "")
             + f"; wall time {wall:.0f} s", "",
             "| module | passed | failed | skipped | passed (cg) | failed (cg) | skipped (cg) "
             "| pass native, fail cg | native s | cg s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    regressions = []
    totals = collections.Counter()
    for module, (native, patched) in runs.items():
        lost = sorted(test for test, outcome in native.outcomes.items()
                      if outcome == "passed" and patched.outcomes.get(test) == "failed")
        missing = sorted(test for test, outcome in native.outcomes.items()
                         if outcome == "passed" and test not in patched.outcomes)
        regressions += [(module, test, patched.errors.get(test, "")) for test in lost]
        regressions += [(module, test, f"not run with customgrad: {patched.problem}")
                        for test in missing]
        row = [native.count("passed"), native.count("failed"), native.count("skipped"),
               patched.count("passed"), patched.count("failed"), patched.count("skipped"),
               len(lost) + len(missing)]
        totals.update(dict(zip(range(7), row)))
        slow = " (slow)" if native.seconds > SLOW_NATIVE_S else ""
        note = f" ({patched.problem})" if patched.problem else ""
        lines.append(f"| {module}{note} | " + " | ".join(map(str, row))
                     + f" | {native.seconds:.0f}{slow} | {patched.seconds:.0f} |")
    lines.append("| **total** | " + " | ".join(f"**{totals[i]}**" for i in range(7)) + " | | |")
    if dropped:
        lines += ["", "## Dropped (cannot be collected or run natively)", ""]
        lines += [f"- {module}: {why}" for module, why in dropped.items()]
    lines += ["", f"## Pass natively, fail with customgrad ({len(regressions)})", ""]
    by_error = collections.Counter(error for _, _, error in regressions)
    if by_error:
        lines += ["By error (most common first):", ""]
        lines += [f"- {count} x `{error}`" for error, count in by_error.most_common()]
        lines += ["", "Each test:", ""]
    lines += [f"- {module}: `{test}`: {error}" for module, test, error in regressions]
    return "\n".join(lines) + "\n", len(regressions)


def parse(argv=None):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tfp-source", required=True, help="TFP source checkout (its tests)")
    parser.add_argument("--modules", default=",".join(DEFAULT_MODULES),
                        help="comma-separated test modules under tensorflow_probability/python, "
                             "e.g. math/bessel_test,distributions/gamma_test "
                             f"(default: all {len(DEFAULT_MODULES)})")
    parser.add_argument("--jobs", type=int, default=2, help="pytest processes at once (2)")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra-op threads per process (1)")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("-k", help="pytest -k expression, applied to every module")
    parser.add_argument("--sample", type=int, default=1,
                        help="run every N-th collected test of each module (1: all)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per pytest run (3600)")
    parser.add_argument("--logs", help="folder for each run's pytest output (default: a "
                                       "temporary folder, printed)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Runs every module in both modes, prints (and writes) the report; the exit status."""
    options = parse(argv)
    source = source_root(options.tfp_source)
    modules = [module_name(m) for m in options.modules.split(",") if m.strip()]
    work = tempfile.mkdtemp(prefix="tfp_suite_")
    options.logs = options.logs or tempfile.mkdtemp(prefix="tfp_suite_logs_")
    os.makedirs(options.logs, exist_ok=True)
    print(f"tfp_suite: {len(modules)} modules from {source}; logs in {options.logs}", flush=True)
    dropped = prepare(modules, source, work)
    tasks = [Run(module, mode) for module in modules if module not in dropped for mode in MODES]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
        futures = [pool.submit(run_module, task, source, work, options) for task in tasks]
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            print(f"  {run.module} [{run.mode}]: {run.count('passed')} passed, "
                  f"{run.count('failed')} failed, {run.count('skipped')} skipped in "
                  f"{run.seconds:.0f} s{'; ' + run.problem if run.problem else ''}", flush=True)
    wall = time.monotonic() - start
    runs = {}
    for module in modules:
        if module in dropped:
            continue
        native, patched = (task for task in tasks if task.module == module)
        if native.problem or not native.outcomes:
            dropped[module] = native.problem or f"no tests ran natively (see {native.log})"
        else:
            runs[module] = (native, patched)
    report, regressions = markdown(runs, dropped, options, wall)
    print(report)
    if options.out:
        with open(options.out, "w") as out:
            out.write(report)
    shutil.rmtree(work)
    incomplete = any(patched.problem for _, patched in runs.values())
    return 1 if regressions else 2 if incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
