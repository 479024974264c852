"""The README's code runs. Its Python blocks run here, on each backend with autodiff, and give
what their comments claim; its R block runs in tests/integration/test_r_package.py; its shell
lines are what the tests and CI run (`make ...`, `scripts/ship_python.sh`), and the pip extra it
names is checked here against pyproject.toml and requirements.txt."""

import contextlib
import io
import re
import tomllib
from pathlib import Path

import keras
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


@pytest.mark.autodiff
def test_readme_python_examples_run():
    found = blocks("python")
    assert found, "the README has no Python example"
    printed = io.StringIO()
    for code in found:
        namespace = {}
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), namespace)
    # what the log1pexp block prints is what its comment says, on every backend
    assert "print(float(customgrad.grad(log1pexp)(x)))   # 1.0 on" in README
    assert printed.getvalue() == "1.0\n"
    gradient = namespace["customgrad"].grad(namespace["log1pexp"])(keras.ops.convert_to_tensor(100.0))
    assert float(gradient) == 1.0


def test_the_supported_range_holds_the_tested_versions():
    """pyproject's extras state each framework's supported range; the pinned stack of
    requirements.txt and every cell of the version matrix (scripts/matrix.py) lie inside it,
    and the README names only extras that exist."""
    import runpy

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ranges = {}
    extras = [r for group in project["optional-dependencies"].values() for r in group]
    for requirement in project["dependencies"] + extras:
        req = Requirement(requirement)
        if req.name != "customgrad" and str(req.specifier):
            ranges.setdefault(req.name, req.specifier)
    pins = re.findall(r"^(\S+)==(\S+)", (ROOT / "requirements.txt").read_text(), flags=re.M)
    cells = runpy.run_path(str(ROOT / "scripts" / "matrix.py"))["CELLS"]
    pins += [tuple(pin.split("==")) for cell in cells.values() for pin in cell.pins]
    tested = [(name, version.replace(".*", ".0")) for name, version in pins if name in ranges]
    assert {"keras", "jax", "torch", "tensorflow-cpu"} <= {name for name, _ in tested}
    for name, version in tested:
        assert version in ranges[name], (name, version, str(ranges[name]))
    named = re.findall(r'pip install "\.\[([\w-]+)\]"', "".join(blocks("sh")))
    assert named, "the README names no pip extra"
    assert set(named) <= set(project["optional-dependencies"]), named
