#!/usr/bin/env bash
# Puts this repository's Python package into the R package, so that install_customgrad() installs
# the Python side of the same version: a wheel of python/customgrad and the pinned requirements,
# under inst/python/dist (not in git; made by setup.sh before R CMD INSTALL and before R CMD build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=inst/python/dist
# built beside it, then moved in file by file (each a rename): a job that reads it meanwhile
# (scripts/run_tests.py runs the R checks and the docs build side by side) sees whole files
new=$(mktemp -d inst/python/.dist-new.XXXXXX)
trap 'rm -rf "$new"' EXIT
# any Python with pip builds the (pure-Python) wheel: the project venv where there is one
py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
"$py" -m pip --version >/dev/null 2>&1 || {
  echo "ship_python.sh: building the Python wheel the R package carries needs a Python with pip;" \
    "$py has none (name another with PYTHON=/path/to/python)" >&2
  exit 1
}
isolation=--no-build-isolation  # offline, with the setuptools the Python has
# (setuptools 77 or newer: pyproject's license is an SPDX expression with license-files)
"$py" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" \
  2>/dev/null || isolation=""  # else pip fetches a build backend
"$py" -m pip wheel -q --disable-pip-version-check --no-deps $isolation -w "$new" . >/dev/null
cp requirements.txt "$new/requirements.txt"
ls "$new"/customgrad-*.whl >/dev/null
mkdir -p "$out"
shipped=" $(cd "$new" && echo *) "
mv -f "$new"/* "$out"/
for f in "$out"/*; do  # what an earlier version shipped (another wheel's name)
  case "$shipped" in *" $(basename "$f") "*) ;; *) rm -f "$f" ;; esac
done
