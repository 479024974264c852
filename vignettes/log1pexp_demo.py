"""The main walkthrough (`make demo`): log1pexp on jax, tensorflow and torch.

For each backend, in its own process (Keras fixes its backend per process), prints the value and
the gradient of log(1 + exp(x)) at x = 0, 10, 100: with customgrad's custom gradient, and with
plain autodiff of the same formula, which gives NaN at x = 100.
"""

import os
import runpy
import subprocess
import sys

# the one list of backends (customgrad/_backend_names.py), read without importing Keras here
AUTODIFF = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                       "customgrad", "_backend_names.py"))["AUTODIFF"]
X = [0.0, 10.0, 100.0]

PER_BACKEND = """
import keras, customgrad
from keras import ops

@customgrad.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(upstream):  # the same grad_fn on every backend
        return upstream * (1.0 - 1.0 / (1.0 + e))

    return ops.log(1.0 + e), grad

def plain(x):
    return ops.log(1.0 + ops.exp(x))

for x in {xs}:
    x = ops.convert_to_tensor(x)
    value = float(log1pexp(x))
    custom = float(customgrad.grad(log1pexp)(x))
    autodiff = float(customgrad.grad(plain)(x))
    stable = float(customgrad.ops.log1pexp(x))
    print(f"{{keras.backend.backend():<11}} {{float(x):>6.1f}} {{value:>12.6f}} {{custom:>16.6f}} "
          f"{{autodiff:>15.6f}} {{stable:>17.6f}}")
"""


def main() -> int:
    print("log1pexp(x) = log(1 + exp(x)); its gradient is sigmoid(x).\n")
    print(f"{'backend':<11} {'x':>6} {'value':>12} {'custom gradient':>16} {'plain autodiff':>15} "
          f"{'ops.log1pexp(x)':>17}")
    failed = []
    for backend in AUTODIFF:
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        proc = subprocess.run([sys.executable, "-c", PER_BACKEND.format(xs=X)], env=env,
                              capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            failed.append(backend)
            sys.stderr.write(proc.stderr)
    print("\nThe value at 100 overflows to inf in float32 (exp(100) > 3.4e38); the custom gradient "
          "is\nexactly 1.0 there on every backend, where plain autodiff computes inf/inf = nan.\n"
          "customgrad.ops.log1pexp computes the value stably too (max(x, 0) + log1p(exp(-|x|))).")
    if failed:
        print(f"demo failed on: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
