"""Two revisions of customgrad side by side in one run: the eager forward+backward of
bench/impls.py's functions on tiny inputs (bench_backend's eager_tiny), each revision in a worker
process of its own, rounds interleaved (which revision goes first alternates), the ratio taken
per round (paired) and then its median. Both workers also time keras.ops.custom_gradient (kind
"keras": the two processes do the same work), so each revision's ratio to Keras is measured in
the same run too.

    python bench/before_after.py --before DIR --after DIR [--backends torch,jax,tensorflow]
    python bench/before_after.py --before DIR --after DIR --compiled   # compiled steps

`--compiled` times the steps of bench_backend's compiled_large instead (jax.jit,
tf.function(jit_compile=True), torch.compile), on 2**--log2n elements, against the backend's own
native custom gradient (kind "native") rather than Keras's, which does not compile everywhere.

DIR holds a `customgrad` package, e.g. a checkout of an earlier commit:
`git archive <commit> python | tar -x -C /tmp/before` gives `--before /tmp/before/python`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import PINNED_ENV  # noqa: E402  (pins every framework to one thread)

FUNCTIONS = ["softplus", "swish", "three"]


def worker(kinds: list[str], compiled: bool, n: int) -> None:
    """Reads "round CALLS" lines; answers one JSON line {kind/fn: microseconds per call}."""
    import bench_backend
    import customgrad
    import impls
    import numpy as np
    from keras import ops

    steps, first = {}, {}
    for fn in FUNCTIONS:
        xs = bench_backend.inputs(n, impls.N_INPUTS[fn])
        for kind in kinds:
            try:
                step = impls.grad_step(impls.implementations()[kind][fn], impls.N_INPUTS[fn],
                                       compiled)
                result = step(*xs)
                first[f"{kind}/{fn}"] = [_summary(np.asarray(ops.convert_to_numpy(g)))
                                         for g in result]
                steps[f"{kind}/{fn}"] = (step, xs)
            except Exception as e:  # reported in the table, never hidden
                first[f"{kind}/{fn}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
    print(json.dumps({"customgrad": customgrad.__file__, "first": first}), flush=True)
    for line in sys.stdin:
        calls = int(line.split()[1])
        times = {}
        for name, (step, xs) in steps.items():
            start = time.perf_counter()
            for _ in range(calls):
                step(*xs)
            times[name] = (time.perf_counter() - start) / calls * 1e6
        print(json.dumps(times), flush=True)


def _summary(gradient) -> list:
    """What the two revisions' gradients are compared by: the first 64 values, then the sum."""
    flat = gradient.ravel()
    return [*flat[:64].tolist(), float(flat.sum(dtype="float64"))]


def start(directory: str, backend: str, kinds: list[str], compiled: bool,
          n: int) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, **PINNED_ENV, "KERAS_BACKEND": backend,
           "PYTHONPATH": os.pathsep.join([directory, str(HERE)])}
    process = subprocess.Popen(
        [sys.executable, __file__, "--worker", ",".join(kinds), "--n", str(n)]
        + (["--compiled"] if compiled else []), env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(HERE.parent))
    return process, json.loads(process.stdout.readline())


def timed(process, calls: int) -> dict:
    process.stdin.write(f"round {calls}\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def compare(before: str, after: str, backend: str, rounds: int, calls: int, compiled: bool,
            n: int) -> None:
    reference = "native" if compiled else "keras"
    workers = {side: start(directory, backend, ["customgrad", reference], compiled, n)
               for side, directory in (("before", before), ("after", after))}
    print(f"\n## {backend}")
    for side, (_, hello) in workers.items():
        print(f"{side}: {hello['customgrad']}")
    b_first, a_first = workers["before"][1]["first"], workers["after"][1]["first"]
    for fn in FUNCTIONS:
        name = f"customgrad/{fn}"
        if isinstance(b_first[name], list) and isinstance(a_first[name], list):
            import numpy as np

            for gb, ga in zip(b_first[name], a_first[name]):
                if not np.allclose(gb, ga, rtol=1e-6, equal_nan=True):
                    raise SystemExit(f"{backend} {fn}: the two revisions' gradients differ")
    samples = {side: [] for side in workers}
    for r in range(rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for side in order:
            samples[side].append(timed(workers[side][0], calls))
    for process, _ in workers.values():
        process.stdin.close()
        process.wait()
    print(f"| function | before µs | after µs | after / before | before / {reference} "
          f"| after / {reference} |")
    print("| --- | --- | --- | --- | --- | --- |")
    for fn in FUNCTIONS:
        name, reference_name = f"customgrad/{fn}", f"{reference}/{fn}"
        if name not in samples["before"][0] or name not in samples["after"][0]:
            print(f"| {fn} | {b_first.get(name)} | {a_first.get(name)} | | |")
            continue
        b = [s[name] for s in samples["before"]]
        a = [s[name] for s in samples["after"]]
        paired = statistics.median(x / y for x, y in zip(a, b))
        to_reference = {side: _to_reference(samples[side], name, reference_name,
                                            workers[side][1]["first"]) for side in workers}
        print(f"| {fn} | {statistics.median(b):.1f} ({min(b):.1f}-{max(b):.1f}) | "
              f"{statistics.median(a):.1f} ({min(a):.1f}-{max(a):.1f}) | {paired:.3f}x | "
              f"{to_reference['before']} | {to_reference['after']} |")


def _to_reference(samples, name, reference_name, first) -> str:
    if reference_name not in samples[0]:
        return f"n/a ({first[reference_name]})"
    return f"{statistics.median(s[name] / s[reference_name] for s in samples):.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before")
    parser.add_argument("--after", default=str(HERE.parent / "python"))
    parser.add_argument("--backends", default="torch,jax,tensorflow")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, help="calls per round (default 300; 5 compiled)")
    parser.add_argument("--compiled", action="store_true",
                        help="compiled steps on 2**--log2n elements, against native")
    parser.add_argument("--log2n", type=int, default=20, help="input size of --compiled")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=8, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker.split(","), args.compiled, args.n)
    if not args.before:
        parser.error("--before DIR is required (a directory holding a customgrad package)")
    n = 2 ** args.log2n if args.compiled else 8
    calls = args.calls or (5 if args.compiled else 300)
    print(f"rounds {args.rounds}, {calls} calls each; medians (min-max) of µs per "
          f"{'compiled ' if args.compiled else ''}forward+backward on {n} elements; ratios: "
          "medians of per-round ratios")
    for backend in args.backends.split(","):
        compare(args.before, args.after, backend, args.rounds, calls, args.compiled, n)


if __name__ == "__main__":
    main()
