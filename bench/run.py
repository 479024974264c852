"""`make bench`: customgrad against plain autodiff, hand-written native custom gradients and
keras.ops.custom_gradient, side by side in one run, one process per backend (threads pinned to
one), with ratios and verdicts against the targets; writes bench/RESULTS.md.

    .venv/bin/python bench/run.py            # the full run (a few minutes on 2 cores)
    .venv/bin/python bench/run.py --quick    # a smoke run
"""

import argparse
import json
import os
import runpy
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# the one list of backends, read without importing Keras in this process
BACKENDS = list(runpy.run_path(
    str(ROOT / "python" / "customgrad" / "_backend_names.py"))["AUTODIFF"])
# each framework's math on one thread (also scripts/run_tests.py's jobs, side by side)
ONE_THREAD = {
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "TF_NUM_INTRAOP_THREADS": "1",
}
PINNED_ENV = {
    **ONE_THREAD, "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
    # a fixed mmap threshold: large buffers are mapped and unmapped at once, so resident memory
    # follows live tensors (glibc otherwise raises the threshold after the first big free)
    "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072",
    # TensorFlow's BFC allocator on the CPU: it keeps statistics (current and peak bytes)
    "TF_CPU_ALLOCATOR_USE_BFC": "true",
}

TARGETS = {  # metric: [(compare against, limit, description)]
    "eager_tiny": [
        ("native", 1.10, "eager, tiny inputs: customgrad <= 1.10x native custom (same keras.ops body)"),
        ("keras", 1.0, "eager, tiny inputs: customgrad <= 1.0x keras.ops.custom_gradient"),
    ],
    "compiled_large": [
        ("native", 1.02, "compiled, large inputs: customgrad <= 1.02x native custom"),
    ],
}


def gpu_records(folder=HERE / "gpu"):
    """Records of the GPU runs kept in bench/gpu/ (scripts/gpu_check.sh writes them)."""
    records = []
    for path in sorted(Path(folder).glob("gpu-*.jsonl")):
        backend = path.stem.split("-", 1)[1] + " (H100)"
        for line in path.read_text().splitlines():
            record = json.loads(line)
            record["backend"] = backend
            records.append(record)
    return records


