"""Lint and types, judged as a release would be.

ruff, configured in pyproject.toml's [tool.ruff], finds nothing in python/ and tests/. pyright,
configured in its [tool.pyright], finds no error in a typical user script of customgrad's API
(tests/typing/user_script.py) nor in the Python examples of the README and of the PyPI page, and
`pyright --verifytypes customgrad --ignoreexternal` finds at least 90 % of the public symbols
typed. Both tools are pinned in requirements.txt; pyright is basedpyright's build of it, whose
JavaScript and Node.js come in its wheels, so nothing is downloaded here. A missing tool skips,
saying so.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = [ROOT / "README.md", ROOT / "python" / "README.pypi.md"]
USER_SCRIPT = ROOT / "tests" / "typing" / "user_script.py"
MIN_COMPLETENESS = 0.90


def tool(name: str) -> str:
    """The executable `name` beside this Python (the project's venv), else on the PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pinned in requirements.txt, installed by "
                    f"scripts/setup.sh)")
    return found


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    # the venv's bin first: pyright finds the venv's Python (and customgrad in it) on the PATH
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, **kwargs)


def test_ruff_finds_nothing_in_python_and_tests():
    ruff = tool("ruff")
    result = run([ruff, "check", "--no-cache", "--output-format", "concise", "python", "tests"],
                 cwd=ROOT)
    print(run([ruff, "--version"]).stdout.strip(), "|", result.stdout.strip() or result.stderr)
    assert result.returncode == 0, f"ruff check python tests:\n{result.stdout}{result.stderr}"
    assert "All checks passed!" in result.stdout


def python_blocks(readme: Path) -> list:
    return re.findall(r"^```python\n(.*?)^```", readme.read_text(), flags=re.S | re.M)


def test_pyright_finds_no_error_in_the_user_script_and_the_readmes(tmp_path):
    pyright = tool("basedpyright")
    # the project's settings, on copies of the user script and of the READMEs' Python blocks
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({**settings, "include": ["."]}))
    shutil.copy(USER_SCRIPT, tmp_path / USER_SCRIPT.name)
    files = [USER_SCRIPT.name]
    for readme in READMES:
        if not readme.exists():
            continue
        blocks = python_blocks(readme)
        assert blocks, f"{readme.name} has no Python example"
        for n, code in enumerate(blocks):
            name = f"{readme.name.replace('.', '_')}_{n}.py"
            (tmp_path / name).write_text(code)
            files.append(name)
    # the script marks calls that must be errors (a signature that keeps its parameters); an
    # ignore comment that is not needed is an error itself (reportUnnecessaryTypeIgnoreComment)
    assert USER_SCRIPT.read_text().count("# pyright: ignore[") >= 4
    assert settings["reportUnnecessaryTypeIgnoreComment"] == "error"

    result = run([pyright, "--outputjson", "--pythonpath", sys.executable, "--project",
                  str(tmp_path)], cwd=tmp_path)
    report = json.loads(result.stdout)
    errors = [f"{Path(d['file']).name}:{d['range']['start']['line'] + 1}: {d['message']}"
              for d in report["generalDiagnostics"] if d["severity"] == "error"]
    summary = report["summary"]
    version = " ".join(run([pyright, "--version"]).stdout.split())
    print(f"{version}: {summary['filesAnalyzed']} files ({', '.join(files)}), "
          f"{summary['errorCount']} errors, {summary['warningCount']} warnings")
    assert summary["filesAnalyzed"] == len(files), (files, summary)
    assert not errors, "\n".join(errors)


def test_verifytypes_finds_the_public_api_typed():
    pyright = tool("basedpyright")
    result = run([pyright, "--verifytypes", "customgrad", "--ignoreexternal", "--outputjson"],
                 cwd=ROOT)
    report = json.loads(result.stdout)["typeCompleteness"]
    counts = report["exportedSymbolCounts"]
    score = report["completenessScore"]
    print(f"verifytypes customgrad: {score:.1%} of {sum(counts.values())} exported symbols known "
          f"({counts['withKnownType']} known, {counts['withAmbiguousType']} ambiguous, "
          f"{counts['withUnknownType']} unknown)")
    # this checkout's package (installed editable), with its py.typed marker
    assert Path(report["packageRootDirectory"]) == ROOT / "python" / "customgrad"
    assert report["pyTypedPath"]
    assert score >= MIN_COMPLETENESS, [
        s["name"] for s in report["symbols"] if not s["isTypeKnown"] and s["isExported"]]
