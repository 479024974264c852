#!/usr/bin/env bash
# Puts this repository's Python package into the R package, so that install_customgrad() installs
# the Python side of the same version: a wheel of python/customgrad and the pinned requirements,
# under inst/python/dist (not in git; made by setup.sh before R CMD INSTALL and before R CMD build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=inst/python/dist
rm -rf "$out"
mkdir -p "$out"
.venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
  -w "$out" . >/dev/null
cp requirements.txt "$out/requirements.txt"
ls "$out"/customgrad-*.whl >/dev/null
