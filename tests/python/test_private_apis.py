"""Every private framework API customgrad reaches into still exists (customgrad/_private_apis.py
lists them, with why): a framework release that moves one fails here, by name."""

import pytest

from customgrad._private_apis import PRIVATE_APIS, installed, resolve, version


@pytest.mark.parametrize("api", PRIVATE_APIS, ids=lambda a: f"{a.module}.{a.attribute}")
def test_private_api_is_where_customgrad_expects_it(api):
    if not installed(api.framework):
        pytest.skip(f"{api.framework} is not importable here (a one-backend install, or "
                    "reticulate's rpytools outside an R session)")
    try:
        resolve(api)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{api.module}:{api.attribute} is gone in {api.framework} "
                    f"{version(api.framework)} ({error}); customgrad needs it because "
                    f"it {api.why}.")


def test_the_framework_version_is_read_whichever_distribution_installed_it():
    """The project venv has tensorflow from the `tensorflow-cpu` distribution, where looking the
    version up as the distribution `tensorflow` fails: the message must still name a version."""
    import re

    frameworks = [f for f in sorted({api.framework for api in PRIVATE_APIS}) if installed(f)]
    assert "keras" in frameworks
    for framework in frameworks:
        assert re.match(r"\d+\.\d+", version(framework)), (framework, version(framework))


def test_the_list_covers_the_private_imports_of_the_package():
    """Every `from <private module> import ...` in the package is in the list."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "python" / "customgrad"
    listed = {(a.module, a.attribute.split(".")[0]) for a in PRIVATE_APIS}
    # torch._C's submodules are listed from `torch` (they cannot be imported by name)
    listed |= {(f"torch.{'.'.join(a.attribute.split('.')[:-1])}", a.attribute.split(".")[-1])
               for a in PRIVATE_APIS if a.module == "torch"}
    private = re.compile(r"^\s*from ((?:keras\.src|tensorflow\.python|torch\._|jax\._src)[\w.]*) "
                         r"import (.+?)(?:#.*)?$", re.M)
    missing = []
    for path in root.rglob("*.py"):
        for module, names in private.findall(path.read_text()):
            for name in (n.split(" as ")[0].strip() for n in names.split(",")):
                if (module, name) not in listed and not any(
                        f"{module}.{name}" == a.module for a in PRIVATE_APIS):
                    missing.append(f"{path.name}: from {module} import {name}")
    assert not missing, missing
