"""The examples in the docstrings run (doctest), on every backend with autodiff. The modules are
found, not listed: every module of the package whose source has a `>>>` example."""

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "customgrad"


def modules_with_examples() -> list:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in path.read_text():
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_the_examples_are_found():
    assert {"customgrad", "customgrad._core", "customgrad.ops", "customgrad._forward"} <= set(MODULES)


@pytest.mark.autodiff
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no runnable example"
