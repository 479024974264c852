"""The examples in the docstrings run (doctest), on every backend with autodiff. The modules are
found, not listed: every module of the Python package, and of the R package's Python bridge
(inst/python), whose source has a `>>>` example."""

import doctest
import importlib
from pathlib import Path

import pytest
from helpers import require

from customgrad.backends import AUTODIFF

ROOT = Path(__file__).resolve().parents[2]
# where modules are imported from -> the folder searched below it
SOURCES = {ROOT / "python": ROOT / "python" / "customgrad",
           ROOT / "inst" / "python": ROOT / "inst" / "python"}


def modules_with_examples() -> list:
    found = []
    for import_root, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            if ">>> " in path.read_text():
                parts = path.relative_to(import_root).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                found.append(pytest.param(import_root, name, id=name))
    return found


MODULES = modules_with_examples()


def test_the_examples_are_found():
    names = {p.values[1] for p in MODULES}
    assert {"customgrad", "customgrad._core", "customgrad.ops", "customgrad._forward",
            "customgrad_bridge"} <= names


@pytest.mark.autodiff
@pytest.mark.parametrize("import_root,name", MODULES)
def test_docstring_examples_run(import_root, name, monkeypatch):
    backend = name.split(".")[2] if name.startswith("customgrad.backends.") else None
    if backend in AUTODIFF:
        require(backend)  # a backend's own modules import its framework
    monkeypatch.syspath_prepend(str(import_root))
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no runnable example"
