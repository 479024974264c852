"""The benchmark runs (a quick smoke run on one backend) and prints ratios and verdicts."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_quick_run_prints_ratios_and_verdicts(tmp_path):
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick",
                           "--backends", "torch", "--no-r", "--output", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text = out.read_text()
    for metric in ("eager_tiny", "eager_large", "compiled_large", "peak_memory",
                   "peak_memory_stack", "retained_memory"):
        assert f"### {metric}" in text
    assert "| torch | softplus |" in text and "x |" in text  # ratio columns
    assert ("eager, tiny inputs: customgrad <= 1.10x native custom (same keras.ops body): "
            "torch softplus") in text
    assert "eager, tiny inputs: customgrad <= 1.0x keras.ops.custom_gradient: torch softplus" in text
    # the native mechanism on torch's own ops is timed (eager) next to the keras.ops one
    assert "| native, raw ops |" in text and "customgrad / native, raw ops" in text
    softplus_row = next(line for line in text.splitlines() if line.startswith("| torch | softplus |"))
    assert "not timed" not in softplus_row
    # customgrad's mechanism without customgrad's code is timed beside it (torch, eager)
    assert "| design floor |" in text and "customgrad / design floor" in text
    assert "note eager_tiny: design floor / keras " in text
    # keras.ops.custom_gradient cannot do 3 inputs / 2 outputs on torch; customgrad can
    assert "fails: TypeError" in text
    assert "customgrad fails" not in text
    # the remat row: a 16-deep stack with and without customgrad.remat, and their ratio
    assert "### remat_memory" in text
    assert "remat: a 16-deep stack peaks at <= 0.5x its peak without remat: torch" in text


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_compiled_customgrad_is_the_native_program(backend):
    """Compiled, customgrad's forward+backward is the native mechanism's XLA program: the same
    instructions (opcodes), for every benchmark function. Exact, unlike timings."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_backend.py"), "--only", "compiled_program"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {(r["fn"], r["kind"]): r for r in map(json.loads, proc.stdout.splitlines())}
    for fn in ("softplus", "swish", "three"):
        native, ours = rows[fn, "native"], rows[fn, "customgrad"]
        assert "error" not in ours and "error" not in native, (ours, native)
        assert ours["median"] > 3  # a real program was counted
        assert ours["opcodes"] == native["opcodes"], (fn, ours["opcodes"], native["opcodes"])


def test_tensorflow_memory_is_measured_and_customgrad_holds_no_more_than_native():
    """TensorFlow's CPU memory comes from its BFC allocator's statistics (exact bytes): customgrad
    never peaks above or holds more than tf.custom_gradient, whose backward keeps the outputs."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_backend.py"), "--quick",
         "--only", "peak_memory,peak_memory_stack,retained_memory"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {(r["metric"], r["fn"], r["kind"]): r for r in map(json.loads, proc.stdout.splitlines())}
    for metric in ("peak_memory", "peak_memory_stack", "retained_memory"):
        for fn in ("softplus", "swish", "three"):
            native, ours = rows[metric, fn, "native"], rows[metric, fn, "customgrad"]
            assert "error" not in ours and "error" not in native, (ours, native)
            assert native["median"] > 0
            assert ours["median"] <= native["median"], (metric, fn, ours, native)
    # 16 softplus calls: tf.custom_gradient keeps every call's output, customgrad does not
    stack = {k: rows["peak_memory_stack", "softplus", k]["median"] for k in ("native", "customgrad")}
    assert stack["customgrad"] < 0.75 * stack["native"], stack


@pytest.mark.parametrize("backend, mode", [("torch", []), ("jax", ["--compiled", "--log2n", "10"])])
def test_before_after_compares_two_revisions_in_one_run(backend, mode):
    """bench/before_after.py, the same tree as before and after: a row per function, each with
    its paired ratio and both revisions' ratios to the reference (Keras eager, native compiled)."""
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed here; before_after.py runs on it")
    python = str(ROOT / "python")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "before_after.py"), "--before", python, "--after",
         python, "--backends", backend, "--rounds", "2", "--calls", "3", *mode],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    reference = "native" if mode else "keras"
    assert f"| after / before | before / {reference} | after / {reference} |" in proc.stdout
    for fn in ("softplus", "swish", "three"):
        row = next(line for line in proc.stdout.splitlines() if line.startswith(f"| {fn} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[3].endswith("x") and float(cells[3][:-1]) > 0, row  # the paired ratio
        if mode or fn != "three":  # keras.ops.custom_gradient cannot do three on torch
            assert cells[4].endswith("x") and cells[5].endswith("x"), row


def test_first_step_quick_run_prints_phases_and_ratios():
    """bench/first_step.py --quick on jax: a row per depth and phase (jit's trace, lower, compile,
    first call), each implementation's time a number of seconds, both ratios numbers."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed here; first_step.py's smoke run uses it")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "first_step.py"), "--quick", "--backends", "jax"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    header = ("| depth | phase | native | keras | customgrad | customgrad/native "
              "| customgrad/keras |")
    assert "### jax" in proc.stdout and header in proc.stdout, proc.stdout[-2000:]
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].isdigit():
            rows[int(cells[0]), cells[1]] = cells[2:]
    for depth in (1, 4):
        for phase in ("trace", "lower", "compile", "first call", "total"):
            times, ratios = rows[depth, phase][:3], rows[depth, phase][3:]
            for t in times:  # "0.0421 s (0.0421-0.0421)", not "fails: ..."
                assert float(t.split(" s ")[0]) > 0, (depth, phase, t)
            for r in ratios:
                assert r.endswith("x") and float(r[:-1]) > 0, (depth, phase, r)
        # the phases add up to the total (each implementation)
        for i in range(3):
            parts = sum(float(rows[depth, p][i].split(" s ")[0])
                        for p in ("trace", "lower", "compile", "first call"))
            total = float(rows[depth, "total"][i].split(" s ")[0])
            assert abs(parts - total) <= 0.02 * total + 1e-3, (depth, i, parts, total)
    assert "WARNING" not in proc.stdout  # the implementations' gradients agree
