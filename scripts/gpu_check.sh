#!/usr/bin/env bash
# The GPU check: the Python suite of each backend with the GPU as Keras's default device, then
# the benchmark on the GPU, results written to $OUT (default bench/out/gpu). Needs a Python with
# keras and the frameworks (CUDA builds); a backend whose framework is not importable is skipped
# with a printed reason (tensorflow on the device machines of this project).
#
#   OUT=/some/dir bash scripts/gpu_check.sh       # then: python3 bench/run.py --gpu-results DIR
#   SKIP_BENCH=1 SUITE_TIMEOUT=200 bash scripts/gpu_check.sh   # the suites alone
#
# The two suites run side by side (a few minutes each), the benchmarks one after the other.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  TF_CPP_MIN_LOG_LEVEL=2 XLA_PYTHON_CLIENT_PREALLOCATE=false

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  $PY -c 'import sys, platform; print("python", platform.python_version())'
} > "$OUT/machine.txt"

backends=""
for backend in jax torch tensorflow; do
  if KERAS_BACKEND=$backend $PY -c "import $backend, keras" >/dev/null 2>&1; then
    backends="$backends $backend"
    KERAS_BACKEND=$backend $PY -c "import keras, $backend as fw
print('$backend', fw.__version__, 'keras', keras.__version__, 'default device:', keras.ops.zeros(()).device)" \
      >> "$OUT/machine.txt" 2>&1
  else
    echo "SKIPPED $backend: 'import $backend' fails with this Python ($PY)" | tee -a "$OUT/machine.txt"
  fi
done
cat "$OUT/machine.txt"

pids=""
for backend in $backends; do
  KERAS_BACKEND=$backend timeout "${SUITE_TIMEOUT:-330}" $PY -m pytest -q -p no:cacheprovider \
    tests/python -rfs --junitxml="$OUT/pytest-$backend.xml" > "$OUT/pytest-$backend.txt" 2>&1 &
  pids="$pids $!"
done
status=0
for pid in $pids; do wait "$pid" || status=1; done
for backend in $backends; do
  echo "=== pytest on $backend: $(tail -1 "$OUT/pytest-$backend.txt")"
  grep -E "^(FAILED|ERROR)" "$OUT/pytest-$backend.txt" | head -20
done

[ "${SKIP_BENCH:-0}" = 1 ] && { echo "SKIP_BENCH=1: no benchmark"; exit $status; }
for backend in $backends; do
  echo "=== benchmark on $backend"
  KERAS_BACKEND=$backend timeout "${BENCH_TIMEOUT:-150}" $PY bench/bench_backend.py \
    --large 26 --memory 26 --only eager_tiny,eager_large,compiled_large,peak_memory \
    > "$OUT/gpu-$backend.jsonl" 2> "$OUT/bench-$backend.err" || status=1
  wc -l < "$OUT/gpu-$backend.jsonl"
done
exit $status
