"""Both documentation sites build in strict mode (scripts/build_docs.sh --strict, what `make docs`
runs without --strict): a broken link, a name the API reference cannot find, a warning, or an R
example or article that fails fails this test, and so `make test`."""

import os
import ast
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"


def public_names() -> list:
    """customgrad.__all__, read without importing the package (and Keras) here."""
    tree = ast.parse((ROOT / "python" / "customgrad" / "__init__.py").read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "__all__" for t in node.targets)]
    return ast.literal_eval(value)


def test_both_sites_build_strict():
    start = time.perf_counter()
    proc = subprocess.run(["bash", "scripts/build_docs.sh", "--strict"], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)
    print(f"scripts/build_docs.sh --strict: {time.perf_counter() - start:.0f} s")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]

    python = SITE / "python"
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
