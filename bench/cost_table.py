"""What one eager custom-gradient call costs, piece by piece: the cost table of
docs/benchmarks.md.

    python bench/cost_table.py                    # torch, timed (a few seconds)
    python bench/cost_table.py --instructions     # torch, in instructions (valgrind; minutes)
    python bench/cost_table.py --backend tensorflow

On torch the table is built up from the design floor (customgrad's mechanism with none of its
code): each row runs one eager forward + backward of bench/impls.py's softplus on 8 elements
with one more piece of customgrad's work than the row before, up to customgrad itself, so the
difference between two rows is what that piece costs, measured where it runs (a piece timed
alone, outside a step, looks cheaper than it is). Rows are timed side by side (rounds
interleaved, the median of each) or counted in instructions by cachegrind (steady on a shared
machine, where times are not). On tensorflow it times customgrad and Keras side by side.

Both print the number of customgrad's Python functions one step enters (`sys.setprofile`:
deterministic; tests/python/test_call_count.py pins it).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# (row, what its piece buys), each row one piece more than the one before
TORCH_ROWS = [
    ("design floor", "bench/impls.py's floor: f run with autograd on, its outputs detached and "
     "re-attached by an autograd.Function whose backward calls grad_fn"),
    ("f as written", "the same, with the benchmark's customgrad f (its grad_fn one call deeper)"),
    ("+ LinkFunction", "customgrad's autograd.Function: grad_fn's closure freed once its "
     "backward ran, a second backward refused by name"),
    ("+ PositionalLink", "the upstream rule (grad_fn's signature read), gradients of another "
     "shape or dtype than their input's refused (never summed or broadcast)"),
    ("+ guard", "a tensor grad_fn holds changed in place before the backward: an error, as "
     "autograd gives for saved tensors"),
    ("+ reads", "the keras.Variables f reads, for grad_fn's `variables=`"),
    ("+ hidden walk", "the parameters f reads without receiving them: routed to `variables=` "
     "or refused by name, never dropped"),
    ("+ admission, output kind, specs", "calls under a transform, torch.compile or no_grad, with "
     "a differentiated tensor in f's closure, or with structured outputs take the general path"),
    ("customgrad", "the decorated function: the backend's module, keyword arguments"),
]


def _torch_rows() -> dict:
    """{row: the step function of that row} (see TORCH_ROWS)."""
    import impls
    from customgrad._call import PositionalLink, run_reading
    from customgrad._core import backend_module
    from customgrad.backends.torch import fast_path, hidden_inputs, link

    backend = backend_module()
    customgrad_softplus = impls.implementations()["customgrad"]["softplus"]
    f = customgrad_softplus.__customgrad_forward__

    attach = impls.floor_attach()

    def as_written(x):
        y, grad_fn = f(x)
        return attach(lambda c: (grad_fn(c[0]),), [y.detach()], x)[0]

    def link_function(x):
        y, grad_fn = f(x)
        return fast_path.link_apply(lambda c, _eager: [grad_fn(c[0])], [y.detach()], x)[0]

    def linked(x, grad_fn, y, guard=None):
        call_link = PositionalLink(f, grad_fn, backend, [(x.shape, x.dtype, x.device)], 1, None,
                                   guard)
        return fast_path.link_apply(call_link, [y.detach()], x)[0]

    def positional_link(x):
        y, grad_fn = f(x)
        return linked(x, grad_fn, y)

    def guarded(x):
        y, grad_fn = f(x)
        return linked(x, grad_fn, y, link.guard(f, grad_fn))

    def reading(x):
        (y, grad_fn), _ = run_reading(backend, f, (x,))
        return linked(x, grad_fn, y, link.guard(f, grad_fn))

    def walked(x):
        start = hidden_inputs.next_node_number()
        (y, grad_fn), _ = run_reading(backend, f, (x,))
        hidden_inputs.hidden_tensors([y], (x,), (), start, f)
        return linked(x, grad_fn, y, link.guard(f, grad_fn))

    steps = [impls.implementations()["floor"]["softplus"], as_written, link_function,
             positional_link, guarded, reading, walked,
             lambda x: fast_path.call_positional(f, (x,)), customgrad_softplus]
    return {row: impls.grad_step(fn, 1) for (row, _), fn in zip(TORCH_ROWS, steps, strict=True)}


def _tensorflow_rows() -> dict:
    import impls

    implementations = impls.implementations()
    return {kind: impls.grad_step(implementations[kind]["softplus"], 1)
            for kind in ("keras", "native", "customgrad")}


def _rows() -> dict:
    import keras

    return _torch_rows() if keras.backend.backend() == "torch" else _tensorflow_rows()


def _inputs():
    import bench_backend

    return bench_backend.inputs(8, 1)


def frames_by_module(step, xs) -> collections.Counter:
    """{module: calls} of customgrad's own Python functions during one `step(*xs)`, counted by
    tests/python/test_call_count.py's `customgrad_frames` (the count the test pins)."""
    sys.path.insert(0, str(HERE.parent / "tests" / "python"))
    from test_call_count import customgrad_frames

    counts = collections.Counter()
    for where, n in customgrad_frames(step, xs).items():
        counts[where.split(":")[0]] += n
    return counts


