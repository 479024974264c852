"""Both documentation sites build in strict mode (scripts/build_docs.sh --strict, what `make docs`
runs without --strict): a broken link, a name the API reference cannot find, a warning, or an R
example, article or Python walkthrough that fails fails this test, and so `make test`. The tests
after the build read what it made: both sites work from disk, and the Python site has what a
newcomer looks for first (install, a first example, search, outputs, readable signatures)."""

import os
import ast
import html
import json
import re
import shutil
import subprocess
import time
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"
PYTHON_SITE = SITE / "python"


def public_names() -> list:
    """customgrad.__all__, read without importing the package (and Keras) here."""
    tree = ast.parse((ROOT / "python" / "customgrad" / "__init__.py").read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "__all__" for t in node.targets)]
    return ast.literal_eval(value)


class _References(HTMLParser):
    """The addresses a page loads: src= of any element, href= of <link> (stylesheets, icons,
    preloads), with the tag they sit on."""

    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("src"):
            self.found.append((tag, attrs["src"]))
        if tag == "link" and attrs.get("href"):
            self.found.append((tag, attrs["href"]))


def _not_local(address: str) -> str:
    """Why `address` is not a file of the site itself ('' when it is)."""
    parts = urlsplit(address)
    if parts.scheme in ("http", "https") or address.startswith("//"):
        return "a network address"
    if parts.scheme == "file":
        return "a file of the build machine"
    if parts.scheme == "data":
        return ""
    if parts.scheme:
        return f"a {parts.scheme}: address"
    if address.startswith("/"):
        return "an absolute path"
    return ""


def offline_problems(site: Path) -> list:
    """Every script, stylesheet, icon and font a page of `site` loads, and every url() or
    @import of its stylesheets, must be a file of the site, by a relative address, that exists."""
    problems = []
    pages = sorted(site.rglob("*.html"))
    assert pages, f"no pages under {site}"
    for page in pages:
        parser = _References()
        parser.feed(page.read_text(errors="replace"))
        for tag, address in parser.found:
            why = _not_local(address)
            if why:
                problems.append(f"{page.relative_to(site)}: <{tag}> loads {why}: {address}")
            elif not address.startswith("data:"):
                target = (page.parent / unquote(urlsplit(address).path)).resolve()
                if not target.is_file():
                    problems.append(f"{page.relative_to(site)}: <{tag}> loads {address}, "
                                    "which is not in the site")
    for sheet in sorted(site.rglob("*.css")):
        text = sheet.read_text(errors="replace")
        addresses = re.findall(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)", text)
        addresses += re.findall(r"@import\s+['\"]([^'\"]+)['\"]", text)
        for address in addresses:
            why = _not_local(address)
            if why:
                problems.append(f"{sheet.relative_to(site)}: url() of {why}: {address}")
            elif not address.startswith(("data:", "#")):
                target = (sheet.parent / unquote(urlsplit(address).path)).resolve()
                if not target.is_file():
                    problems.append(f"{sheet.relative_to(site)}: url({address}) is not in the site")
    return problems


def test_offline_check_finds_network_and_machine_addresses(tmp_path):
    """The check below fails on what the R site once had (pkgdown's CDN scripts, Debian's MathJax
    file, a stylesheet that is not there) and passes a page whose assets are all in the site."""
    (tmp_path / "ok.css").write_text("@font-face { src: url(fonts/a.woff2); }")
    (tmp_path / "fonts").mkdir()
    (tmp_path / "fonts" / "a.woff2").write_bytes(b"")
    (tmp_path / "ok.html").write_text('<link rel="stylesheet" href="ok.css"><img src="data:,x">')
    assert offline_problems(tmp_path) == []
    (tmp_path / "bad.html").write_text(
        '<script src="https://cdnjs.cloudflare.com/ajax/libs/fuse.js/6.4.6/fuse.js"></script>'
        '<script src="file:///usr/share/javascript/mathjax/MathJax.js"></script>'
        '<link rel="stylesheet" href="/work/site/all.css"><link rel="stylesheet" href="gone.css">')
    (tmp_path / "bad.css").write_text("@import 'https://fonts.googleapis.com/css?family=Lato';")
    problems = offline_problems(tmp_path)
    assert len(problems) == 5, problems
    assert sum("a network address" in p for p in problems) == 2, problems
    assert any("a file of the build machine" in p for p in problems), problems
    assert any("an absolute path" in p for p in problems), problems
    assert any("gone.css, which is not in the site" in p for p in problems), problems


