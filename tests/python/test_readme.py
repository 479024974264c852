"""The README's code runs. Its Python blocks run here, on each backend with autodiff, and give
what their comments claim; its R block runs in tests/integration/test_r_package.py; its shell
lines are what the tests and CI run (`make ...`, `scripts/ship_python.sh`), and the pip extra it
names is checked here against pyproject.toml and requirements.txt."""

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
    for code in found:
        namespace = {}
        exec(compile(code, "README.md", "exec"), namespace)
    # the value the log1pexp block's comment claims
    gradient = namespace["customgrad"].grad(namespace["log1pexp"])(keras.ops.convert_to_tensor(100.0))
    assert float(gradient) == 1.0


def test_readme_pip_extras_are_pinned_as_tested():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = set(re.findall(r"^(\S+==\S+)", (ROOT / "requirements.txt").read_text(), flags=re.M))
    named = re.findall(r'pip install "\.\[(\w+)\]"', "".join(blocks("sh")))
    assert named, "the README names no pip extra"
    for name in named + ["jax", "tensorflow", "torch"]:
        assert extras[name] and set(extras[name]) <= pins, (name, extras[name])
    assert set(extras["all"]) == set(extras["jax"] + extras["tensorflow"] + extras["torch"])
