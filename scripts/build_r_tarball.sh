#!/usr/bin/env bash
# Builds the R package's source tarball as it is submitted to CRAN, into OUTDIR:
#   bash scripts/build_r_tarball.sh OUTDIR
# From the files git tracks (and untracked ones it does not ignore), with the Python package
# shipped first (scripts/ship_python.sh: inst/python/dist): R CMD build copies the whole directory
# before it applies .Rbuildignore, .venv and .Rlib included, so it builds from a copy of those
# files. No Python is used (RETICULATE_PYTHON and NOT_CRAN unset): the vignettes show the outputs
# recorded in vignettes/precomputed, and the build fails if those are missing or stale.
set -euo pipefail
out=$(realpath "${1:?usage: bash scripts/build_r_tarball.sh OUTDIR}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
# keras3 and reticulate (for building the vignettes): the project's R library, where setup made one
if [ -d .Rlib ]; then export R_LIBS="$PWD/.Rlib${R_LIBS:+:$R_LIBS}"; fi

Rscript -e 'ok <- requireNamespace("knitr", quietly = TRUE) && requireNamespace("rmarkdown", quietly = TRUE) &&
  rmarkdown::pandoc_available("1.14"); quit(status = if (ok) 0 else 1)' >/dev/null 2>&1 || {
  echo "build_r_tarball.sh: building the vignettes needs the R packages knitr and rmarkdown" \
    "(install.packages(c(\"knitr\", \"rmarkdown\"))) and pandoc (https://pandoc.org/installing.html)" >&2
  exit 1
}
bash scripts/ship_python.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/customgrad"
{
  git ls-files -z --cached --others --exclude-standard
  find inst/python/dist -type f -print0
} | while IFS= read -r -d '' f; do
  [ -f "$f" ] && printf '%s\0' "$f"  # a file deleted in the working tree is not shipped
done | tar --null -T - -cf - | tar -xf - -C "$work/customgrad"

(cd "$work" && env -u RETICULATE_PYTHON -u NOT_CRAN R CMD build customgrad)
mv "$work"/customgrad_*.tar.gz "$out"/
ls "$out"/customgrad_*.tar.gz