@pytest.fixture(scope="module")
def built():
    """Builds both sites once for the tests of this module."""
    start = time.perf_counter()
    proc = subprocess.run(["bash", "scripts/build_docs.sh", "--strict"], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)
    print(f"scripts/build_docs.sh --strict: {time.perf_counter() - start:.0f} s")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    return proc


def page(name: str) -> str:
    return (PYTHON_SITE / name).read_text()


def test_both_sites_build_strict(built):
    python = PYTHON_SITE
    for page in ["convention.html", "api.html", "vignettes/getting-started.html", "bench/RESULTS.html"]:
        assert (python / page).is_file(), page
    api = (python / "api.html").read_text()
    public = [f"customgrad.{name}" for name in public_names()]
    for name in public + ["customgrad.ops.log1pexp", "customgrad.layers.GradientReversal"]:
        assert f'id="{name}"' in api, f"the API reference has no {name}"

    r = SITE / "r"
    home = (r / "index.html").read_text()
    assert "customgrad with keras3" in home
    # each site links the other
    assert 'href="../r/index.html"' in (python / "index.html").read_text()
    assert 'href="../python/index.html"' in home
    reference = (r / "reference" / "index.html").read_text()
    for group in ["Custom gradients", "Gradients on any backend", "Gradient-shaping ops and layers"]:
        assert group in reference, group
    for article in ["getting-started", "checking-gradients", "gradient-reversal"]:
        assert (r / "articles" / f"{article}.html").is_file(), article

    # the R site works from disk: no script, stylesheet, icon or font from the network or from a
    # path of the build machine, and the libraries pkgdown.js calls are there
    problems = offline_problems(r)
    assert not problems, "the R site needs more than its own files:\n" + "\n".join(problems[:40])
    for page in [r / "index.html", r / "reference" / "op_custom_gradient.html"]:
        text = page.read_text()
        assert "file://" not in text, f"{page} names a file of the build machine"
        for asset in ["offline/offline.js", "offline/bootstrap-toc.js", "offline/search-index.js",
                      "offline/fontawesome/css/all.min.css", "pkgdown.js"]:
            assert asset in text, f"{page} does not load {asset}"
    index = (r / "offline" / "search-index.js").read_text()
    assert index.startswith("window.customgradSearchIndex = [") and "op_custom_gradient" in index


def test_python_site_has_an_install_page_and_a_first_example(built):
    home = page("index.html")
    assert 'href="install.html"' in home, "the home page does not link the install page"
    # the home page's first example, as a code block
    assert re.search(r"<pre[^>]*>.*?customgrad.*?grad.*?log1pexp.*?</pre>", home, flags=re.S)
    install = html.unescape(re.sub(r"<[^>]+>", "", page("install.html")))
    for text in ["git clone", 'pip install ".[jax]"', 'pip install ".[torch]"', "KERAS_BACKEND",
                 "--index-url https://download.pytorch.org/whl/cpu", "jax[cuda12]"]:
        assert text in install, f"the install page does not say {text}"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = set(re.findall(r'pip install "\.\[([\w-]+)\]"', install))
    assert {"jax", "torch", "tensorflow", "tensorflow-cpu", "all"} <= named <= set(extras), named
    # R users are sent to the R site's install article itself
    assert 'href="../r/articles/install.html"' in page("install.html")
    assert "see the R site" not in install
    # the home page names every backend's extra
    for extra in ["jax", "torch", "tensorflow", "tensorflow-cpu", "all"]:
        assert f".[{extra}]" in html.unescape(home), f"the home page does not name .[{extra}]"


