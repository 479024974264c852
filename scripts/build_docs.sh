#!/usr/bin/env bash
# Builds both documentation sites, offline: the Python site (mkdocs, mkdocs.yml) into site/python/
# and the R site (pkgdown, _pkgdown.yml) into site/r/. With --strict (make test, through
# tests/integration/test_docs_sites.py) a broken link, a name the API reference cannot find, a
# warning or an example or article that fails stops the build.
set -euo pipefail
cd "$(dirname "$0")/.."
strict=""
if [ "${1:-}" = "--strict" ]; then strict="--strict"; fi
export PYTHONPATH="$PWD/python" NO_MKDOCS_2_WARNING=1 TF_CPP_MIN_LOG_LEVEL=3
echo "=== Python site (mkdocs) -> site/python ==="
.venv/bin/python -m mkdocs build --quiet $strict
echo "=== R site (pkgdown) -> site/r ==="
bash scripts/ship_python.sh  # the wheel install_customgrad()'s example reads
# the R examples and articles run on one backend (every backend is the tests' job)
R_LIBS="$PWD/.Rlib" RETICULATE_PYTHON="${RETICULATE_PYTHON:-$PWD/.venv/bin/python}" \
  KERAS_BACKEND="${KERAS_BACKEND:-jax}" Rscript scripts/build_r_site.R $strict
echo "Built, to open from disk:"
echo "  Python site: site/python/index.html"
echo "  R site:      site/r/index.html"
