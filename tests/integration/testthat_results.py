"""What one backend's testthat run reported, judged the same way wherever it ran: by
scripts/run_r_tests.R (test_r_package.py, on the backends R CMD check does not run) or under
`R CMD check` with Python (test_r_check.py, on CHECK_BACKEND: that run is the backend's testthat
run, so the suite runs once per backend).

Both write testthat's JUnit XML (JunitReporter: one testcase per expectation); with
CUSTOMGRAD_JUNIT_DIR set (scripts/run_tests.py sets it) it is copied there as r-<backend>.xml for
the closing total of scripts/summarize_junit.py.
"""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

# the backend whose testthat run is the one inside R CMD check (it skips nothing there: on torch
# the trace-only test has nothing to test)
CHECK_BACKEND = "jax"


def tests_of(path: Path) -> list:
    """One row per R test: its file, name, status (failed/error over skipped over passed) and
    first message."""
    tests: dict = {}
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            key = (suite.get("name", ""), case.get("name", ""))
            row = tests.setdefault(key, {"file": key[0], "test": key[1], "status": "passed",
                                         "message": ""})
            for tag, status in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
                found = case.find(tag)
                if found is None:
                    continue
                if row["status"] not in ("failed", "error") and (
                        status != "skipped" or row["status"] == "passed"):
                    row["status"], row["message"] = status, found.get("message", "")
    return list(tests.values())


def check(path: Path, backend: str) -> list:
    """Asserts that the run in `path` (JUnit XML) passed on `backend`: no R test failed, most ran
    (skips are printed with their reasons); copies the file for the closing total. Its rows."""
    if os.environ.get("CUSTOMGRAD_JUNIT_DIR"):
        shutil.copy(path, Path(os.environ["CUSTOMGRAD_JUNIT_DIR"]) / f"r-{backend}.xml")
    rows = tests_of(path)
    bad = [r for r in rows if r["status"] in ("failed", "error")]
    skipped = [r for r in rows if r["status"] == "skipped"]
    for r in skipped:
        print(f"R test skipped on {backend}: {r['file']}: {r['test']}: {r['message']}")
    assert not bad, f"{len(bad)} R test(s) failed on {backend}:\n" + "\n".join(
        f"  {r['file']}: {r['test']} [{r['status']}]: {r['message']}" for r in bad)
    assert len(rows) >= 30, f"only {len(rows)} R tests ran on {backend}"
    assert len(skipped) < len(rows) // 2, f"most R tests were skipped on {backend}"
    return rows
