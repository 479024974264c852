"""Links work where they are read: every relative link of a repository Markdown file (on GitHub,
in a clone) names a file of the repository, raw-HTML links included; a vignette's links name
only what the installed package's doc/ holds (its other vignettes) or an absolute address.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = sorted(
    [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("vignettes/*.md"),
     *ROOT.glob("python/*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"")
# not files of a repository: an address, an anchor, a mail address
ABSOLUTE = re.compile(r"^([a-z]+:|#|mailto:)")


def _links(text: str) -> list:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold code, not links
    return [m.group(1) or m.group(2) for m in LINK.finditer(text)]


def _dead(path: Path) -> list:
    dead = []
    for link in _links(path.read_text(encoding="utf-8")):
        if ABSOLUTE.match(link):
            continue
        target = (path.parent / link.split("#", 1)[0]).resolve()
        if not target.exists():
            dead.append(link)
    return dead


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_of_repository_markdown_name_files(path):
    assert not _dead(path), f"{path.relative_to(ROOT)} links what the repository lacks"


def test_the_check_finds_a_dead_link(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text('[ok](there.md) [gone](gone.md) <a href="../r/gone.html">x</a> '
                    "[web](https://example.org) [anchor](#part)\n```\n[code](no.md)\n```\n")
    assert _dead(page) == ["gone.md", "../r/gone.html"]


@pytest.mark.parametrize("rmd", sorted(ROOT.glob("vignettes/*.Rmd")), ids=lambda p: p.name)
def test_a_vignettes_links_work_in_the_installed_package(rmd):
    """The installed doc/ holds the vignettes (name.html): a link to anything else (an article
    of the R site only) is dead there."""
    vignettes = {p.stem + ".html" for p in ROOT.glob("vignettes/*.Rmd")}
    local = [link for link in _links(rmd.read_text(encoding="utf-8"))
             if not ABSOLUTE.match(link)]
    assert all(link.split("#", 1)[0] in vignettes for link in local), local
