"""Adds up JUnit XML files into one closing line: the pytest runs' (one testcase per test) and the
R suites' (testthat's JunitReporter, one testcase per expectation)."""
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for path in sys.argv[1:]:
    root = ET.parse(path).getroot()
    for suite in root.iter("testsuite"):
        tests = int(suite.get("tests", 0))
        bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skip = int(suite.get("skipped", 0))
        failed += bad
        skipped += skip
        passed += tests - bad - skip
print(f"customgrad: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