def run_backend(backend, quick):
    env = dict(os.environ, KERAS_BACKEND=backend, **PINNED_ENV)
    cmd = [sys.executable, "-c",
           "import sys, runpy; "
           + ("import torch; torch.set_num_threads(1); torch.set_num_interop_threads(1); "
              if backend == "torch" else "")
           + ("import tensorflow as tf; tf.config.threading.set_intra_op_parallelism_threads(1); "
              "tf.config.threading.set_inter_op_parallelism_threads(1); "
              if backend == "tensorflow" else "")
           + f"sys.argv = ['bench_backend.py'] + {['--quick'] if quick else []!r}; "
           + f"runpy.run_path({str(HERE / 'bench_backend.py')!r}, run_name='__main__')"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        raise RuntimeError(f"bench on {backend} failed:\n{proc.stderr[-3000:]}")
    for r in records:
        r["backend"] = backend
    return records


def ratio(a, b):
    """customgrad's record a over record b: for timings, the median of the per-round ratios (each
    round times both back to back, so a slow spell of this shared machine cancels out); for
    records without rounds (memory, instruction counts), the ratio of the medians."""
    if "error" in a or "error" in b or not b["median"] > 0:
        return None
    ra, rb = a.get("rounds"), b.get("rounds")
    if ra and rb and len(ra) == len(rb):
        return statistics.median(x / y for x, y in zip(ra, rb))
    return a["median"] / b["median"]


def fmt(r, unit):
    if "error" in r:
        return f"fails: {r['error']}"
    return f"{r['median']:.3g} {unit} ({r['min']:.3g}-{r['max']:.3g})"


UNITS = {"eager_tiny": "us", "eager_large": "ms", "compiled_large": "ms", "peak_memory": "MiB",
         "peak_memory_stack": "MiB", "retained_memory": "MiB",
         "compiled_program": "instructions"}
MEMORY_METRICS = ("peak_memory", "peak_memory_stack", "retained_memory")
HOLDS = {"peak_memory": "peaks at", "peak_memory_stack": "peaks, 16 calls deep, at",
         "retained_memory": "holds for the backward"}


COLUMNS = ("autodiff", "native", "native_raw", "keras", "floor", "customgrad")
HEADERS = {"autodiff": "autodiff", "native": "native", "native_raw": "native, raw ops",
           "keras": "keras", "floor": "design floor", "customgrad": "customgrad"}
RATIOS = ("native", "native_raw", "keras", "floor", "autodiff")  # customgrad / each of these


def tables(records):
    lines, verdicts = [], []
    by = {(r["backend"], r["metric"], r["fn"], r["kind"]): r for r in records}
    missing = {"error": "not timed for this metric"}
    for metric, unit in UNITS.items():
        lines += [f"\n### {metric} (median, min-max; {unit})\n",
                  "| backend | function | " + " | ".join(HEADERS[k] for k in COLUMNS) + " | "
                  + " | ".join(f"customgrad / {HEADERS[k]}" for k in RATIOS) + " |",
                  "|---" * (2 + len(COLUMNS) + len(RATIOS)) + "|"]
        for backend in dict.fromkeys(r["backend"] for r in records):
            for fn in ("softplus", "swish", "three"):
                row = {k: by.get((backend, metric, fn, k)) for k in COLUMNS}
                if not all(row[k] for k in ("autodiff", "native", "keras", "customgrad")):
                    continue
                row["native_raw"] = row["native_raw"] or missing
                row["floor"] = row["floor"] or missing
                ratios = []
                for ref in RATIOS:
                    r = ratio(row["customgrad"], row[ref])
                    ratios.append("n/a" if r is None else f"{r:.2f}x")
                lines.append(f"| {backend} | {fn} | " + " | ".join(
                    fmt(row[k], unit) for k in COLUMNS) + " | " + " | ".join(ratios) + " |")
                verdicts += verdict(metric, backend, fn, row)
    return lines, verdicts


def verdict(metric, backend, fn, row):
    cg = row["customgrad"]
    if "error" in cg and "not measurable" in cg["error"]:
        return [f"n/a  {metric} {backend} {fn}: {cg['error']}"]
    if "error" in cg:
        return [f"FAIL {metric} {backend} {fn}: customgrad fails: {cg['error']}"]
    out = []
    for ref, limit, text in TARGETS.get(metric, ()):
        r = ratio(cg, row[ref])
        if r is None:  # keras.ops.custom_gradient fails on this function: nothing to compare
            out.append(f"n/a  {text}: {backend} {fn}: {row[ref].get('error', 'no timing')}")
        else:
            out.append(f"{'ok  ' if r <= limit else 'MISS'} {text}: {backend} {fn} {r:.2f}x")
    floor = row.get("floor") or {}
    if "rounds" in floor and "error" not in row["keras"]:
        # how far the mechanism alone (no customgrad code) is from keras's and native's: a target
        # below these cannot be met without giving up what the mechanism buys (see impls.py)
        out.append(f"note {metric}: design floor / keras {ratio(floor, row['keras']):.2f}x, "
                   f"/ native {ratio(floor, row['native']):.2f}x; customgrad / design floor "
                   f"{ratio(cg, floor):.2f}x: {backend} {fn}")
    if metric == "compiled_program" and "error" not in row["native"]:
        same = cg.get("opcodes") == row["native"].get("opcodes")
        out.append(f"{'ok  ' if same else 'MISS'} compiled program of customgrad has the "
                   f"instructions of native custom's: {backend} {fn} {cg['median']:.0f} vs "
                   f"{row['native']['median']:.0f} instructions, "
                   f"{'the same' if same else 'different'} opcodes")
    if metric in MEMORY_METRICS and "error" not in row["native"]:
        native = row["native"]["median"]
        if native > 0:
            r = cg["median"] / native
            out.append(f"{'ok  ' if r <= 1.05 else 'MISS'} customgrad {metric} <= native "
                       f"custom (5% noise): {backend} {fn} {r:.2f}x")
    if metric in MEMORY_METRICS and not row["autodiff"].get("median"):
        return out + [f"n/a  {metric} vs plain autodiff: {backend} {fn}: "
                      f"{row['autodiff'].get('error', 'plain autodiff measured 0')}"]
    if metric in MEMORY_METRICS:
        what = HOLDS[metric]
        r = cg["median"] / row["autodiff"]["median"]
        if fn == "swish":
            out.append(f"{'ok  ' if r <= 0.6 else 'MISS'} memory-efficient swish {what} <= "
                       f"0.6x plain autodiff: {backend} {r:.2f}x")
        out.append(f"{'ok  ' if r <= 1.05 else 'MISS'} customgrad {what} <= plain autodiff "
                   f"(5% noise): {backend} {fn} {r:.2f}x")
    return out


def remat_rows(records):
    """The remat row: per backend, the peak memory of a 16-deep stack of layers without and with
    customgrad.remat, and their ratio; (table lines, verdicts)."""
    by = {(r["backend"], r["kind"]): r for r in records if r["metric"] == "remat_memory"}
    lines = ["\n### remat_memory (median, min-max; MiB)\n",
             "| backend | without remat | customgrad.remat | remat / without |", "|---" * 4 + "|"]
    verdicts = []
    for backend in dict.fromkeys(r["backend"] for r in records):
        plain, remat = by.get((backend, "plain")), by.get((backend, "remat"))
        if plain is None or remat is None:
            continue
        r = ratio(remat, plain)
        lines.append(f"| {backend} | {fmt(plain, 'MiB')} | {fmt(remat, 'MiB')} | "
                     f"{'n/a' if r is None else f'{r:.2f}x'} |")
        if r is None:
            verdicts.append(f"n/a  remat: {backend}: {remat.get('error') or plain.get('error')}")
        else:
            verdicts.append(f"{'ok  ' if r <= 0.5 else 'MISS'} remat: a 16-deep stack peaks at "
                            f"<= 0.5x its peak without remat: {backend} {r:.2f}x")
    return lines, verdicts


def versions():
    code = ("import keras, jax, tensorflow as tf, torch, numpy; print(f'keras {keras.__version__}, "
            "jax {jax.__version__}, tensorflow {tf.__version__}, torch {torch.__version__}, "
            "numpy {numpy.__version__}')")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env).stdout.strip()


