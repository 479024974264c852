"""The code on the Python site's pages (docs/*.md) runs, page by page, on each backend with
autodiff: each page's ```python blocks in order, after the README's log1pexp block (the example
the pages continue). A block that only lists signatures says so in an HTML comment right above
it (`<!-- not run: ... -->`)."""

import re
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
