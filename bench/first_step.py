"""Time to the first step: how long the first forward+backward of `sum(stack(x))` takes, where
`stack` is `depth` calls of bench/impls.py's memory-efficient swish (the backward keeps only x and
recomputes the sigmoid), per backend and implementation (the backend's native mechanism,
keras.ops.custom_gradient, customgrad), compiled:

  jax         jax.jit(jax.grad(loss)): .trace(x), .lower(), .compile(), then the first call
  tensorflow  tf.function of a GradientTape step: get_concrete_function(x) (tracing, AutoGraph
              on as by default), then the first call
  torch       torch.compile(loss) with backend="eager" (dynamo alone) and with inductor (the
              default), the backward taken outside as a training step does (impls.grad_step):
              the first compiled forward, then the first backward

Every measurement runs in a fresh Python process (this script's --worker), with the persistent
compilation caches off, threads pinned to one (run.PINNED_ENV); each process first compiles and
runs a trivial unrelated function, so one-time costs (the compiler's own start-up, inductor's
imports) are reported apart and not counted in any implementation's time. Numbers are medians of
--repeats processes (min-max); ratios are medians of per-repeat ratios (the three implementations
run back to back in each repeat).

    .venv/bin/python bench/first_step.py                      # depths 1,16,64, 3 processes each
    .venv/bin/python bench/first_step.py --backends jax --depths 1,16 --repeats 5
    .venv/bin/python bench/first_step.py --no-inductor        # torch: dynamo alone
    .venv/bin/python bench/first_step.py --quick              # a smoke run: depths 1,4, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import BACKENDS, PINNED_ENV, fmt, ratio  # noqa: E402

KINDS = ("native", "keras", "customgrad")
N = 1024  # elements of x: the first step's time is tracing and compiling, not arithmetic
# torch's modes: the backend given to torch.compile
TORCH_MODES = {"eager": "eager", "inductor": "inductor"}
# the phases of one process, per backend (and torch mode), in the order they run
PHASES = {
    "jax": ["trace", "lower", "compile", "first call", "total"],
    "tensorflow": ["get_concrete_function", "first call", "total"],
    "torch/eager": ["first forward", "first backward", "total"],
    "torch/inductor": ["first forward", "first backward", "total"],
}


def no_cache_env(backend: str, scratch: str) -> dict:
    """The environment of one worker: threads pinned, persistent compilation caches off."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    env.update(PINNED_ENV, KERAS_BACKEND=backend)
    if backend == "jax":
        env.update(JAX_ENABLE_COMPILATION_CACHE="false")
    if backend == "torch":
        env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0",
                   TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=scratch,
                   TRITON_CACHE_DIR=os.path.join(scratch, "triton"),
                   TORCHINDUCTOR_COMPILE_THREADS="1")  # no compile-worker pool on 2 shared cores
    return env


# --- the worker: one measurement in a fresh process --------------------------------------------
def _stack(swish, depth):
    def stack(x):
        for _ in range(depth):
            x = swish(x)
        return x

    return stack


def _jax(loss, trivial, x):
    import jax

    times = {}
    start = time.perf_counter()
    jax.block_until_ready(jax.jit(jax.grad(trivial))(x))
    warmup = time.perf_counter() - start
    g = jax.jit(jax.grad(loss))
    t0 = time.perf_counter()
    traced = g.trace(x)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    out = jax.block_until_ready(compiled(x))
    t4 = time.perf_counter()
    times.update({"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2, "first call": t4 - t3,
                  "total": t4 - t0})
    return times, warmup, out, {}


def _tensorflow(loss, trivial, x):
    import impls
    import tensorflow as tf

    start = time.perf_counter()
    [t.numpy() for t in tf.function(impls.tape_gradient(trivial))(x)]
    warmup = time.perf_counter() - start
    f = tf.function(impls.tape_gradient(loss))
    t0 = time.perf_counter()
    f.get_concrete_function(x)
    t1 = time.perf_counter()
    out = [t.numpy() for t in f(x)]
    t2 = time.perf_counter()
    return ({"get_concrete_function": t1 - t0, "first call": t2 - t1, "total": t2 - t0}, warmup,
            out[0], {})


def _torch(loss, trivial, x, mode):
    import torch
    from torch._dynamo.utils import counters

    def first_step(fn):
        compiled = torch.compile(fn, backend=TORCH_MODES[mode])
        xs = x.detach().requires_grad_(True)
        t0 = time.perf_counter()
        y = compiled(xs)
        t1 = time.perf_counter()
        (g,) = torch.autograd.grad(y, [xs])
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, g

    forward, backward, _ = first_step(trivial)
    warmup = forward + backward
    counters.clear()
    forward, backward, g = first_step(loss)
    graphs = {"graphs": counters["stats"]["unique_graphs"],
              "graph breaks": sum(counters["graph_break"].values())}
    return ({"first forward": forward, "first backward": backward, "total": forward + backward},
            warmup, g, graphs)


