import os
import sys

import pytest

import customgrad.backends

sys.path.insert(0, os.path.dirname(__file__))
from helpers import BACKEND, only_on_reason

AUTODIFF = BACKEND in customgrad.backends.AUTODIFF
# `make check` sets it: tests marked `slow` (over ~5 s in a full run's JUnit times) skip
SKIP_SLOW = os.environ.get("CUSTOMGRAD_SKIP_SLOW", "") not in ("", "0")


def pytest_report_header(config):
    return f"customgrad tests on Keras backend: {BACKEND}"


def pytest_collection_modifyitems(config, items):
    # Tests marked `autodiff` need gradients; the numpy backend has none (reason printed by -ra).
    no_autodiff = pytest.mark.skipif(
        not AUTODIFF, reason=f"the {BACKEND} backend has no autodiff (forward-only)")
    slow = pytest.mark.skipif(SKIP_SLOW, reason="slow (over ~5 s): CUSTOMGRAD_SKIP_SLOW is set "
                                                "(make check); make test runs it")
    for item in items:
        if "autodiff" in item.keywords:
            item.add_marker(no_autodiff)
        if "slow" in item.keywords:
            item.add_marker(slow)


def pytest_configure(config):
    config.addinivalue_line("markers", "autodiff: needs a backend with gradients")
    config.addinivalue_line("markers", "backends(*names): run only on these backends (the one "
                            "way to say it; a whole module: helpers.only_on)")
    config.addinivalue_line("markers", "slow: over ~5 s; skipped when CUSTOMGRAD_SKIP_SLOW is set")


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("backends")
    if marker is not None and BACKEND not in marker.args:
        pytest.skip(only_on_reason(marker.args))