def timed_worker(rounds: int) -> None:
    """Prints each row's median time (microseconds per step), rounds interleaved."""
    import keras

    rows, xs = _rows(), _inputs()
    for step in rows.values():
        for _ in range(200):
            step(*xs)
    times = collections.defaultdict(list)
    for _ in range(rounds):
        for row, step in rows.items():
            start = time.perf_counter()
            for _ in range(200):
                step(*xs)
            times[row].append((time.perf_counter() - start) / 200 * 1e6)
    median = {row: statistics.median(v) for row, v in times.items()}
    _print_table(keras.backend.backend(), median, "us", f"median of {rounds} interleaved rounds")
    frames = frames_by_module(rows["customgrad"], xs)
    print(f"\ncustomgrad's Python functions entered per step: {sum(frames.values())} "
          f"({', '.join(f'{m} {n}' for m, n in sorted(frames.items()))})")


def steps_worker(row: str, steps: int) -> None:
    """Runs `steps` steps of `row` (after 50 to warm up), for cachegrind."""
    step, xs = _rows()[row], _inputs()
    for _ in range(50 + steps):
        step(*xs)


def _print_table(backend: str, values: dict, unit: str, how: str) -> None:
    print(f"## {backend}: one eager forward + backward of softplus on 8 elements ({unit}, {how})\n")
    buys = dict(TORCH_ROWS) if backend == "torch" else {}
    base = values.get("design floor") or values["keras"]
    print(f"| row | {unit} | piece | / {'design floor' if 'design floor' in values else 'keras'}"
          " | what the piece buys |")
    print("| --- | --- | --- | --- | --- |")
    previous = None
    for row, value in values.items():
        piece = "" if previous is None else f"{value - previous:+,.1f}"
        print(f"| {row} | {value:,.1f} | {piece} | {value / base:.3f}x | {buys.get(row, '')} |")
        previous = value if buys else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="torch", choices=["torch", "tensorflow"])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions with cachegrind (torch; needs valgrind)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "timed":
        timed_worker(args.rounds)
        return
    if args.worker:
        steps_worker(args.worker, args.steps)
        return
    from run import PINNED_ENV  # pins every framework to one thread

    if not args.instructions:
        env = {**os.environ, **PINNED_ENV, "KERAS_BACKEND": args.backend}
        subprocess.run([sys.executable, __file__, "--worker", "timed", "--rounds",
                        str(args.rounds)], env=env, check=True)
        return
    if args.backend != "torch":
        parser.error("--instructions builds the torch table")
    from instructions import per_step

    package = str(HERE.parent / "python")
    rows = [row for row, _ in TORCH_ROWS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = pool.map(lambda row: per_step(package, "torch", row, __file__, 100, 400), rows)
        _print_table("torch", dict(zip(rows, counts, strict=True)), "instructions",
                     "cachegrind, (400 - 100 steps) / 300")


if __name__ == "__main__":
    main()
