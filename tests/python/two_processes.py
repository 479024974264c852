"""Runs a test file as a script in two (or more) processes at once, one per mode, and reads the
JSON each prints: the pattern of the client tests, whose native and customgrad values need
separate processes (a client decorates with tf.custom_gradient when it is imported, so the
patch must come before the import)."""

from __future__ import annotations

import json
import subprocess
import sys


def run_modes(script: str, modes, marker: str, env: dict, timeout: float) -> dict:
    """{mode: the JSON after `marker` on the output of `python script mode`}, the processes run
    at once; a failed one is an AssertionError with its stderr's end."""
    processes = {mode: subprocess.Popen([sys.executable, script, mode], env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for mode in modes}
    results = {}
    try:
        for mode, process in processes.items():
            out, err = process.communicate(timeout=timeout)
            assert process.returncode == 0, f"{mode} run failed:\n{err[-4000:]}"
            line = next(line for line in out.splitlines() if line.startswith(marker + " "))
            results[mode] = json.loads(line.removeprefix(marker + " "))
    finally:
        for process in processes.values():
            if process.poll() is None:  # the other one, when one failed or timed out
                process.kill()
                process.wait()
    return results
