"""Four clients' own tests (larq, tensorflow-model-optimization, tf-models-official, gpflow),
natively and with customgrad in place of `tf.custom_gradient`, compared test by test.

    .venv/bin/python tests/clients/clients_suite.py [--clients larq,gpflow] [--source NAME=DIR]
        [--jobs N] [--timeout S] [--sample N] [-k EXPR] [--logs DIR] [--out report.md]

The clients are the INSTALLED ones (tests/clients/clients-requirements.txt, `make clients`); only
their test modules come from their source, which is downloaded unless `--source NAME=DIR` names a
folder holding it (an unpacked sdist or a checkout at the same version):

* larq, gpflow: the sdist, `pip download --no-binary :all: --no-deps NAME==VERSION` (their wheels
  ship no tests, or not all).
* tf-models-official: its wheel (`pip download --only-binary :all: --no-deps`), which ships the
  tests; its sdist has no setup.py and pip cannot download it as a source.
* tensorflow-model-optimization: no sdist on PyPI: GitHub's tag tarball
  (https://github.com/tensorflow/model-optimization/archive/refs/tags/v0.8.1.tar.gz); offline,
  `--source tfmot=DIR` with `git archive v0.8.1` of a clone.

Each client's test modules are copied into a folder of their own (with an empty pytest.ini, so no
project configuration applies) and run by pytest twice, each in its own process: natively and
with `customgrad.patch_tensorflow()` applied before the client is imported. This file is also the
pytest plugin both processes load (`-p clients_suite`): it patches in `pytest_load_initial_conftests`,
before a client's conftest.py imports the client, and loads the test libraries the wheel does not
ship from the source (tfp_plugin's SourceFallback). KERAS_BACKEND=tensorflow, TF_USE_LEGACY_KERAS=1
(the clients are Keras 2 code, on tf_keras). The exit status is 1 when a test passes natively and
fails with customgrad, 2 when a run could not complete, else 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tfp_plugin import SourceFallback, _put_customgrad_in_place  # noqa: E402
from tfp_plugin import pytest_collection_modifyitems  # noqa: E402,F401  (--sample: a hook here too)
from tfp_suite import MODES, Run, read_junit, run_pytest  # noqa: E402

TFMOT_TARBALL = "https://github.com/tensorflow/model-optimization/archive/refs/tags/v{}.tar.gz"
# name: (distribution, version, how its source comes, the importable package, test modules under
# the source root (a `::Class` keeps one class), support files copied beside them)
CLIENTS = {
    "larq": ("larq", "0.14.0", "sdist", "larq", ["larq/*_test.py"], ["larq/conftest.py"]),
    "tfmot": ("tensorflow-model-optimization", "0.8.1", "github", "tensorflow_model_optimization",
              ["tensorflow_model_optimization/python/core/clustering/keras/*_test.py",
               "tensorflow_model_optimization/python/core/quantization/keras/collab_opts/"
               "cluster_preserve/*_test.py"], []),
    "tf-models-official": ("tf-models-official", "2.20.0", "wheel", "official",
                           ["official/projects/yolo/losses/yolo_loss_test.py",
                            "official/nlp/modeling/models/t5_test.py",
                            "official/projects/bigbird/encoder_test.py",
                            "official/vision/modeling/layers/nn_blocks_test.py"
                            "::ReversibleLayerTest"], []),
    "gpflow": ("gpflow", "2.11.2", "sdist", "gpflow", ["tests/gpflow/optimizers/test_mcmc.py"],
               ["tests/gpflow/conftest.py"]),
}
MODE = os.environ.get("CUSTOMGRAD_CLIENTS_MODE", "")  # set in the pytest processes only


# --- the plugin (in the pytest processes) ---

def pytest_load_initial_conftests(early_config, parser, args):
    """Patches (customgrad mode) before any conftest.py, hence before the client, is imported;
    puts the source's test libraries behind the installed client."""
    package = os.environ["CUSTOMGRAD_CLIENTS_PACKAGE"]
    if package in sys.modules:
        raise RuntimeError(f"{package} was imported before the plugin could patch")
    if MODE == "customgrad":
        _put_customgrad_in_place()
    sys.meta_path.append(SourceFallback(os.environ["CUSTOMGRAD_CLIENTS_SOURCE"], package))


