"""Adds up JUnit XML files into one closing line, counting tests, not expectations, and lists the
slowest tests.

    python scripts/summarize_junit.py OUT/*.xml

pytest writes one testcase per test; testthat's JunitReporter one per expectation, each named after
its test_that() block. So a test here is a distinct (file, suite, class, name): it failed if any of
its testcases failed or errored, else it was skipped if one was skipped, else it passed; its time
is the sum of its testcases' times.
"""
import sys
import xml.etree.ElementTree as ET

WORST_FIRST = ("failed", "skipped", "passed")


def read(paths: list) -> tuple[dict, dict]:
    """({test: "failed" | "skipped" | "passed"}, {test: seconds}) over the JUnit files `paths`;
    a test is (file, suite, class, name)."""
    status, seconds = {}, {}
    for path in paths:
        for suite in ET.parse(path).getroot().iter("testsuite"):
            for case in suite.iter("testcase"):
                key = (path, suite.get("name", ""), case.get("classname", ""), case.get("name", ""))
                if case.find("failure") is not None or case.find("error") is not None:
                    now = "failed"
                elif case.find("skipped") is not None:
                    now = "skipped"
                else:
                    now = "passed"
                status[key] = min(status.get(key, "passed"), now, key=WORST_FIRST.index)
                seconds[key] = seconds.get(key, 0.0) + float(case.get("time") or 0)
    return status, seconds


def print_slowest(seconds: dict, count: int) -> None:
    print(f"The {count} slowest tests:")
    for (_, suite, classname, name), took in sorted(seconds.items(), key=lambda kv: -kv[1])[:count]:
        print(f"  {took:7.1f} s  {suite}: {classname}::{name}")


def print_total(status: dict) -> int:
    """Prints the closing line; 1 when a test failed or none passed, else 0."""
    counts = {s: sum(1 for v in status.values() if v == s) for s in WORST_FIRST}
    print(f"customgrad: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    return 1 if counts["failed"] or counts["passed"] == 0 else 0


if __name__ == "__main__":
    status, seconds = read(sys.argv[1:])
    print_slowest(seconds, 15)
    sys.exit(print_total(status))