def test_python_site_works_from_disk(built):
    problems = offline_problems(PYTHON_SITE)
    assert not problems, "the Python site needs more than its own files:\n" + "\n".join(problems[:40])
    # search from file://: the offline plugin's index as a script (no fetch of the .json), and the
    # site's own worker shim in place of the one from unpkg.com
    index = (PYTHON_SITE / "search" / "search_index.js").read_text()
    assert index.startswith("var __index = ") and "custom_gradient" in index
    for name in ["index.html", "api.html", "vignettes/getting-started.html"]:
        assert 'src="' in page(name) and "iframe-worker.js" in page(name), name
    assert 'href="install.html"' in page("index.html")  # links to files, not folders (file://)


def test_api_reference_shows_public_signatures_and_code_examples(built):
    api = page("api.html")
    signatures = [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in
                  re.findall(r'<div class="doc-signature[^"]*">(.*?)</pre>', api, flags=re.S)]
    assert any(s.startswith("custom_gradient(f=OMITTED") for s in signatures), signatures[:5]
    private = [s for s in signatures if re.search(r"(?<![\w.])_[A-Za-z]", s)]
    assert not private, f"signatures with private names: {private}"
    for name in sorted(PYTHON_SITE.rglob("*.html")):
        assert "_NO_FUNCTION" not in name.read_text(), name
    # docstring examples are code blocks, not Markdown's reading of >>> as nested blockquotes
    assert "<blockquote>" not in api
    assert re.search(r"<pre><span></span><code><span class=\"gp\">&gt;&gt;&gt; </span>", api)
    # a signature sits in its own code block (which scrolls), not in the heading
    heading = re.search(r'<h(\d) id="customgrad.custom_gradient".*?</h\1>', api, flags=re.S).group(0)
    assert "forward_mode" not in heading


def test_code_paths_to_pages_are_links(built):
    assert '<a href="convention.html"><code>docs/convention.md</code></a>' in page("api.html")
    assert '<a href="bench/RESULTS.html"><code>bench/RESULTS.md</code></a>' in page("benchmarks.html")


def test_walkthroughs_show_their_outputs_and_plot(built):
    backend = os.environ.get("KERAS_BACKEND", "jax")  # the hook's choice, as scripts/build_docs.sh's
    started = page("vignettes/getting-started.html")
    assert f"Output on {backend}" in started
    assert "at x = 100: custom gradient 1.0, plain autodiff nan" in started
    image = f"log1pexp-gradient-{backend}.png"
    assert f'src="{image}"' in started
    assert (PYTHON_SITE / "vignettes" / image).stat().st_size > 10_000
    for name, printed in [("straight-through", "d round_ste / dx"), ("gradient-reversal", "reversal=True"),
                          ("checking-gradients", "check_gradients(scaled_softplus)")]:
        assert printed in page(f"vignettes/{name}.html"), name


