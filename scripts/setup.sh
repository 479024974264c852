#!/usr/bin/env bash
# Idempotent set-up: the project venv with the pinned stack, R from Debian, and the R package.
# Fast when everything is already there (a stamp file records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# --- Python: .venv with the pinned stack and customgrad itself (editable) ---
stamp=.venv/.customgrad-setup
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import keras, jax, tensorflow, torch, customgrad" >/dev/null 2>&1 \
    || { echo "setup: the Python stack did not install; see the pip output above" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# --- R: Debian's R and the r-cran-* packages the R package needs (CRAN is not reachable) ---
r_pkgs="r-base-core r-base-dev r-cran-reticulate r-cran-testthat r-cran-knitr r-cran-rmarkdown r-cran-cli r-cran-rlang r-cran-roxygen2 r-cran-jsonlite r-cran-xml2 pandoc"
missing=""
for p in $r_pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing from Debian:$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# --- the R package, into a project-local library ---
if [ -f DESCRIPTION ]; then
  mkdir -p .Rlib
  rstamp=.Rlib/.customgrad-setup
  rwant=$(cat DESCRIPTION NAMESPACE R/*.R inst/python/*.py $(find python/customgrad -name '*.py' | sort) requirements.txt \
    2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ ! -f "$rstamp" ] || [ "$(cat "$rstamp")" != "$rwant" ] || ! ls inst/python/dist/*.whl >/dev/null 2>&1; then
    # the Python package ships inside the R package (for install_customgrad())
    bash scripts/ship_python.sh
    R CMD INSTALL --no-test-load --library=.Rlib . >/tmp/customgrad-r-install.log 2>&1 \
      || { cat /tmp/customgrad-r-install.log >&2; echo "setup: R CMD INSTALL failed" >&2; exit 1; }
    echo "$rwant" > "$rstamp"
  fi
fi
echo "setup: ready (python: $ROOT/.venv, R library: $ROOT/.Rlib)"
