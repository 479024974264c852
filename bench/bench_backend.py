"""Benchmarks one Keras backend (run by bench/run.py in its own process, threads pinned to one).

Prints one JSON object per line: {"metric", "fn", "kind", ...numbers or "error"}.
  eager_tiny      forward+backward per call on 8 elements, eager (microseconds)
  eager_large     forward+backward on N elements, eager (milliseconds)
  compiled_large  the same under jax.jit / tf.function(jit_compile=True) / torch.compile
  peak_memory     peak resident memory of one forward+backward on M elements above the memory
                  held before it (MiB; Linux VmHWM, reset through /proc/self/clear_refs)
  peak_memory_stack the same for a stack of DEPTH calls, each output feeding the next call: what
                  every layer holds for the backward adds up, as in a network
  retained_memory memory held between forward and backward (outputs + what autodiff keeps)
  compiled_program instructions in the optimized XLA program of the compiled forward+backward
                  (jax.jit, tf.function(jit_compile=True)): exact where timings are noisy
  remat_memory    peak memory of one forward+backward through DEPTH layers (impls.remat_layer),
                  each plain and each wrapped in customgrad.remat, measured as peak_memory is
Implementations are interleaved round by round; each number is a median with min and max.
"""

import argparse
import gc
import json
import os
import re
import statistics
import sys
import time

import numpy as np

# TensorFlow's default CPU allocator keeps no statistics; its BFC allocator does (peak, current).
# Set before TensorFlow is imported (by impls, through keras).
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import impls  # noqa: E402

KINDS = ["autodiff", "native", "keras", "customgrad"]
# timed in eager mode only: the native mechanism on the backend's own ops (no keras.ops dispatch)
EAGER_KINDS = KINDS + ["native_raw", "floor"]  # floor: torch only (see impls)
METRICS = ["eager_tiny", "eager_large", "compiled_large", "peak_memory", "peak_memory_stack",
           "retained_memory", "compiled_program", "remat_memory"]
DEPTH = 16  # calls in the stack of peak_memory_stack


def emit(**record):
    print(json.dumps(record), flush=True)


def inputs(n, count, seed=0):
    from keras import ops

    rng = np.random.default_rng(seed)
    return [ops.convert_to_tensor(rng.uniform(-3, 3, size=(n,)).astype("float32"))
            for _ in range(count)]


def make_steps(fn_name, compiled, n):
    """{kind: step callable or the error it raised on first use} for one function."""
    steps = {}
    xs = inputs(n, impls.N_INPUTS[fn_name])
    kinds = KINDS if compiled else EAGER_KINDS
    for kind, table in impls.implementations().items():
        if kind not in kinds:
            continue
        try:
            step = impls.grad_step(table[fn_name], impls.N_INPUTS[fn_name], compiled)
            reference = step(*xs)  # first call: compiles, and shows whether it works at all
            step(*xs)  # a second call: compilers may specialise again after the first
            steps[kind] = (step, reference)
        except Exception as e:  # recorded in the results ("fails: ..."), never hidden
            steps[kind] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return steps, xs


