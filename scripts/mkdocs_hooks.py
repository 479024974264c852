"""mkdocs hook: the Markdown files that live elsewhere in the repository (the Python vignettes,
the benchmark results, the architecture and the changelog) join the Python site as they are,
read from their own place, never copied into docs/. Also:

- the walkthroughs (vignettes/*.md) run when the site is built (scripts/walkthrough_outputs.py,
  on the backend KERAS_BACKEND names, jax if unset), and what each code block printed, and the
  images it wrote, are shown under it;
- a repository path in code (`docs/convention.md`, `bench/RESULTS.md#...`) that is a page of the
  site becomes a link to that page, in the pages and in the API reference's docstrings;
- 404.html goes: a site opened from disk has no server to show it, and it loads its assets by
  absolute paths that point nowhere there."""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

ROOT = Path(__file__).resolve().parents[1]
ELSEWHERE = ["vignettes/*.md", "bench/RESULTS.md", "bench/RESULTS-gpu.md", "ARCHITECTURE.md",
             "CHANGELOG.md"]
WALKTHROUGHS = "vignettes/*.md"
BLOCK = re.compile(r"^```python\n.*?^```$", flags=re.S | re.M)  # as walkthrough_outputs.py
CODE_PATH = re.compile(r"<code>((?:docs|vignettes|bench)/[\w.-]+\.md|[A-Z]+\.md)(#[\w-]+)?</code>")

_outputs = {}  # src_uri of a walkthrough -> what each of its blocks printed and wrote
_pages = {}  # repository path -> File of the site


def backend() -> str:
    return os.environ.get("KERAS_BACKEND", "jax")


def on_files(files, config):
    for pattern in ELSEWHERE:
        for path in sorted(ROOT.glob(pattern)):
            files.append(File.generated(config, path.relative_to(ROOT).as_posix(),
                                        abs_src_path=str(path)))
    _pages.clear()
    for file in files.documentation_pages():
        repo_path = file.src_uri if (ROOT / file.src_uri).is_file() else f"docs/{file.src_uri}"
        _pages[repo_path] = file
    _outputs.clear()
    with tempfile.TemporaryDirectory() as out:
        for src_uri, blocks in run_walkthroughs(out).items():
            _outputs[src_uri] = blocks
            for block in blocks:
                for name in block["files"]:
                    uri = f"{Path(src_uri).parent}/{name}"
                    content = (Path(out) / Path(src_uri).stem / name).read_bytes()
                    files.append(File.generated(config, uri, content=content))
    return files


def run_walkthroughs(out: str) -> dict:
    paths = sorted(ROOT.glob(WALKTHROUGHS))
    env = dict(os.environ, KERAS_BACKEND=backend(), MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "walkthrough_outputs.py"), out,
                           *map(str, paths)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PluginError("a walkthrough failed (scripts/walkthrough_outputs.py):\n"
                          + proc.stderr[-4000:])
    printed = json.loads(proc.stdout)
    return {f"vignettes/{path.name}": printed[path.name] for path in paths}


# The pages' links name files of the repository as it is read on GitHub or in a clone
# (`../vignettes/x.md` from docs/); on the site, the pages `on_files` adds from elsewhere sit next
# to docs/'s (`vignettes/x.md`), and the R site's sources (its home, its articles) are the R
# site's pages, as raw HTML that mkdocs does not check against its own
ELSEWHERE_LINK = re.compile(r"\]\(\.\./((?:vignettes|bench)/[\w.-]+\.md|[A-Z]+\.md)(#[\w-]+)?\)")
R_PAGE = re.compile(r"\[([^\]]+)\]\(\.\./(pkgdown/index\.md|vignettes/articles/[\w-]+\.Rmd)\)")


def _r_page(match) -> str:
    source = match.group(2)
    page = "index.html" if source == "pkgdown/index.md" else (
        "articles/" + Path(source).stem + ".html")
    return f'<a href="../r/{page}">{match.group(1)}</a>'


def on_page_markdown(markdown, page, config, files):
    if Path(page.file.abs_src_path).parent == ROOT / "docs":  # (a page added from elsewhere
        # sits where it is in the repository: its links are the site's as they are)
        markdown = R_PAGE.sub(_r_page, ELSEWHERE_LINK.sub(r"](\1\2)", markdown))
    blocks = _outputs.get(page.file.src_uri)
    if blocks is None:
        return markdown
    shown = iter(blocks)

    def with_output(match):
        block = next(shown)
        text = match.group(0)
        if block["output"]:
            text += f"\n\nOutput on {backend()}:\n\n```text\n{block['output'].rstrip()}\n```"
        for name in block["files"]:
            if name.endswith((".png", ".svg", ".jpg")):
                text += f"\n\n![{name}, written by the code above on {backend()}]({name})"
        return text

    return BLOCK.sub(with_output, markdown)


def on_page_content(html, page, config, files):
    def link(match):
        start = match.start()
        if html.rfind("<a ", 0, start) > html.rfind("</a>", 0, start):
            return match.group(0)  # already inside a link
        target = _pages.get(match.group(1))
        if target is None:
            return match.group(0)
        href = get_relative_url(target.url, page.file.url) + (match.group(2) or "")
        return f'<a href="{href}">{match.group(0)}</a>'

    return CODE_PATH.sub(link, html)


def on_post_build(config):
    (Path(config.site_dir) / "404.html").unlink(missing_ok=True)
