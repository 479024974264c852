"""The Python release, tried as PyPI and a user would try it (RELEASING.md, "PyPI").

From a copy of the files git tracks or would track (so the checkout gets no build/ or dist/, and
nothing ignored travels), `python -m build` makes the sdist and the wheel (the wheel from the
sdist, in an isolated build environment, as a release does); then:

- `twine check --strict` passes on both;
- their metadata is what PyPI shows: `License-Expression: Apache-2.0` (not the license's text),
  real trove classifiers with the Python versions the version matrix tests, keywords, and the
  long description python/README.pypi.md as markdown, with no relative link;
- the wheel, installed alone with its `jax` extra in a fresh venv (no system site-packages, not
  this checkout), runs the long description's example and prints what its comment says.

Needs `build`, `twine` and `trove-classifiers` in this Python (requirements.txt), and pip able to
fetch the build backend and the jax stack (from its cache or an index); else it skips, saying why.
About a minute on 2 cores, most of it installing jax into the fresh venv.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import runpy
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import BytesParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
LONG_DESCRIPTION = ROOT / PROJECT["readme"]
# the one backend of the fresh venv, at the versions of the project's pinned stack (which pip has
# cached); the extra is what a user names: pip install "customgrad[jax]"
BACKEND = "jax"
STACK = ("jax", "jaxlib", "keras")
# --no-compile: byte-compiling jax's files would take longer than installing them
PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check", "--retries", "1",
       "--no-compile")


def _env(**extra: str) -> dict:
    """This environment without what would let the checkout or this venv leak into a subprocess,
    and without run_tests.sh's warning filter (the build's warnings are checked)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONWARNINGS")}
    return {**env, **extra}


def _run(cmd: list, cwd: Path, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def _tail(proc: subprocess.CompletedProcess, chars: int = 3000) -> str:
    return (proc.stdout + proc.stderr)[-chars:]


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def _links(markdown: str) -> list[str]:
    """Every link target of a markdown text: inline links and images, reference definitions,
    autolinks and HTML href/src attributes."""
    return (re.findall(r"\]\(\s*<?([^)\s>]+)", markdown)
            + re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", markdown, flags=re.M)
            + re.findall(r"<([a-z][a-z0-9+.-]*:[^>\s]+)>", markdown)
            + re.findall(r"""(?:href|src)\s*=\s*["']([^"']+)""", markdown))


def _copy_of_tracked_files(dest: Path) -> Path:
    """What git tracks or would track, copied to `dest` (files deleted in the working tree left
    out): the source a clean checkout of a tagged commit holds."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The sdist and the wheel `python -m build` makes from a copy of the tracked files, and the
    build's output: {"sdist", "wheel", "version", "source" (the copy), "log"}."""
    missing = [module for module in ("build", "twine", "trove_classifiers")
               if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed in {sys.executable} "
                    "(requirements.txt pins them; run `make setup`)")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the release builds from the files git tracks")
    work = tmp_path_factory.mktemp("release")
    # the isolated build installs the build backend; without a cache or an index it cannot
    backend = PYPROJECT["build-system"]["requires"]
    probe = _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                  "--retries", "1", "--no-deps", "-d", work / "probe", *backend], cwd=work)
    if probe.returncode != 0:
        pytest.skip(f"pip cannot fetch the build backend {backend} (no network or cache):\n"
                    f"{_tail(probe, 1000)}")
    source = _copy_of_tracked_files(work / "source")
    dist = work / "dist"
    proc = _run([sys.executable, "-m", "build", "--outdir", dist, source], cwd=work, timeout=600)
    assert proc.returncode == 0, f"python -m build failed:\n{_tail(proc)}"
    version = re.search(r'^__version__ = "(.+)"$',
                        (source / "python" / "customgrad" / "__init__.py").read_text(), re.M)[1]
    sdist = dist / f"customgrad-{version}.tar.gz"
    wheel = dist / f"customgrad-{version}-py3-none-any.whl"
    assert sorted(dist.iterdir()) == [wheel, sdist], sorted(p.name for p in dist.iterdir())
    return {"sdist": sdist, "wheel": wheel, "version": version, "source": source,
            "log": proc.stdout + proc.stderr}


def _wheel_metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return BytesParser().parsebytes(archive.read(name))


def _sdist_metadata(sdist: Path):
    with tarfile.open(sdist) as archive:
        (member,) = [m for m in archive.getmembers() if m.name.count("/") == 1
                     and m.name.endswith("/PKG-INFO")]
        return BytesParser().parsebytes(archive.extractfile(member).read())


def test_the_build_warns_of_nothing_deprecated(built):
    """setuptools warned on every build that `license` as a TOML table stops working in 2027."""
    found = [line for line in built["log"].splitlines() if re.search(r"deprecat", line, re.I)]
    assert not found, "\n".join(found)


