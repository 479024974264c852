import os
import sys

import keras
import pytest

import customgrad.backends

sys.path.insert(0, os.path.dirname(__file__))

BACKEND = keras.backend.backend()
AUTODIFF = BACKEND in customgrad.backends.AUTODIFF


def pytest_report_header(config):
    return f"customgrad tests on Keras backend: {BACKEND}"


def pytest_collection_modifyitems(config, items):
    # Tests marked `autodiff` need gradients; the numpy backend has none (reason printed by -ra).
    no_autodiff = pytest.mark.skipif(
        not AUTODIFF, reason=f"the {BACKEND} backend has no autodiff (forward-only)")
    for item in items:
        if "autodiff" in item.keywords:
            item.add_marker(no_autodiff)


def pytest_configure(config):
    config.addinivalue_line("markers", "autodiff: needs a backend with gradients")
    config.addinivalue_line("markers", "backends(*names): run only on these backends")


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("backends")
    if marker is not None and BACKEND not in marker.args:
        pytest.skip(f"only on {', '.join(marker.args)}; this process runs {BACKEND}")
