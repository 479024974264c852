"""The test command's tiers (scripts/run_tests.py): slow tests skip only when asked, every file of
tests/integration is in exactly one tier, each backend's testthat suite runs once, and the closing
summary counts tests and lists the slowest."""

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_TESTS = runpy.run_path(str(ROOT / "scripts" / "run_tests.py"), run_name="run_tests")
SUMMARY = runpy.run_path(str(ROOT / "scripts" / "summarize_junit.py"), run_name="summary")
SLOW_TEST = "tests/python/test_remat.py::test_gradients_are_those_of_f_itself"


def _pytest(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KERAS_BACKEND": "jax", **env})


def test_a_slow_test_skips_with_its_reason_only_when_asked():
    asked = _pytest(SLOW_TEST, CUSTOMGRAD_SKIP_SLOW="1")
    assert re.search(r"\b2 skipped\b", asked.stdout), asked.stdout[-2000:]
    assert "slow (over ~5 s): CUSTOMGRAD_SKIP_SLOW is set" in asked.stdout, asked.stdout[-2000:]
    default = _pytest(SLOW_TEST, CUSTOMGRAD_SKIP_SLOW="")
    assert re.search(r"\b2 passed\b", default.stdout), default.stdout[-2000:]


def test_check_skips_the_slow_tests_and_the_other_tiers_run_them():
    (python_job,) = [j for j in RUN_TESTS["jobs_of"]("check", "torch") if j.name == "python-torch"]
    assert python_job.env == {"KERAS_BACKEND": "torch", "CUSTOMGRAD_SKIP_SLOW": "1"}
    for job in RUN_TESTS["jobs_of"]("all", "jax"):
        assert "CUSTOMGRAD_SKIP_SLOW" not in job.env, job.name


def test_every_integration_file_is_in_one_tier():
    files = {p.name for p in (ROOT / "tests" / "integration").glob("test_*.py")}
    r_files, program_files = set(RUN_TESTS["R_FILES"]), set(RUN_TESTS["PROGRAM_FILES"])
    assert r_files | program_files <= files, (r_files | program_files) - files
    assert not r_files & program_files

    def named(job):
        return {Path(a).name for a in job.args if a.startswith("tests/integration/")}

    rest, programs = RUN_TESTS["jobs_of"]("integration", "jax")
    ignored = {Path(a.split("=", 1)[1]).name for a in rest.args if a.startswith("--ignore=")}
    assert "tests/integration" in rest.args and ignored == r_files | program_files
    assert named(programs) == program_files
    assert set().union(*map(named, RUN_TESTS["jobs_of"]("r", "jax"))) == r_files


def test_each_backend_runs_the_testthat_suite_once():
    """R CMD check with Python is CHECK_BACKEND's testthat run; test_r_package.py runs the
    others."""
    check_backend = runpy.run_path(str(ROOT / "tests" / "integration" / "testthat_results.py"))[
        "CHECK_BACKEND"]
    proc = _pytest("--collect-only", "tests/integration/test_r_package.py")
    suites = re.findall(r"test_r_testthat_suite\[(\w+)\]", proc.stdout)
    autodiff = runpy.run_path(str(ROOT / "python" / "customgrad" / "_backend_names.py"))["AUTODIFF"]
    assert sorted(suites + [check_backend]) == sorted(autodiff), proc.stdout[-2000:]
    assert "CUSTOMGRAD_TESTTHAT_JUNIT" in (ROOT / "tests" / "testthat.R").read_text()


def test_the_summary_counts_tests_and_lists_the_slowest(tmp_path, capsys):
    pytest_xml = tmp_path / "python-jax.xml"
    pytest_xml.write_text(
        '<testsuites><testsuite name="python-jax">'
        '<testcase classname="tests.python.test_a" name="test_fast" time="0.5"/>'
        '<testcase classname="tests.python.test_a" name="test_slow" time="9.0"/>'
        '<testcase classname="tests.python.test_a" name="test_skipped" time="0.0">'
        '<skipped message="only on torch"/></testcase>'
        '</testsuite></testsuites>')
    # testthat: one testcase per expectation, the test's time their sum; one failed expectation
    # fails the test
    r_xml = tmp_path / "r-torch.xml"
    r_xml.write_text(
        '<testsuites><testsuite name="errors">'
        '<testcase classname="errors" name="ends_at_the_call" time="4.0"/>'
        '<testcase classname="errors" name="ends_at_the_call" time="6.0">'
        '<failure message="not equal"/></testcase>'
        '</testsuite></testsuites>')
    status, seconds = SUMMARY["read"]([str(pytest_xml), str(r_xml)])
    SUMMARY["print_slowest"](seconds, 2)
    assert SUMMARY["print_total"](status) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["The 2 slowest tests:",
                     "     10.0 s  errors: errors::ends_at_the_call",
                     "      9.0 s  python-jax: tests.python.test_a::test_slow",
                     "customgrad: 2 passed, 1 failed, 1 skipped"], lines
