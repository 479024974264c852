"""The benchmark runs (a quick smoke run on one backend) and prints ratios and verdicts."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_quick_run_prints_ratios_and_verdicts(tmp_path):
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick",
                           "--backends", "torch", "--no-r", "--output", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text = out.read_text()
    for metric in ("eager_tiny", "eager_large", "compiled_large", "peak_memory"):
        assert f"### {metric}" in text
    assert "| torch | softplus |" in text and "x |" in text  # ratio columns
    assert "eager, tiny inputs: customgrad <= 1.2x native custom: torch softplus" in text
    # keras.ops.custom_gradient cannot do 3 inputs / 2 outputs on torch; customgrad can
    assert "fails: TypeError" in text
    assert "customgrad fails" not in text
