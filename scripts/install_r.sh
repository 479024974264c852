#!/usr/bin/env bash
# Installs the R package from this clone with its vignettes, as from CRAN: builds the source
# tarball (scripts/build_r_tarball.sh; the vignettes show their recorded outputs, so no Python is
# needed) and installs it with R CMD INSTALL, passing on any options:
#   bash scripts/install_r.sh                     # into R's first library (.libPaths()[1])
#   bash scripts/install_r.sh --library=/my/lib   # into another one
# Building the vignettes needs the R packages knitr and rmarkdown, and pandoc.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bash scripts/build_r_tarball.sh "$out/tarball" >"$out/build.log" 2>&1 \
  || { cat "$out/build.log" >&2; echo "install_r.sh: building the R package failed; see above" >&2; exit 1; }
R CMD INSTALL "$@" "$out"/tarball/customgrad_*.tar.gz