def test_twine_check_strict_passes(built):
    proc = _run([sys.executable, "-m", "twine", "check", "--strict", built["sdist"],
                 built["wheel"]], cwd=built["sdist"].parent, timeout=120)
    assert proc.returncode == 0, _tail(proc)
    assert _tail(proc).count("PASSED") == 2, _tail(proc)


@pytest.mark.parametrize("artifact", ["wheel", "sdist"])
def test_the_metadata_is_what_pypi_should_show(built, artifact):
    """Both files are uploaded, and PyPI reads the metadata of each."""
    from trove_classifiers import classifiers as known

    meta = (_wheel_metadata if artifact == "wheel" else _sdist_metadata)(built[artifact])
    assert meta["Metadata-Version"] in ("2.4", "2.5"), meta["Metadata-Version"]
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License"] is None, "the License field holds the license's text again"
    assert meta.get_all("License-File") == ["LICENSE"]

    classifiers = meta.get_all("Classifier")
    assert classifiers == PROJECT["classifiers"]
    unknown = [c for c in classifiers if c not in known]
    assert not unknown, f"not trove classifiers (PyPI refuses the upload): {unknown}"
    assert not [c for c in classifiers if c.startswith("License ::")], "PEP 639: `license` only"
    # the Python versions claimed are those the version matrix tests
    cells = runpy.run_path(str(ROOT / "scripts" / "matrix.py"))["CELLS"]
    claimed = {c.rsplit(" :: ", 1)[1] for c in classifiers
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert claimed == {cell.python for cell in cells.values()}, claimed
    assert "Typing :: Typed" in classifiers
    assert meta["Keywords"].split(",") == PROJECT["keywords"]

    assert meta["Description-Content-Type"] == "text/markdown"
    description = meta.get_payload(decode=True).decode("utf-8")
    assert description.strip() == LONG_DESCRIPTION.read_text().strip()
    assert 'pip install "customgrad[jax]"' in description
    assert 'pip install ".[' not in description and "from a clone" not in description
    relative = [link for link in _links(description) if not link.startswith("https://")]
    assert not relative, f"links that resolve nowhere on PyPI: {relative}"


def test_the_wheel_holds_the_whole_package(built):
    """Every module of the package (as git tracks it), its py.typed and its license."""
    with zipfile.ZipFile(built["wheel"]) as archive:
        names = set(archive.namelist())
    package = built["source"] / "python"
    modules = {str(p.relative_to(package)) for p in (package / "customgrad").rglob("*.py")}
    assert modules, "no module under python/customgrad in the copy"
    assert modules <= names, sorted(modules - names)
    assert "customgrad/py.typed" in names
    assert f"customgrad-{built['version']}.dist-info/licenses/LICENSE" in names


def test_the_wheel_alone_runs_the_example(built, tmp_path):
    """A fresh venv, the wheel with its jax extra (the stack pinned at this venv's versions, which
    pip has cached), nothing of this checkout on the path: the example prints 1.0."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in STACK]
    stack = _run([python, *PIP, *pins], cwd=tmp_path, timeout=600)
    if stack.returncode != 0:
        pytest.skip(f"pip cannot install {' '.join(pins)} (no network or cache):\n"
                    f"{_tail(stack, 1000)}")
    install = _run([python, *PIP, f"{built['wheel']}[{BACKEND}]", *pins], cwd=tmp_path, timeout=600)
    assert install.returncode == 0, f"the wheel did not install:\n{_tail(install)}"
    check = _run([python, "-m", "pip", "check"], cwd=tmp_path, timeout=120)
    assert check.returncode == 0, _tail(check)

    (example,) = _python_blocks(LONG_DESCRIPTION.read_text())
    claim = re.search(r"^print\(.*\)\s+# (\S+) on ", example, flags=re.M)
    assert claim, "the example's print line no longer says what it prints"
    script = tmp_path / "example.py"
    script.write_text(example + "\nprint(customgrad.__file__)\n")
    # -I: no user site-packages, no current directory on the path
    run = _run([python, "-I", script], cwd=tmp_path, timeout=300, KERAS_BACKEND=BACKEND)
    assert run.returncode == 0, _tail(run)
    printed, location = run.stdout.splitlines()
    assert printed == claim[1]
    assert Path(location).is_relative_to(venv), f"customgrad came from {location}, not the wheel"


def test_the_long_description_keeps_the_readme_example_and_table():
    """PyPI's page and the README show the same example and the same supported versions."""
    readme = (ROOT / "README.md").read_text()
    long_description = LONG_DESCRIPTION.read_text()
    assert _python_blocks(long_description)[:1] == _python_blocks(readme)[:1]

    def table(markdown: str) -> list[str]:
        rows = re.findall(r"^\| (?:Python|keras|jax|torch|tensorflow)\b.*\|$", markdown, flags=re.M)
        assert rows, "no table of supported versions"
        return rows

    assert table(long_description) == table(readme)