def check_agreement(steps):
    """Every working variant must give the gradients plain autodiff gives (where finite)."""
    from keras import ops

    ref = steps.get("autodiff")
    if isinstance(ref, str):
        return
    expected = [np.asarray(ops.convert_to_numpy(g)) for g in ref[1]]
    for kind, value in steps.items():
        if isinstance(value, str):
            continue
        got = [np.asarray(ops.convert_to_numpy(g)) for g in value[1]]
        for a, b in zip(got, expected):
            ok = np.isfinite(b)
            if not np.allclose(a[ok], b[ok], rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{kind} gives different gradients from plain autodiff")


def timed(metric, fn_name, compiled, n, rounds, calls, scale):
    steps, xs = make_steps(fn_name, compiled, n)
    check_agreement(steps)
    samples = {k: [] for k, v in steps.items() if not isinstance(v, str)}
    for _ in range(rounds):
        for kind in samples:  # interleaved: one batch of calls per implementation per round
            step = steps[kind][0]
            start = time.perf_counter()
            for _ in range(calls):
                step(*xs)
            samples[kind].append((time.perf_counter() - start) / calls * scale)
    for kind in steps:
        value = steps[kind]
        if isinstance(value, str):
            emit(metric=metric, fn=fn_name, kind=kind, error=value)
        else:
            s = samples[kind]
            emit(metric=metric, fn=fn_name, kind=kind, median=statistics.median(s), min=min(s),
                 max=max(s), n=n, rounds=[round(v, 3) for v in s])


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0  # MiB
    raise RuntimeError(f"{field} not in /proc/self/status")


def _tf_memory(field):
    """Bytes of TensorFlow's CPU allocator ('current' or 'peak')."""
    import tensorflow as tf

    try:
        return tf.config.experimental.get_memory_info("CPU:0")[field]
    except ValueError as e:  # the default allocator: no statistics
        raise RuntimeError(
            "not measurable: TensorFlow's CPU allocator keeps no statistics unless "
            f"TF_CPU_ALLOCATOR_USE_BFC=true is set before TensorFlow starts ({e})") from e


def _peak_of(step, xs):
    """MiB above what was held before, at the peak of one call: host memory (VmHWM), the CUDA
    allocator's peak when torch runs on a GPU, or TensorFlow's (BFC) CPU allocator's peak."""
    if impls.BACKEND == "tensorflow":
        import tensorflow as tf

        base = _tf_memory("current")
        tf.config.experimental.reset_memory_stats("CPU:0")
        result = step(*xs)
        peak = (_tf_memory("peak") - base) / 2**20
        del result
        return peak
    if impls.BACKEND == "torch":
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step(*xs)
            return (torch.cuda.max_memory_allocated() - base) / 2**20
    if impls.BACKEND == "jax":
        import jax

        if jax.devices()[0].platform != "cpu":
            raise RuntimeError("not measurable: jax has no resettable peak of GPU memory")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak (VmHWM) to the current resident size
    base = _status("VmRSS")
    result = step(*xs)
    peak = _status("VmHWM") - base
    del result
    return peak


def chain_of(fn, depth):
    """fn called `depth` times, each call's outputs feeding the next call (inputs beyond the
    outputs carried over): a stack of layers."""

    def chained(*xs):
        for _ in range(depth):
            out = fn(*xs)
            outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            xs = outs + xs[len(outs):]
        return out

    return chained


def peak_memory(fn_name, n, repeats=3, depth=1):
    metric = "peak_memory" if depth == 1 else "peak_memory_stack"
    table = impls.implementations()
    xs = inputs(n, impls.N_INPUTS[fn_name])
    for kind in KINDS:
        fn = table[kind][fn_name] if depth == 1 else chain_of(table[kind][fn_name], depth)
        try:
            step = impls.grad_step(fn, impls.N_INPUTS[fn_name])
            step(*inputs(64, impls.N_INPUTS[fn_name]))  # warm up on a tiny input
        except Exception as e:
            emit(metric=metric, fn=fn_name, kind=kind,
                 error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        peaks = []
        try:
            for _ in range(repeats):
                gc.collect()
                peaks.append(_peak_of(step, xs))
        except RuntimeError as e:
            emit(metric=metric, fn=fn_name, kind=kind, error=str(e))
            continue
        emit(metric=metric, fn=fn_name, kind=kind, median=statistics.median(peaks),
             min=min(peaks), max=max(peaks), n=n, depth=depth)


def remat_memory(n, repeats=3):
    """The peak memory of a DEPTH-deep stack of impls.remat_layer, plain and with customgrad.remat
    around each layer, interleaved round by round (the row shows what remat saves)."""
    layers = impls.remat_implementations()
    steps = {kind: impls.grad_step(chain_of(layer, DEPTH), 1) for kind, layer in layers.items()}
    small = inputs(64, 1)
    (expected,), (got,) = (steps[kind](*small) for kind in ("plain", "remat"))
    if not np.allclose(impls.ops.convert_to_numpy(got), impls.ops.convert_to_numpy(expected),
                       rtol=1e-5, atol=1e-6):
        raise AssertionError("customgrad.remat gives different gradients from the plain stack")
    xs = inputs(n, 1)
    peaks = {kind: [] for kind in steps}
    try:
        for _ in range(repeats):
            for kind, step in steps.items():
                gc.collect()
                peaks[kind].append(_peak_of(step, xs))
    except RuntimeError as e:  # not measurable here (jax on a GPU): recorded, never hidden
        for kind in steps:
            emit(metric="remat_memory", fn="remat_layer", kind=kind, error=str(e))
        return
    for kind, values in peaks.items():
        emit(metric="remat_memory", fn="remat_layer", kind=kind, median=statistics.median(values),
             min=min(values), max=max(values), n=n, depth=DEPTH)


def retained_memory(fn_name, n, repeats=3):
    """MiB held between the forward and the backward (outputs plus what autodiff keeps for the
    backward): what a custom gradient that recomputes instead of storing saves."""
    table = impls.implementations()
    xs = inputs(n, impls.N_INPUTS[fn_name])
    for kind in KINDS:
        if impls.BACKEND == "jax":
            _jax_retained(fn_name, kind, table[kind][fn_name], xs, n)
            continue
        try:
            run = impls.forward_holding_graph(table[kind][fn_name], impls.N_INPUTS[fn_name])
            run(*inputs(64, impls.N_INPUTS[fn_name]))
        except Exception as e:
            emit(metric="retained_memory", fn=fn_name, kind=kind,
                 error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        held = []
        for _ in range(repeats):
            gc.collect()
            if impls.BACKEND == "tensorflow":
                try:
                    base = _tf_memory("current")
                except RuntimeError as e:
                    emit(metric="retained_memory", fn=fn_name, kind=kind, error=str(e))
                    break
                kept = run(*xs)
                held.append((_tf_memory("current") - base) / 2**20)
            elif impls.BACKEND == "torch" and _cuda():
                import torch

                base = torch.cuda.memory_allocated()
                kept = run(*xs)
                held.append((torch.cuda.memory_allocated() - base) / 2**20)
            else:
                base = _status("VmRSS")
                kept = run(*xs)
                held.append(_status("VmRSS") - base)
            del kept
        if not held:
            continue
        emit(metric="retained_memory", fn=fn_name, kind=kind, median=statistics.median(held),
             min=min(held), max=max(held), n=n)


def _jax_retained(fn_name, kind, fn, xs, n):
    """Exact for jax: the bytes a compiled forward returns for the backward (outputs and VJP
    residuals), from XLA's memory analysis."""
    import jax

    loss = impls.loss_of(fn)
    try:
        compiled = jax.jit(lambda *v: jax.vjp(loss, *v)).lower(*xs).compile()
    except Exception as e:
        emit(metric="retained_memory", fn=fn_name, kind=kind,
             error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
        return
    mib = compiled.memory_analysis().output_size_in_bytes / 2**20
    emit(metric="retained_memory", fn=fn_name, kind=kind, median=mib, min=mib, max=mib, n=n)


def compiled_program(fn_name, n):
    """Counts the instructions of the optimized XLA program (HLO) of each variant's compiled
    forward+backward: if customgrad's program is no larger than the native mechanism's, the
    wrapper costs nothing once compiled, whatever the timings' noise."""
    table = impls.implementations()
    xs = inputs(n, impls.N_INPUTS[fn_name])
    for kind in KINDS:
        if impls.BACKEND not in ("jax", "tensorflow"):
            emit(metric="compiled_program", fn=fn_name, kind=kind,
                 error="not measurable: torch.compile has no single XLA program to count")
            continue
        try:
            text = _optimized_hlo(table[kind][fn_name], impls.N_INPUTS[fn_name], xs)
        except Exception as e:  # recorded in the results, never hidden
            emit(metric="compiled_program", fn=fn_name, kind=kind,
                 error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        opcodes = [m.group(1) for m in map(_HLO_OPCODE.search, text.splitlines()) if m]
        emit(metric="compiled_program", fn=fn_name, kind=kind, median=len(opcodes),
             min=len(opcodes), max=len(opcodes), n=n, opcodes=sorted(opcodes))


# `%name = f32[8]{0} exponential(f32[8]{0} %x), ...`: the word before the first "(" after " = "
_HLO_OPCODE = re.compile(r" = .*? ([a-z][a-z0-9-]*)\(")


def _optimized_hlo(fn, n_inputs, xs):
    loss = impls.loss_of(fn)
    if impls.BACKEND == "jax":
        import jax

        g = jax.jit(jax.grad(loss, argnums=tuple(range(n_inputs))))
        return g.lower(*xs).compile().as_text()
    import tensorflow as tf

    g = tf.function(impls.tape_gradient(loss), jit_compile=True)
    return g.experimental_get_compiler_ir(*xs)(stage="optimized_hlo")


def _cuda():
    import torch

    return torch.cuda.is_available()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smoke run: few rounds, small N")
    parser.add_argument("--large", type=int, default=22, help="log2 of the large input size")
    parser.add_argument("--memory", type=int, default=24, help="log2 of the memory input size")
    parser.add_argument("--stack-memory", type=int, default=22,
                        help="log2 of the input size of the peak_memory_stack metric")
    parser.add_argument("--remat-memory", type=int, default=20,
                        help="log2 of the input size of the remat_memory metric")
    parser.add_argument("--only", default=",".join(METRICS),
                        help="comma-separated metrics to run (default: all)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(METRICS):
        parser.error(f"--only: unknown metrics {sorted(only - set(METRICS))}; expected {METRICS}")
    quick = args.quick
    large = 2 ** (16 if quick else args.large)
    memory = 2 ** (16 if quick else args.memory)
    stack_memory = 2 ** (16 if quick else args.stack_memory)
    if "remat_memory" in only:
        remat_memory(2 ** (18 if quick else args.remat_memory), 1 if quick else 3)
    for fn_name in ("softplus", "swish", "three"):
        if "eager_tiny" in only:
            timed("eager_tiny", fn_name, False, 8, 3 if quick else 30, 20 if quick else 100, 1e6)
        if "eager_large" in only:
            timed("eager_large", fn_name, False, large, 2 if quick else 7, 1 if quick else 3, 1e3)
        if "compiled_large" in only:
            timed("compiled_large", fn_name, True, large, 2 if quick else 7, 1 if quick else 5,
                  1e3)
        if "peak_memory" in only:
            peak_memory(fn_name, memory, 1 if quick else 3)
        if "peak_memory_stack" in only:
            peak_memory(fn_name, stack_memory, 1 if quick else 3, depth=DEPTH)
        if "retained_memory" in only:
            retained_memory(fn_name, memory, 1 if quick else 3)
        if "compiled_program" in only:
            compiled_program(fn_name, 2 ** 10)


if __name__ == "__main__":
    main()
