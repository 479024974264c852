#!/usr/bin/env bash
# Idempotent set-up: the project venv with the pinned stack, R from Debian, and the R package.
# Fast when everything is already there (a stamp file records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# --- Python: .venv with the pinned stack and customgrad itself (editable) ---
stamp=.venv/.customgrad-setup
want=$(cat requirements.txt tests/clients/clients-requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # rpy2 is built against R, which comes below: installed there
  .venv/bin/python -m pip install -q --disable-pip-version-check -r <(grep -v '^rpy2\|^tf-keras' requirements.txt) 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  # tf-keras needs `tensorflow`, which tensorflow-cpu provides under another distribution name
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps $(grep -o '^tf-keras==[^ ]*' requirements.txt) 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  # the clients of tests/python/test_clients.py, whose metadata declares `tensorflow` or numpy<2:
  # --no-deps (the file lists what they need; its `make clients` lines are pytest plugins)
  # (a failed download is said, not fatal: test_clients.py then skips, printing why)
  { .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r <(grep -v '# make clients' tests/clients/clients-requirements.txt) 2>&1 \
      || echo "setup: the clients of tests/clients/clients-requirements.txt did not install; tests/python/test_clients.py will skip"; } \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import keras, jax, tensorflow, torch, customgrad" >/dev/null 2>&1 \
    || { echo "setup: the Python stack did not install; see the pip output above" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# --- R: Debian's R and the r-cran-* packages (and those reticulate and keras3 need); Chromium,
# which opens the built documentation sites from disk in tests/integration/test_docs_sites.py ---
r_pkgs="chromium r-base-core r-base-dev r-cran-testthat r-cran-knitr r-cran-rmarkdown r-cran-cli r-cran-rlang
  r-cran-roxygen2 r-cran-jsonlite r-cran-xml2 pandoc r-cran-pkgdown r-cran-fontawesome
  r-cran-backports r-cran-base64enc r-cran-fastmap r-cran-generics r-cran-glue r-cran-here
  r-cran-lifecycle r-cran-magrittr r-cran-matrix r-cran-png r-cran-processx r-cran-rappdirs
  r-cran-rcpp r-cran-rcpptoml r-cran-rstudioapi r-cran-tidyselect r-cran-whisker r-cran-withr
  r-cran-yaml r-cran-zeallot"
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

# --- reticulate (>= 1.41) and keras3, which Debian lacks, into the project's R library: from CRAN
# where it is reachable, else from the local CRAN-style repository named by CUSTOMGRAD_CRAN_LOCAL
# (default: ../shared/cran beside the checkout, where these machines keep one) ---
# Only .Rlib counts: a keras3 in the user's own R library is not there for R_LIBS=.Rlib sessions.
mkdir -p .Rlib
export R_LIBS="$ROOT/.Rlib"
if ! r_stack=$(Rscript scripts/r_stack.R .Rlib 2>&1); then
  echo "setup: R stack: $r_stack"
  cran="https://cloud.r-project.org"
  if curl -sf --max-time 10 -o /dev/null "$cran/src/contrib/PACKAGES"; then
    repo="$cran"
  else
    local_repo="${CUSTOMGRAD_CRAN_LOCAL:-$ROOT/../shared/cran}"
    [ -d "$local_repo/src/contrib" ] || { echo "setup: CRAN is not reachable and no local CRAN-style repository was found at $local_repo (set CUSTOMGRAD_CRAN_LOCAL)" >&2; exit 1; }
    repo="file://$(cd "$local_repo" && pwd)"
  fi
  echo "setup: installing reticulate and keras3 into .Rlib from $repo"
  # .libPaths(".Rlib") drops the user's library, so their dependencies missing from .Rlib and R's
  # own libraries are installed into .Rlib too
  Rscript -e ".libPaths('.Rlib'); install.packages(c('reticulate', 'keras3'), lib = '.Rlib', repos = '$repo', type = 'source', Ncpus = 2, quiet = TRUE)" \
    >/tmp/customgrad-r-deps.log 2>&1 || { cat /tmp/customgrad-r-deps.log >&2; exit 1; }
  echo "$repo" > .Rlib/.r-stack-repository
  r_stack=$(Rscript scripts/r_stack.R .Rlib 2>&1) \
    || { cat /tmp/customgrad-r-deps.log >&2; echo "setup: reticulate/keras3 did not install into .Rlib: $r_stack" >&2; exit 1; }
fi
echo "setup: R stack: $r_stack"

# --- rpy2 (tests/integration/test_rpy2.py), built against the R above. A failed build is reported
# and stops nothing: that suite then skips, saying why ---
rpy2_pin=$(grep -o '^rpy2==[^ ]*' requirements.txt || true)
if [ -n "$rpy2_pin" ] && ! .venv/bin/python -c 'import importlib.metadata as m, sys
sys.exit(m.version("rpy2") != sys.argv[1])' "${rpy2_pin#rpy2==}" 2>/dev/null; then
  if .venv/bin/python -m pip install -q --disable-pip-version-check "$rpy2_pin" \
      >/tmp/customgrad-rpy2.log 2>&1; then
    echo "setup: installed $rpy2_pin"
  else
    echo "setup: WARNING: pip could not build $rpy2_pin (/tmp/customgrad-rpy2.log has why);" \
      "tests/integration/test_rpy2.py will be skipped" >&2
  fi
fi

# --- the R package, into a project-local library, with its vignettes (built as for CRAN from
# their recorded outputs, by scripts/install_r.sh) ---
if [ -f DESCRIPTION ]; then
  rstamp=.Rlib/.customgrad-setup
  rwant=$(cat DESCRIPTION NAMESPACE R/*.R inst/python/*.py $(find python/customgrad -name '*.py' | sort) requirements.txt \
    vignettes/*.Rmd vignettes/precomputed/* 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ ! -f "$rstamp" ] || [ "$(cat "$rstamp")" != "$rwant" ] || ! ls inst/python/dist/*.whl >/dev/null 2>&1 \
      || [ ! -f .Rlib/customgrad/Meta/vignette.rds ]; then
    if ! bash scripts/install_r.sh --no-test-load --library=.Rlib >/tmp/customgrad-r-install.log 2>&1; then
      # a vignette edited but not yet re-recorded (scripts/precompute_vignettes.R, which needs
      # the package installed) stops the build: install without the vignettes then
      tail -n 20 /tmp/customgrad-r-install.log >&2
      echo "setup: WARNING: the R package with its vignettes did not build (above; all of it in" \
        "/tmp/customgrad-r-install.log); installing it into .Rlib without them" >&2
      bash scripts/ship_python.sh
      R CMD INSTALL --no-test-load --library=.Rlib . >/tmp/customgrad-r-install-plain.log 2>&1 \
        || { cat /tmp/customgrad-r-install-plain.log >&2; echo "setup: R CMD INSTALL failed" >&2; exit 1; }
    fi
    echo "$rwant" > "$rstamp"
  fi
fi
echo "setup: ready (python: $ROOT/.venv, R library: $ROOT/.Rlib)"