def pytest_configure(config):
    """Marks absl's flags parsed (tf.test and absl's parameterized tests read them)."""
    if MODE:
        from absl import flags

        flags.FLAGS.mark_as_parsed()


def pytest_terminal_summary(terminalreporter):
    """The mode and which tf.custom_gradient the run had."""
    if MODE:
        import tensorflow as tf

        terminalreporter.write_line(f"clients_suite: mode {MODE}; tf.custom_gradient from "
                                    f"{getattr(tf.custom_gradient, '__module__', '?')}")


# --- the runner ---

def fetch_source(name: str, work: str) -> str:
    """Downloads and unpacks `name`'s source into `work`; the folder holding its test paths."""
    dist, version, kind, *_ = CLIENTS[name]
    target = os.path.join(work, "download", name)
    os.makedirs(target)
    if kind == "github":
        archive = os.path.join(target, f"v{version}.tar.gz")
        urllib.request.urlretrieve(TFMOT_TARBALL.format(version), archive)
    else:
        binary = ["--no-binary", ":all:"] if kind == "sdist" else ["--only-binary", ":all:"]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--no-deps", *binary, f"{dist}=={version}", "-d", target], check=True)
        archive = glob.glob(os.path.join(target, "*"))[0]
    unpacked = os.path.join(target, "src")
    if archive.endswith(".whl"):
        zipfile.ZipFile(archive).extractall(unpacked)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
    return source_root(name, unpacked)


def source_root(name: str, folder: str) -> str:
    """`folder` or its only subfolder: the one where the client's first test path is found."""
    pattern = CLIENTS[name][4][0].split("::")[0]
    for root in [folder] + sorted(glob.glob(os.path.join(folder, "*", ""))):
        if glob.glob(os.path.join(root, pattern)):
            return os.path.abspath(root)
    raise SystemExit(f"{name}: no {pattern} under {folder}")


def prepare(name: str, source: str, work: str) -> tuple[str, list[str]]:
    """Copies the client's test modules (flat: their names are unique) and support files into a
    folder; returns it and the pytest arguments naming the tests."""
    folder = os.path.join(work, name)
    os.makedirs(folder)
    targets = []
    for pattern in CLIENTS[name][4]:
        pattern, _, selection = pattern.partition("::")
        for path in sorted(glob.glob(os.path.join(source, pattern))):
            shutil.copy(path, folder)
            targets.append(os.path.basename(path) + (f"::{selection}" if selection else ""))
    for path in CLIENTS[name][5]:
        shutil.copy(os.path.join(source, path), folder)
    with open(os.path.join(folder, "pytest.ini"), "w") as ini:
        ini.write("[pytest]\n")
    return folder, targets


def run_client(run: Run, source: str, folder: str, targets: list[str], options) -> Run:
    """Runs one client's tests in one mode in its own pytest process and reads its result."""
    junit = os.path.join(folder, f"{run.mode}.xml")
    run.log = os.path.join(options.logs, f"{run.module}.{run.mode}.log")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_USE_LEGACY_KERAS="1",
               CUSTOMGRAD_CLIENTS_MODE=run.mode, CUSTOMGRAD_CLIENTS_SOURCE=source,
               CUSTOMGRAD_CLIENTS_PACKAGE=CLIENTS[run.module][3],
               CUSTOMGRAD_TFP_SAMPLE=str(options.sample), TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "pytest", *targets, "-p", "clients_suite",
               "-p", "no:cacheprovider", "-q", "-rN", "--tb=short", f"--junitxml={junit}",
               "-c", os.path.join(folder, "pytest.ini"), "--rootdir", folder]
    command += ["-k", options.k] if options.k else []
    run_pytest(command, run, folder, env, options.timeout)
    if os.path.exists(junit):
        read_junit(junit, run)
    if not run.problem and run.returncode not in (0, 1):
        run.problem = f"pytest exited with {run.returncode} (see {run.log})"
    return run


