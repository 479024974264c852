"""The code on the Python site's pages (docs/*.md) runs, page by page, on each backend with
autodiff: each page's ```python blocks in order, after the README's log1pexp block (the example
the pages continue). A block that only lists signatures says so in an HTML comment right above
it (`<!-- not run: ... -->`)."""

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^(<!-- not run: [^\n]*-->\n)?```python\n(.*?)^```", flags=re.S | re.M)


def runnable_blocks(path: Path) -> list:
    return [code for skip, code in BLOCK.findall(path.read_text()) if not skip]


def readme_example() -> str:
    (first, *_) = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(),
                             flags=re.S | re.M)
    return first


@pytest.mark.autodiff
@pytest.mark.parametrize("page", [p.name for p in PAGES if runnable_blocks(p)])
def test_site_page_examples_run(page):
    namespace = {}
    exec(compile(readme_example(), "README.md", "exec"), namespace)
    for code in runnable_blocks(ROOT / "docs" / page):
        exec(compile(code, f"docs/{page}", "exec"), namespace)


def test_the_walkthrough_plot_says_what_to_install_without_matplotlib(monkeypatch, tmp_path):
    """The getting-started walkthrough runs in a venv with one backend's extra, which has no
    matplotlib: its plot block prints how to get the plot, and writes nothing."""
    walkthrough = (ROOT / "vignettes" / "getting-started.md").read_text()
    (block,) = [code for code in re.findall(r"^```python\n(.*?)^```", walkthrough, flags=re.S | re.M)
                if "matplotlib" in code]
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "vignettes/getting-started.md", "exec"), {})
    assert printed.getvalue() == "no plot: matplotlib is not installed (pip install matplotlib)\n"
    assert not list(tmp_path.iterdir())