def r_bench():
    script = HERE / "r_bench.R"
    if not script.exists() or shutil.which("Rscript") is None:
        return ["(bench/r_bench.R not present: no R figures in this run)"]
    out = []
    for backend in BACKENDS:
        env = dict(os.environ, KERAS_BACKEND=backend, R_LIBS=str(ROOT / ".Rlib"),
                   RETICULATE_PYTHON=sys.executable, **PINNED_ENV)
        proc = subprocess.run(["Rscript", str(script)], env=env, capture_output=True,
                              text=True, timeout=900, cwd=ROOT)
        out += [f"\n#### R on {backend}\n", proc.stdout.strip() or proc.stderr[-2000:]]
    return out


def gpu_results(folder):
    """bench/RESULTS-gpu.md from the files scripts/gpu_check.sh wrote into `folder` (the machine,
    the suites' closing lines, the benchmark records), which are kept in bench/gpu/."""
    folder, kept = Path(folder), HERE / "gpu"
    kept.mkdir(exist_ok=True)
    for path in [folder / "machine.txt", *folder.glob("gpu-*.jsonl")]:
        if path.resolve() != (kept / path.name).resolve():
            shutil.copyfile(path, kept / path.name)
    suites = []
    for path in sorted(folder.glob("pytest-*.txt")):
        lines = path.read_text().splitlines()
        failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        suites += [f"{path.stem.split('-', 1)[1]}: {lines[-1] if lines else '(no output)'}",
                   *(f"    {line}" for line in failed)]
    (kept / "suites.txt").write_text("\n".join(suites) + "\n")
    lines, verdicts = tables(gpu_records(kept))
    text = "\n".join([
        "# customgrad on a GPU", "",
        "Written by `python3 bench/run.py --gpu-results DIR` from what `scripts/gpu_check.sh` "
        "recorded on the machine below (kept in bench/gpu/): the Python suite of each backend "
        "with the GPU as Keras's default device, then `bench/bench_backend.py --large 26 "
        "--memory 26` (large = 2^26 elements), each metric's rows as in RESULTS.md. A metric "
        "or function missing below was not reached within the check's time limit "
        "(BENCH_TIMEOUT); the suites and the benchmark may come from two runs of the same "
        "day, each file's own.", "",
        "## Machine", "", "```", (kept / "machine.txt").read_text().strip(), "```", "",
        "## Test suites", "", "```", *suites, "```", "",
        "## Verdicts", "", "```", *verdicts, "```", "", "## Tables", *lines]) + "\n"
    (HERE / "RESULTS-gpu.md").write_text(text)
    print(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu-results", metavar="DIR",
                        help="write bench/RESULTS-gpu.md from scripts/gpu_check.sh's DIR, and stop")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--no-r", action="store_true", help="skip bench/r_bench.R")
    args = parser.parse_args()
    if args.gpu_results:
        return gpu_results(args.gpu_results)
    backends = args.backends.split(",")
    start = time.time()
    records = []
    for backend in backends:
        print(f"benchmarking {backend} ...", flush=True)
        records += run_backend(backend, args.quick)
    lines, verdicts = tables(records)
    remat_lines, remat_verdicts = remat_rows(records)
    lines, verdicts = lines + remat_lines, verdicts + remat_verdicts
    gpu_lines, gpu_verdicts = tables(gpu_records())
    header = [
        "# customgrad benchmark results", "",
        f"Generated by `{'.venv/bin/python bench/run.py' + (' --quick' if args.quick else '')}` "
        f"on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}; {versions()}.",
        "Threads pinned to one per backend; implementations interleaved round by round; "
        "medians with min-max; timing ratios are medians of the per-round ratios (paired: "
        "both timed back to back in each round). Tiny = 8 elements; large = 2^22 elements "
        "(2^16 with --quick); peak memory: one forward+backward on 2^24 elements, memory "
        "above what was held before (resident memory, Linux VmHWM; tensorflow: its BFC CPU "
        "allocator's peak; on a GPU, torch's CUDA allocator); peak memory, stack: the same for "
        "16 calls in a row on 2^22 elements, each call's outputs the next call's inputs, as the "
        "layers of a network (what each call holds for the backward adds up); retained memory: "
        "what the forward holds for the backward (torch: resident memory; tensorflow: the "
        "allocator's bytes in use; jax: XLA's memory analysis of the compiled forward's outputs "
        "and VJP residuals); remat memory: the peak of one forward+backward through 16 layers "
        "of a wide elementwise block on 2^20 elements (2^18 with --quick), each layer plain or "
        "wrapped in customgrad.remat, measured as peak memory.", "",
        "## Verdicts", "", "```", *verdicts, "```",
    ]
    r_lines = ["(skipped: --no-r)"] if args.no_r else r_bench()
    gpu = ["", "## GPU", "",
           "The last GPU run (scripts/gpu_check.sh; its machine, versions and test suites: "
           "[RESULTS-gpu.md](RESULTS-gpu.md)), large = peak-memory size = 2^26 elements. jax's "
           "peak GPU memory is not measured (no resettable peak).", "",
           "```", *gpu_verdicts, "```", *gpu_lines] if gpu_lines else []
    text = "\n".join(header + ["", "## Tables"] + lines + gpu + ["", "## R", *r_lines]) + "\n"
    Path(args.output).write_text(text)
    print(text)
    print(f"wrote {args.output} in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