def worker(kind: str, depth: int, mode: str) -> None:
    import bench_backend
    import impls
    import keras
    import numpy as np
    from keras import ops

    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    (x,) = bench_backend.inputs(N, 1)
    loss = impls.loss_of(_stack(impls.implementations()[kind]["swish"], depth))
    trivial = impls.loss_of(lambda v: v * 2.0)  # the same for every implementation
    record = {"kind": kind, "depth": depth, "mode": mode}
    try:
        if backend == "jax":
            times, warmup, g, extra = _jax(loss, trivial, x)
        elif backend == "tensorflow":
            times, warmup, g, extra = _tensorflow(loss, trivial, x)
        else:
            times, warmup, g, extra = _torch(loss, trivial, x, mode)
        gradient = np.asarray(ops.convert_to_numpy(g), dtype="float64")
        record.update(times=times, warmup=warmup, checksum=float(gradient.sum()), **extra)
    except Exception as e:  # noqa: BLE001  (reported in the table, "fails: ...", never hidden)
        record["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120]}"
    print(json.dumps(record), flush=True)


# --- the parent: fresh processes, medians, tables -----------------------------------------------
def measure(backend: str, kind: str, depth: int, mode: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="first_step_") as scratch:
        command = [sys.executable, __file__, "--worker", kind, "--depth", str(depth),
                   "--mode", mode]
        try:
            done = subprocess.run(command, env=no_cache_env(backend, scratch), text=True,
                                  capture_output=True, timeout=timeout, cwd=str(HERE.parent))
        except subprocess.TimeoutExpired:
            return {"kind": kind, "error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return {"kind": kind, "error": f"worker exited {done.returncode}: {tail}"}
    return json.loads(lines[-1])


def cell(records: list[dict], phase: str) -> dict:
    """run.fmt's and run.ratio's record: median, min, max and the per-repeat values."""
    errors = [r["error"] for r in records if "error" in r]
    if errors:
        return {"error": errors[0]}
    values = [r["times"][phase] for r in records]
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "rounds": values}


def table(name: str, results: dict) -> list[str]:
    """results: {depth: {kind: [records, one per repeat]}} -> markdown lines."""
    lines = [f"\n### {name} (seconds: median, min-max)\n",
             "| depth | phase | " + " | ".join(KINDS) + " | customgrad/native | customgrad/keras |",
             "|---" * (4 + len(KINDS)) + "|"]
    notes = []
    for depth, by_kind in results.items():
        for phase in PHASES[name]:
            row = {k: cell(by_kind[k], phase) for k in KINDS}
            ratios = []
            for ref in ("native", "keras"):
                r = ratio(row["customgrad"], row[ref])
                ratios.append("n/a" if r is None else f"{r:.2f}x")
            lines.append(f"| {depth} | {phase} | " + " | ".join(fmt(row[k], "s") for k in KINDS)
                         + " | " + " | ".join(ratios) + " |")
        if name.startswith("torch"):
            counts = []
            for k in KINDS:
                ok = [r for r in by_kind[k] if "error" not in r]
                counts.append(f"{ok[0]['graphs']} / {ok[0]['graph breaks']}" if ok else "n/a")
            lines.append(f"| {depth} | graphs / graph breaks | " + " | ".join(counts) + " | | |")
        sums = {k: by_kind[k][0]["checksum"] for k in KINDS if "error" not in by_kind[k][0]}
        if "native" in sums:
            for k, s in sums.items():
                if abs(s - sums["native"]) > 1e-3 * (1 + abs(sums["native"])):
                    notes.append(f"WARNING {name} depth {depth}: {k}'s gradient sums to {s}, "
                                 f"native's to {sums['native']}")
    warmups = [r["warmup"] for d in results.values() for rs in d.values() for r in rs
               if "warmup" in r]
    if warmups:
        notes.append(f"{name}: one-time warm-up in each process (a trivial function compiled and "
                     f"run first, not counted above): median {statistics.median(warmups):.3g} s")
    return lines + [""] + notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--depths", default="1,16,64")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per cell")
    parser.add_argument("--no-inductor", action="store_true",
                        help="torch: time dynamo alone (backend='eager'), not inductor")
    parser.add_argument("--inductor-depths",
                        help="torch: the depths timed with inductor (default: --depths)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per process")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: depths 1,4, 1 repeat, no inductor")
    parser.add_argument("--output", help="also write the tables to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--depth", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.depth, args.mode)
    if args.quick:
        args.depths, args.repeats, args.no_inductor = "1,4", 1, True
    depths = [int(d) for d in args.depths.split(",")]
    inductor_depths = ([int(d) for d in args.inductor_depths.split(",")]
                       if args.inductor_depths else depths)
    start = time.time()
    out = [f"Time to the first step (forward+backward of sum(stack(x)), stack = depth calls of "
           f"the memory-efficient swish, x of {N} float32), each measurement a fresh process, "
           f"{args.repeats} per cell, compilation caches off, threads pinned to one. Generated "
           f"by `.venv/bin/python bench/first_step.py {' '.join(sys.argv[1:])}`."]
    print(out[0], flush=True)
    for backend in args.backends.split(","):
        modes = [""]
        if backend == "torch":
            modes = ["eager"] + ([] if args.no_inductor else ["inductor"])
        for mode in modes:
            name = f"{backend}/{mode}" if mode else backend
            results = {}
            for depth in (inductor_depths if mode == "inductor" else depths):
                results[depth] = {k: [] for k in KINDS}
                for _ in range(args.repeats):
                    for kind in KINDS:  # back to back in each repeat: ratios per repeat
                        results[depth][kind].append(
                            measure(backend, kind, depth, mode, args.timeout))
                print(f"  {name} depth {depth} done ({time.time() - start:.0f} s)", file=sys.stderr,
                      flush=True)
            lines = table(name, results)
            print("\n".join(lines), flush=True)
            out += lines
    out.append(f"\n(run took {time.time() - start:.0f} s)")
    print(out[-1])
    if args.output:
        Path(args.output).write_text("\n".join(out) + "\n")
    return None


if __name__ == "__main__":
    main()