def _in_browser(page: Path, query: str = "", script: str = "",
                width: int = 1280) -> tuple[str, list]:
    """The page's DOM after its scripts ran in headless Chromium, opened from disk (file://),
    and the errors its console reported. `script`: JavaScript run after the page's own, from a
    copy of the page next to it (so its relative addresses still hold); `width`: the window's."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed here (scripts/setup.sh installs Debian's)")
    if script:
        copy = page.with_name(f"_browser_check_{page.name}")
        copy.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
        page = copy
    try:
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},1000",
             "--enable-logging=stderr",
             "--v=0", "--virtual-time-budget=10000", "--dump-dom", page.as_uri() + query],
            capture_output=True, text=True, timeout=120)
    finally:
        if script:
            page.unlink()
    errors = [line for line in proc.stderr.splitlines()
              if ":CONSOLE" in line and re.search(r"error|uncaught|failed", line, re.I)]
    return proc.stdout, errors


def test_every_page_runs_its_scripts_without_errors_from_disk(built):
    checked, failures = 0, []
    for page in sorted(SITE.rglob("*.html")):
        if page.name.startswith("_browser_check_"):
            continue
        dom, errors = _in_browser(page)
        checked += 1
        if "</body>" not in dom or errors:
            failures.append(f"{page.relative_to(SITE)}: " + ("; ".join(errors) or "no page"))
    assert checked > 30, f"only {checked} pages"
    assert not failures, "pages whose scripts failed from disk:\n" + "\n".join(failures)


def test_r_site_fills_its_table_of_contents_from_disk(built):
    dom, _ = _in_browser(SITE / "r" / "reference" / "op_custom_gradient.html")
    toc = dom[dom.index('<nav id="toc"'):]
    toc = toc[:toc.index("</nav>")]
    for section in ["Arguments", "Value", "Examples"]:
        assert f">{section}</a>" in toc, f"'On this page' lacks {section}: {toc[:400]}"


def test_search_finds_pages_from_disk_on_both_sites(built):
    # mkdocs-material runs the search of a ?q= address when the page opens
    dom, errors = _in_browser(PYTHON_SITE / "index.html", "?q=vjp")
    assert not errors, errors
    found = re.search(r'md-search-result__meta">(\d+) matching document', dom)
    assert found and int(found.group(1)) > 0, "the Python site's search found nothing for vjp"
    assert 'href="api.html#customgrad.vjp"' in dom or "api.html#customgrad.vjp" in dom
    # the R site's search box (offline/offline.js), typed into as a user would
    # (pkgdown.js binds the box when the page is ready, and reads the index when it gets focus)
    typed = ("function typeOnceBound() {"
             " if (!jQuery('.algolia-autocomplete').length) { return setTimeout(typeOnceBound, 100); }"
             " var box = jQuery('#search-input'); box.triggerHandler('focus');"
             " setTimeout(function () { box.val('custom gradient').trigger('input');"
             " setTimeout(function () { var marker = document.createElement('div');"
             " marker.id = 'suggestions-found';"
             " marker.textContent = document.querySelectorAll('.aa-suggestion').length;"
             " document.body.appendChild(marker); }, 1000); }, 1000); }"
             " setTimeout(typeOnceBound, 100);")
    dom, errors = _in_browser(SITE / "r" / "index.html", script=typed)
    assert not errors, errors
    found = re.search(r'<div id="suggestions-found">(\d+)</div>', dom)
    assert found and int(found.group(1)) > 0, "the R site's search box suggested nothing"
    assert "op_custom_gradient" in dom[dom.find("aa-suggestion"):]


@pytest.mark.parametrize("name", ["python/convention.html", "python/api.html",
                                  "r/reference/op_custom_gradient.html",
                                  "r/articles/getting-started.html"])
def test_code_wider_than_its_box_scrolls_rather_than_being_cut(built, name):
    # every code block or line whose text is wider than its box (the window is 800 px wide)
    report = ("setTimeout(function () { var wide = 0, cut = [];"
              " document.querySelectorAll('pre, code').forEach(function (e) {"
              " if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) { wide += 1;"
              " var overflow = getComputedStyle(e).overflowX;"
              " if (overflow !== 'auto' && overflow !== 'scroll') cut.push(e.textContent.slice(0, 60)); } });"
              " var marker = document.createElement('div'); marker.id = 'wide-code';"
              " marker.textContent = JSON.stringify({wide: wide, cut: cut});"
              " document.body.appendChild(marker); }, 500);")
    dom, _ = _in_browser(SITE / name, script=report, width=800)
    found = re.search(r'<div id="wide-code">(.*?)</div>', dom)
    assert found, f"{name}: the check did not run"
    result = json.loads(html.unescape(found.group(1)))
    assert not result["cut"], f"{name}: code cut off at 800 px: {result['cut']}"


def test_build_ends_by_naming_the_sites(built):
    lines = built.stdout.strip().splitlines()
    assert lines[-2:] == ["  Python site: site/python/index.html", "  R site:      site/r/index.html"], \
        lines[-5:]
    assert not re.search(r"^\[1\]", built.stdout, flags=re.M), "an R value printed by the build"


def _text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def test_r_site_has_an_install_article_with_both_routes(built):
    r = SITE / "r"
    home = (r / "index.html").read_text()
    assert '<a class="nav-link" href="articles/install.html">Install</a>' in home
    assert 'href="install.html"' in (r / "articles" / "index.html").read_text()
    install = _text(r / "articles" / "install.html")
    for step in ['install.packages(c("keras3"', 'use_backend("jax")',
                 'customgrad::install_customgrad("jax")',
                 'reticulate::use_virtualenv("r-customgrad")\nkeras3::use_backend("jax")',
                 "git clone", "bash scripts/install_r.sh", "?customgrad::op_custom_gradient"]:
        assert step in install, f"the install article does not say {step}"
    # the clone route is the one the README gives (tests/integration/test_readme_commands.py)
    (line,) = [line for line in install.splitlines() if line.startswith("bash scripts/install_r.sh")]
    assert line in (ROOT / "README.md").read_text()


def test_r_site_home_has_a_first_example_and_links(built):
    home = (SITE / "r" / "index.html").read_text()
    text = _text(SITE / "r" / "index.html")
    assert "as.numeric(op_grad(log1pexp)(100))   # [1] 1" in text
    assert "?customgrad::op_custom_gradient" in text
    assert 'href="../python/convention.html#how-upstream-gradients-arrive-the-one-rule"' in home
    help_page = (SITE / "r" / "reference" / "op_custom_gradient.html").read_text()
    assert '<a href="../../python/convention.html"><code>docs/convention.md</code></a>' in help_page
    assert "`%||%` <-" not in (ROOT / "vignettes" / "getting-started.Rmd").read_text(), \
        "the getting-started article defines its own %||% (customgrad re-exports rlang's)"


def test_r_site_search_leaves_out_the_python_pages(built):
    entries = json.loads((SITE / "r" / "search.json").read_text())
    paths = {str(e["path"]) for e in entries}
    assert "/articles/install.html" in paths and "/reference/op_custom_gradient.html" in paths
    assert not paths & {"/CHANGELOG.html", "/ARCHITECTURE.html"}, sorted(paths)
    index = (SITE / "r" / "offline" / "search-index.js").read_text()
    assert "/CHANGELOG.html" not in index and "/ARCHITECTURE.html" not in index


def test_the_r_home_example_runs():
    """The R site's first example (pkgdown/index.md), as written, on jax: it prints what its
    comment says."""
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript is not installed here (scripts/setup.sh installs R)")
    (block,) = re.findall(r"^```r\n(.*?)^```", (ROOT / "pkgdown" / "index.md").read_text(),
                          flags=re.S | re.M)
    assert 'use_backend("jax")' in block and "# [1] 1" in block
    env = dict(os.environ, R_LIBS=str(ROOT / ".Rlib"), KERAS_BACKEND="jax",
               RETICULATE_PYTHON=str(Path(os.path.realpath(ROOT / ".venv")) / "bin" / "python"))
    proc = subprocess.run(["Rscript", "-e", block], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"(?m)^\[1\] 1$", proc.stdout), proc.stdout[-2000:]


def _r_search(index: list, query: str) -> list:
    """The R site's search as offline/offline.js ranks it: the entries whose what, text and code
    hold every word; those whose heading or page title holds them all first, then index order."""
    words = query.lower().split()
    found = []
    for i, entry in enumerate(index):
        text = " ".join(str(entry.get(k) or "") for k in ("what", "text", "code")).lower()
        if all(w in text for w in words):
            heading = f"{entry.get('what') or ''} {entry.get('title') or ''}".lower()
            found.append((0 if all(w in heading for w in words) else 0.5, i, entry))
    return [entry for _, _, entry in sorted(found, key=lambda f: (f[0], f[1]))]


def test_r_site_search_puts_the_install_article_first(built):
    text = (SITE / "r" / "offline" / "search-index.js").read_text()
    index = json.loads(text[text.index("["):text.rindex("]") + 1])
    paths = [e["path"] if isinstance(e["path"], str) else (e["path"] or [""])[0]
             for e in _r_search(index, "install")]
    assert paths[0] == "/articles/install.html", paths[:10]
    # maintainers' pages come after every page of a user's
    maintainers = [i for i, p in enumerate(paths) if p in ("/CONTRIBUTING.html", "/RELEASING.html")]
    users = [i for i, p in enumerate(paths) if p.startswith(("/articles/", "/reference/"))]
    assert maintainers and users and min(maintainers) > max(users), paths
