"""Every backend module meets the contract written in customgrad/backends/_contract.py, and the
one list of backends is the one everything reads."""

import importlib
import inspect
import re
from pathlib import Path

import pytest
from helpers import require

from customgrad import backends
from customgrad.backends import _contract

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", backends.NAMES)
def test_backend_module_meets_the_contract(name):
    if name != "numpy":  # numpy is always there: keras needs it
        require(name)
    module = importlib.import_module(f"customgrad.backends.{name}")
    assert _contract.check(module) == []
    assert module.HAS_AUTODIFF == (name in backends.AUTODIFF)


def test_tensorflow_meets_the_tf_variables_opt_in():
    require("tensorflow")
    from customgrad.backends import tensorflow

    declared = _contract._members(_contract.TFVariablesOptIn)
    for name, function in declared.items():
        expected = list(inspect.signature(function).parameters)[1:]
        assert list(inspect.signature(getattr(tensorflow, name)).parameters) == expected


def test_the_check_names_what_is_missing_or_mistyped():
    class Incomplete:  # a module-like object: constants, and one function of the wrong shape
        HAS_AUTODIFF, HAS_FAST_PATH, FORWARD_MODE_OPT_IN = True, "yes", False

        @staticmethod
        def tensor_value(leaf, extra):
            return leaf

    problems = _contract.check(Incomplete)
    assert "HAS_FAST_PATH must be True or False; it is 'yes'" in problems
    assert "tensor_value('leaf', 'extra') should take ('leaf',)" in problems
    assert "vjp_flat is missing (required by Autodiff)" in problems
    assert "call is missing (required by Backend)" in problems


def test_the_core_uses_only_names_the_contract_declares():
    """Every `backend.<name>` / `B.<name>` the core reads is declared in the contract."""
    declared = set()
    for protocol in (_contract.Backend, _contract.Autodiff, _contract.FastPath,
                     _contract.ForwardModeOptIn, _contract.TFVariablesOptIn):
        declared |= set(_contract._members(protocol)) | set(inspect.get_annotations(protocol))
    used = set()
    for path in (ROOT / "python" / "customgrad").glob("*.py"):
        used |= set(re.findall(r"\b(?:B|backend|self\.B|self\.backend)\.([A-Za-z_]+)\b",
                               path.read_text()))
    # keras.backend.<...>, and keras.src.backend.core (which patch_keras patches)
    used -= {"backend", "common", "standardize_dtype", "float", "floatx", "core"}
    assert used - {"__name__"} <= declared, used - declared


def test_backend_lists_agree_with_the_one_list():
    """Where a list of backends must be spelled out (R's match.arg choices), it is the same."""
    install_r = (ROOT / "R" / "install.R").read_text()
    choices = re.search(r'install_customgrad <- function\(backend = c\(([^)]*)\)', install_r)
    assert choices, "install_customgrad's backend choices not found in R/install.R"
    assert tuple(re.findall(r'"(\w+)"', choices.group(1))) == backends.AUTODIFF


def test_no_circle_between_the_core_and_the_backends():
    """The entry point (_core) loads the backends; a backend imports only the core's leaf modules
    (never _core), and the per-call modules (_call, _returns) load no backend."""
    package = ROOT / "python" / "customgrad"
    for name in backends.NAMES:
        backend = package / "backends" / name  # a module, or a package of modules
        paths = [backend.with_suffix(".py")] if backend.with_suffix(".py").exists() \
            else sorted(backend.glob("*.py"))
        source = "\n".join(path.read_text() for path in paths)
        imported = set()
        for module, names in re.findall(r"^from \.+(\w*) import ([^\n(]+)", source, flags=re.M):
            imported |= {module} if module else {n.split()[0] for n in names.split(",")}
        assert "_core" not in imported, name
    for per_call in ("_call.py", "_returns.py"):
        source = (package / per_call).read_text()
        assert not re.search(r"import_module|backends\.(?:" + "|".join(backends.NAMES) + r")\b",
                             source), per_call


def test_the_contract_names_the_core_modules_the_backends_import():
    """The contract's docstring lists the core's leaf modules a backend may import: exactly the
    ones the backends import (a list that once named a module no backend imported)."""
    package = ROOT / "python" / "customgrad"
    source = "\n".join(p.read_text() for p in (package / "backends").rglob("*.py"))
    imported = set(re.findall(r"^from \.\.\.(_\w+) import", source, flags=re.M))
    imported |= {name for names in re.findall(r"^from \.\.\. import ([^\n#]+)", source, flags=re.M)
                 for name in re.findall(r"\b(_\w+)\b", names)}
    listed = re.search(r"leaf modules \(([^)]*)\)", " ".join(_contract.__doc__.split()))
    assert listed, "the contract's docstring no longer lists the leaf modules"
    assert set(re.findall(r"`(_\w+)`", listed.group(1))) == imported
