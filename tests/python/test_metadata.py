"""Package metadata: one version (python/customgrad/__init__.py) that the R package and the
installed distribution repeat, one licence, and the error class under its public name."""

import importlib.metadata
import re
from pathlib import Path

import pytest

import customgrad

ROOT = Path(__file__).resolve().parents[2]


def test_one_version_everywhere():
    description = (ROOT / "DESCRIPTION").read_text()
    (r_version,) = re.findall(r"^Version:\s*(\S+)$", description, flags=re.M)
    assert r_version == customgrad.__version__
    try:
        installed = importlib.metadata.version("customgrad")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("customgrad runs from its sources here (PYTHONPATH), not installed")
    assert installed == customgrad.__version__


def test_the_licence_the_metadata_names_is_there():
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Apache License (== 2.0)" in (ROOT / "DESCRIPTION").read_text()


def test_custom_gradient_error_prints_under_its_public_name():
    import traceback

    text = traceback.format_exception_only(customgrad.CustomGradientError("why"))
    assert text == ["customgrad.CustomGradientError: why\n"]
