"""Two revisions of customgrad side by side, counted in instructions: the eager forward+backward
of bench/impls.py's functions on tiny inputs (as bench/before_after.py times them), run under
valgrind's cachegrind. Instruction counts do not move with the neighbours of a shared machine,
where wall time does (two workers of one revision differ by up to ±3% on a busy 2-core VM), so a
difference of a percent or two can be told from noise here (run to run: about ±1%).

    python bench/instructions.py --before DIR --after DIR [--functions softplus,swish,three]
    python bench/instructions.py --before DIR --after DIR --also keras,floor  # the same run

DIR holds a `customgrad` package (`git archive <commit> python | tar -x -C /tmp/before`). Each
revision and function runs twice, with few and with many steps; the difference, divided by the
difference in steps, is one step's instructions (start-up and imports cancel out). The two
revisions run at once, one process each. Needs valgrind; a few minutes per function.
Instructions are not time: a change that moves memory or branches can cost time at equal counts,
so read these beside before_after.py's paired times.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from before_after import FUNCTIONS  # noqa: E402
from run import PINNED_ENV  # noqa: E402  (pins every framework to one thread)

FEW, MANY = 100, 1100


def worker(fn: str, steps: int) -> None:
    """Warms up, then runs `steps` forward+backward steps of `fn`: customgrad's, or another
    kind's of bench/impls.py given as `kind/fn` (`keras/softplus`)."""
    import bench_backend
    import impls

    kind, _, fn = fn.rpartition("/")
    xs = bench_backend.inputs(8, impls.N_INPUTS[fn])
    step = impls.grad_step(impls.implementations()[kind or "customgrad"][fn],
                           impls.N_INPUTS[fn])
    for _ in range(50 + steps):
        step(*xs)


def instructions(directory: str, backend: str, fn: str, steps: int,
                 script: str = __file__) -> int:
    """The instructions cachegrind counts in one worker process of `steps` steps: `script
    --worker fn --steps N` (this file's worker, or another benchmark's)."""
    env = {**os.environ, **PINNED_ENV, "KERAS_BACKEND": backend, "PYTHONHASHSEED": "0",
           "PYTHONPATH": os.pathsep.join([directory, str(HERE)])}
    with tempfile.TemporaryDirectory() as scratch:
        command = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
                   f"--cachegrind-out-file={scratch}/out", sys.executable, script,
                   "--worker", fn, "--steps", str(steps)]
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              cwd=str(HERE.parent))
    counted = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or not counted:
        raise SystemExit(f"instructions: the worker failed ({directory}, {fn}, {steps} steps):"
                         f"\n{done.stderr[-2000:]}")
    return int(counted.group(1).replace(",", ""))


def per_step(directory: str, backend: str, fn: str, script: str = __file__,
             few: int = FEW, many: int = MANY) -> float:
    counts = [instructions(directory, backend, fn, n, script) for n in (few, many)]
    return (counts[1] - counts[0]) / (many - few)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before")
    parser.add_argument("--after", default=str(HERE.parent / "python"))
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--functions", default=",".join(FUNCTIONS))
    parser.add_argument("--also", default="",
                        help="other kinds of bench/impls.py counted beside, each against after: "
                             "keras, floor (torch's design floor), native")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.steps)
    if not args.before:
        parser.error("--before DIR is required (a directory holding a customgrad package)")
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions: valgrind is not installed (apt-get install valgrind)")
    also = [k for k in args.also.split(",") if k]
    print(f"## {args.backend}: instructions per eager forward+backward on 8 elements "
          f"(cachegrind, ({MANY} - {FEW} steps) / {MANY - FEW})")
    print("| function | before | after | after / before |"
          + "".join(f" {k} | after / {k} |" for k in also))
    print("| --- | --- | --- | --- |" + " --- | --- |" * len(also))
    with ThreadPoolExecutor(max_workers=2) as pool:
        for fn in args.functions.split(","):
            runs = [(args.before, fn), (args.after, fn), *((args.after, f"{k}/{fn}") for k in also)]
            before, after, *others = pool.map(
                lambda run: per_step(run[0], args.backend, run[1]), runs)
            print(f"| {fn} | {before:,.0f} | {after:,.0f} | {after / before:.3f}x |"
                  + "".join(f" {o:,.0f} | {after / o:.3f}x |" for o in others), flush=True)


if __name__ == "__main__":
    main()
