"""The differential test: runs the same random custom-gradient programs on every Keras backend
(one runner process each, two at a time), compares each with the numpy float64 truth and with
the other backends, and prints every difference with the command that reproduces it.

    python tests/differential/driver.py --seed 0 --count 300
    python tests/differential/driver.py --seed 0 --index 17 --backend torch   # one program

A difference is documented when a row of the table in docs/backend-differences.md names the
program's case (its id: tags that must all be present, see `tags`) and the backend; a known
customgrad defect when KNOWN_DEFECTS names it. Either is printed and does not fail the run;
any other difference makes the exit status 1.
"""

import argparse
import importlib.util
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from programs import COMPILE_RATE, program  # noqa: E402
from truth import expected, output_dtype  # noqa: E402

BACKENDS = runpy.run_path(os.path.join(ROOT, "python", "customgrad", "_backend_names.py"))[
    "AUTODIFF"]
DIFFERENCES_PAGE = os.path.join(ROOT, "docs", "backend-differences.md")
TOLERANCE = {"float32": (2e-4, 2e-5), "float64": (1e-9, 1e-11)}  # (rtol, atol)

# customgrad defects this test found and not fixed yet: case id (tags, as in the differences
# table) -> the backends it shows on. Reported as "known defect", not failing; an entry goes when
# its fix lands (the four this test found first are fixed: tests/python/test_same_everywhere.py).
KNOWN_DEFECTS: dict = {}


def tags(p: dict) -> set:
    """The features of a program that a documented difference or a known defect is keyed on."""
    found = {p["mode"], p["fault"] or "right", f"signature:{p['signature']}",
             f"returns:{p['returns']}"}
    kinds = {leaf["kind"] for leaf in p["leaves"]}
    found |= {f"leaf:{k}" for k in kinds}
    found |= {f"output:{out['kind']}" for out in p["outputs"]}
    for out in p["outputs"]:
        if out["kind"] == "tensor":
            found |= {f"op:{out['op']}", f"op:{out['op']}:{output_dtype(p, out)}"}
    if any(leaf["dtype"] == "float64" for leaf in p["leaves"]):
        found.add("float64")
    if p["variable"] is not None:
        found.add("variable")
    if p["kwargs"]:
        found.add("keywords")
    if not p["args"]:
        found.add("no-args")
    top = next(iter(p["output"]))
    found.add(f"output-top:{'leaf' if top == 'out' else top}")
    return found


def documented_rows(path: str = DIFFERENCES_PAGE) -> dict:
    """The table of docs/backend-differences.md: case id -> the backends it names."""
    rows = {}
    with open(path) as page:
        for line in page:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 4 and cells[0].startswith("`") and cells[0] != "`id`":
                rows[cells[0].strip("`")] = set(re.findall(r"[a-z]+", cells[1]))
    return rows


def allowed(table: dict, p: dict, backend: str):
    """The first row id of `table` that matches program p on `backend`, else None."""
    present = tags(p)
    for case, backends in table.items():  # a case id: tags joined by "+", all present
        if backend in backends and set(case.split("+")) <= present:
            return case
    return None


def _close(a, b, dtype) -> bool:
    import numpy as np
    rtol, atol = TOLERANCE.get(dtype, TOLERANCE["float32"])
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def tolerance_dtype(p: dict) -> str:
    """float64 where every value the program computes with is float64, else float32."""
    all64 = all(leaf["dtype"] != "float32" for leaf in p["leaves"])
    return "float64" if all64 and not p["kwargs"] and p["variable"] is None else "float32"


def compare(p: dict, want: dict, got: dict) -> list:
    """What differs between an outcome `got` and the expected outcome `want` (empty: none)."""
    name = f"program_{p['seed']}_{p['index']}"
    if want["error"] or got["error"]:
        if want["error"] != got["error"]:
            return [f"expected {want['error'] or 'no error'}, got {got['error']}: "
                    f"{(got.get('message') or '').splitlines()[0][:300] if got['error'] else ''}"]
        if got["error"] in ("CustomGradientError", "GradFnArityError", "GradFnResultError") \
                and name not in got["message"]:
            return [f"the message does not name `{name}`: {got['message'][:300]}"]
        return []
    problems = []
    loose = tolerance_dtype(p)
    for j, (w, g) in enumerate(zip(want["values"], got["values"])):
        if (w is None) != (g is None) or (w is not None and not _close(w, g, loose)):
            problems.append(f"output leaf {j}: expected {w}, got {g}")
    for what in ("value_dtypes", "grad_dtypes"):
        if want[what] != got[what]:
            problems.append(f"{what}: expected {want[what]}, got {got[what]}")
    for i, (w, g) in enumerate(zip(want["grads"], got["grads"])):
        if (w is None) != (g is None) or (w is not None and not _close(w, g, loose)):
            problems.append(f"gradient of leaf {i}: expected {w}, got {g}")
    if got.get("loss") is not None and not _close(want["loss"], got["loss"], loose):
        problems.append(f"loss: expected {want['loss']}, got {got['loss']}")
    if "var_grad" in got and not _close(want["var_grad"], got["var_grad"], loose):
        problems.append(f"variable gradient: expected {want['var_grad']}, got {got['var_grad']}")
    return problems