def report(runs: dict) -> tuple[str, int]:
    """The table (markdown) and each test that passes natively and not with customgrad."""
    lines = ["| client | tests | native pass/fail | customgrad pass/fail | only with customgrad "
             "| native s | cg s |", "|---|---|---|---|---|---|---|"]
    lost = []
    for name, (native, patched) in runs.items():
        mine = sorted(test for test, outcome in native.outcomes.items() if outcome == "passed"
                      and patched.outcomes.get(test) != "passed"
                      and patched.outcomes.get(test) != "skipped")
        lost += [(name, test, patched.errors.get(test) or patched.problem or "not run")
                 for test in mine]
        tests = len(set(native.outcomes) | set(patched.outcomes))
        note = "; ".join(f"{run.mode}: {run.problem}" for run in (native, patched) if run.problem)
        lines.append(f"| {name}{f' ({note})' if note else ''} | {tests} "
                     f"| {native.count('passed')}/{native.count('failed')} "
                     f"| {patched.count('passed')}/{patched.count('failed')} | {len(mine)} "
                     f"| {native.seconds:.0f} | {patched.seconds:.0f} |")
    lines += ["", f"Pass natively, fail with customgrad: {len(lost)}"]
    lines += [f"- {name}: `{test}`: {error}" for name, test, error in lost]
    return "\n".join(lines) + "\n", len(lost)


def parse(argv=None):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help=f"comma-separated, of {', '.join(CLIENTS)} (default: all)")
    parser.add_argument("--source", action="append", default=[], metavar="NAME=DIR",
                        help="take NAME's source from DIR instead of downloading it")
    parser.add_argument("--jobs", type=int, default=2, help="pytest processes at once (2)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per pytest run (1800)")
    parser.add_argument("--sample", type=int, default=1,
                        help="run every N-th collected test of each client (1: all)")
    parser.add_argument("-k", help="pytest -k expression, applied to every client")
    parser.add_argument("--logs", help="folder for each run's pytest output (default: temporary)")
    parser.add_argument("--out", help="also write the report to this file")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Runs every client in both modes, prints the table; the exit status."""
    options = parse(argv)
    names = [name.strip() for name in options.clients.split(",") if name.strip()]
    unknown = set(names) - set(CLIENTS)
    if unknown:
        raise SystemExit(f"--clients: unknown {sorted(unknown)}; known: {sorted(CLIENTS)}")
    given = dict(item.split("=", 1) for item in options.source)
    work = tempfile.mkdtemp(prefix="clients_suite_")
    options.logs = options.logs or tempfile.mkdtemp(prefix="clients_suite_logs_")
    os.makedirs(options.logs, exist_ok=True)
    print(f"clients_suite: {', '.join(names)}; logs in {options.logs}", flush=True)
    prepared = {}
    for name in names:
        source = source_root(name, given[name]) if name in given else fetch_source(name, work)
        prepared[name] = (source, *prepare(name, source, work))
    tasks = [Run(name, mode) for name in names for mode in MODES]
    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
        futures = [pool.submit(run_client, task, *prepared[task.module], options) for task in tasks]
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            print(f"  {run.module} [{run.mode}]: {run.count('passed')} passed, "
                  f"{run.count('failed')} failed, {run.count('skipped')} skipped in "
                  f"{run.seconds:.0f} s{'; ' + run.problem if run.problem else ''}", flush=True)
    runs = {name: tuple(task for task in tasks if task.module == name) for name in names}
    text, lost = report(runs)
    print(text)
    if options.out:
        with open(options.out, "w") as out:
            out.write(text)
    shutil.rmtree(work)
    return 1 if lost else 2 if any(run.problem for run in tasks) else 0


if __name__ == "__main__":
    sys.exit(main())
