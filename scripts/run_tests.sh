#!/usr/bin/env bash
# Runs every test: the Python suite once per Keras backend (each in its own process), the newest
# torch and jax of the supported range in venvs of their own, then the suites that drive other
# processes (R via Rscript and through rpy2, the vignettes). Prints one total line at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
out=$(mktemp -d)
status=0
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::DeprecationWarning

# the one list of backends (python/customgrad/_backend_names.py)
backends=$($PY -c 'import runpy; print(*runpy.run_path("python/customgrad/_backend_names.py")["NAMES"])')
for backend in $backends; do
  echo "=== pytest tests/python with KERAS_BACKEND=$backend ==="
  KERAS_BACKEND=$backend $PY -m pytest -q -p no:cacheprovider tests/python \
    --junitxml="$out/python-$backend.xml" -o junit_suite_name="python-$backend" || status=1
done

# the newest torch and jax of the supported range, each installed alone (scripts/matrix.py)
echo "=== version matrix: the newest torch and jax, one backend per venv ==="
$PY scripts/matrix.py --ci --junit-dir "$out" || status=1

if [ -d tests/integration ]; then
  echo "=== pytest tests/integration (R package, vignettes) ==="
  # the R suites' own JUnit files (testthat's JunitReporter) land in $out too, for the total
  CUSTOMGRAD_JUNIT_DIR="$out" $PY -m pytest -q -p no:cacheprovider tests/integration --junitxml="$out/integration.xml" || status=1
fi

$PY scripts/summarize_junit.py "$out"/*.xml || status=1
exit $status