def run_backend(backend: str, seed: int, start: int, stop: int, compile_rate: float) -> list:
    """The runner's records for one backend, from its own process."""
    began = time.monotonic()
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=os.path.join(ROOT, "python"),
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    command = [sys.executable, os.path.join(HERE, "runner.py"), "--seed", str(seed), "--start",
               str(start), "--stop", str(stop), "--compile-rate", str(compile_rate)]
    with tempfile.NamedTemporaryFile("r", suffix=f"-{backend}.jsonl") as out:
        try:  # a hung program must not hang the run: what was written until then is read
            proc = subprocess.run(command + ["--out", out.name], env=env, capture_output=True,
                                  text=True, timeout=120 + 10 * (stop - start))
            if proc.returncode != 0:
                print(f"runner for {backend} exited with {proc.returncode}:\n"
                      f"{proc.stderr[-3000:]}")
        except subprocess.TimeoutExpired:
            print(f"runner for {backend} timed out")
        records = [json.loads(line) for line in out if line.endswith("\n")]
    print(f"ran {len(records)} programs on {backend} in {time.monotonic() - began:.0f} s")
    return records


def available(backends: list) -> list:
    found = []
    for backend in backends:
        if importlib.util.find_spec(backend) is None:
            print(f"skipped {backend}: it is not installed here")
        else:
            found.append(backend)
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=300, help="programs per backend")
    parser.add_argument("--start", type=int, default=0, help="the first program's index")
    parser.add_argument("--index", type=int, help="run this one program and show it in full")
    parser.add_argument("--backend", action="append", choices=BACKENDS,
                        help="a backend to run (repeatable; default: every one installed)")
    parser.add_argument("--compile-rate", type=float, default=COMPILE_RATE,
                        help="the share of programs compiled (jax.jit, tf.function, torch.compile)")
    a = parser.parse_args(argv)
    start, stop = (a.index, a.index + 1) if a.index is not None else (a.start, a.start + a.count)
    backends = available(a.backend or BACKENDS)
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(backends, pool.map(
            lambda b: run_backend(b, a.seed, start, stop, a.compile_rate), backends)))
    return report(a, runs, start, stop, time.monotonic() - began)


def report(a, runs: dict, start: int, stop: int, seconds: float) -> int:
    """Prints the differences and the summary; returns the exit status."""
    table = documented_rows()
    counts = {b: {"run": 0, "agree": 0, "documented": 0, "known defect": 0, "different": 0}
              for b in runs}
    by_id = {b: {r["id"]: r for r in records} for b, records in runs.items()}
    failed = False
    for index in range(start, stop):
        p = program(a.seed, index, a.compile_rate)
        want = expected(p)
        if a.index is not None:
            print(json.dumps({"program": p, "expected": want}, indent=1))
        outcomes = {}
        for backend in runs:
            got = by_id[backend].get(p["id"])
            if got is None:
                print(f"[{backend}] {p['id']}: no record (the runner stopped)")
                failed = True
                continue
            if a.index is not None:
                print(json.dumps(got, indent=1))
            counts[backend]["run"] += 1
            outcomes[backend] = got.get("error") or "values"
            problems = compare(p, want, got)
            kind = "agree" if not problems else _classify(table, p, backend)
            counts[backend][kind] += 1
            failed |= kind == "different"
            rate = "" if a.compile_rate == COMPILE_RATE else f" --compile-rate {a.compile_rate}"
            for problem in problems:
                print(f"[{backend}] {p['id']} {p['mode']} ({kind}): {problem}\n    reproduce: "
                      f"python tests/differential/driver.py --seed {a.seed} --index {index} "
                      f"--backend {backend}{rate}")
        if len(set(outcomes.values())) > 1:
            print(f"    {p['id']}: the backends differ: "
                  + ", ".join(f"{b}={o}" for b, o in outcomes.items()))
    for backend, c in counts.items():
        print(f"{backend}: " + ", ".join(f"{v} {k}" for k, v in c.items()))
    total = sum(c["run"] for c in counts.values())
    print(f"differential: seed {a.seed}, programs {start}..{stop - 1}, {total} runs on "
          f"{len(runs)} backends in {seconds:.0f} s: "
          + ("UNDOCUMENTED DIFFERENCES" if failed else "no undocumented difference"))
    return 1 if failed else 0


def _classify(table, p, backend) -> str:
    # known defects first: a program can match both, and the defect is the news
    if allowed(KNOWN_DEFECTS, p, backend):
        return "known defect"
    if allowed(table, p, backend):
        return "documented"
    return "different"


if __name__ == "__main__":
    sys.exit(main())
