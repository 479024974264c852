"""The examples in the docstrings run (doctest), on every backend with autodiff."""

import doctest
import importlib

import pytest

MODULES = ["customgrad._core", "customgrad._call", "customgrad._messages", "customgrad._spec", "customgrad.ops", "customgrad.layers", "customgrad._autodiff", "customgrad._checker", "customgrad._tree",
           "customgrad._convention", "customgrad._variables", "customgrad._remat",
           "customgrad._patch_keras", "customgrad"]


@pytest.mark.autodiff
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name != "customgrad":
        assert result.attempted > 0, f"{name} has no runnable example"
