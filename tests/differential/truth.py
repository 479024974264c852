"""The expected outcome of a program, computed in numpy float64 from its description alone (no
Keras, no customgrad): the values of its outputs, the loss, the gradient of every leaf, or the
error the docs promise for its fault.

>>> from programs import program
>>> sorted(expected(program(0, 1)))
['error', 'grad_dtypes', 'grads', 'loss', 'value_dtypes', 'values', 'var_grad']
"""

import numpy as np

from programs import differentiated, loss_weights, none_leaf

# f(z), f'(z), f''(z) of each op of the vocabulary
OPS = {
    "identity": (lambda z: z, lambda z: np.ones_like(z), lambda z: np.zeros_like(z)),
    "sin": (np.sin, np.cos, lambda z: -np.sin(z)),
    "tanh": (np.tanh, lambda z: 1 - np.tanh(z) ** 2,
             lambda z: -2 * np.tanh(z) * (1 - np.tanh(z) ** 2)),
    "exp": (np.exp, np.exp, np.exp),
    "square": (lambda z: z * z, lambda z: 2 * z, lambda z: np.full_like(z, 2.0)),
    "softplus": (lambda z: np.logaddexp(0, z), lambda z: _sigmoid(z),
                 lambda z: _sigmoid(z) * (1 - _sigmoid(z))),
    "sigmoid": (lambda z: _sigmoid(z), lambda z: _sigmoid(z) * (1 - _sigmoid(z)),
                lambda z: _sigmoid(z) * (1 - _sigmoid(z)) * (1 - 2 * _sigmoid(z))),
}
# the exception each fault is documented to raise (docs/convention.md, docs/gradients.md)
FAULT_ERRORS = {"int_argnum": "TypeError", "too_many": "GradFnArityError",
                "required_keyword": "GradFnArityError", "extra_gradients": "GradFnResultError",
                "wrong_shape": "GradFnResultError", "string_gradient": "GradFnResultError",
                "variable_count": "GradFnResultError"}
DEFAULT_FAULT_ERROR = "CustomGradientError"


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def leaf_value(leaf) -> np.ndarray:
    """A leaf's value as the backend holds it (rounded to its dtype), in float64."""
    return np.asarray(leaf["values"], dtype=leaf["dtype"]).astype(np.float64)


def unbroadcast(g, shape):
    """The sum of `g` over the axes broadcasting added to `shape`."""
    g = np.sum(g, axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return np.sum(g, axis=axes, keepdims=True) if axes else g


def offset(p) -> float:
    """What the integer leaves and the keyword arguments add to every z (constants)."""
    total = sum(0.125 * float(np.sum(leaf["values"])) for leaf in p["leaves"]
                if leaf["kind"] in ("pyint", "inttensor"))
    for kw in p["kwargs"].values():
        total += kw["value"] if kw["kind"] == "pyfloat" else 0.125 * float(np.sum(kw["values"]))
    return total


def z_of(p, out):
    """z of one tensor output: the sum of its terms, the variable's and the offset."""
    z = np.float64(offset(p))
    for i, c in out["terms"]:
        z = z + c * leaf_value(p["leaves"][i])
    if out["var_coef"] is not None:
        z = z + out["var_coef"] * np.asarray(p["variable"]["values"], "float32").astype(float)
    return np.asarray(z, dtype=np.float64)


def output_dtype(p, out) -> str:
    if out["kind"] == "const":
        return "float32"
    dtypes = {p["leaves"][i]["dtype"] for i, _ in out["terms"]}
    return "float64" if "float64" in dtypes else "float32"


def expected(p: dict) -> dict:
    """What every backend must give for program `p`."""
    result = {"error": None, "values": [], "value_dtypes": [], "loss": 0.0,
              "grads": [None] * len(p["leaves"]), "grad_dtypes": [None] * len(p["leaves"]),
              "var_grad": None}
    if p["fault"]:
        result["error"] = FAULT_ERRORS.get(p["fault"], DEFAULT_FAULT_ERROR)
        return result
    grads = {i: np.zeros(p["leaves"][i]["shape"]) for i in differentiated(p)}
    var_grad = None if p["variable"] is None else np.zeros(p["variable"]["shape"])
    for j, out in enumerate(p["outputs"]):
        if out["kind"] != "tensor":
            value = None if out["kind"] == "none" else out["value"]
            result["values"].append(value)
            result["value_dtypes"].append(None if value is None else "float32")
            if out.get("used") and value is not None:
                result["loss"] += value * loss_weights((), j)
            continue
        fn, d1, d2 = OPS[out["op"]]
        z = z_of(p, out)
        y = fn(z)
        w = np.asarray(loss_weights(z.shape if out["reduce"] == "none" else (), j))
        if out["reduce"] != "none":
            y = np.sum(y) / (z.size if out["reduce"] == "mean" else 1)
        result["values"].append(np.asarray(y).tolist())
        result["value_dtypes"].append(output_dtype(p, out))
        if not out["used"]:
            continue
        result["loss"] += float(np.sum(w * y))
        upstream = np.broadcast_to(w, z.shape) / (z.size if out["reduce"] == "mean" else 1)
        if p["mode"].startswith("second"):
            # the gradient of sum(u * dloss/dx): grad_fn's own derivative
            u = np.asarray(p["second_weights"])
            ((i, c),) = out["terms"]
            g1 = p["scale"] * c * d1(z) * upstream
            result["loss"] = float(np.sum(u * g1))
            grads[i] = p["scale"] * c * c * d2(z) * upstream * u
            continue
        gz = p["scale"] * upstream * d1(z)
        for i, c in out["terms"]:
            if i in grads:
                grads[i] = grads[i] + c * unbroadcast(gz, p["leaves"][i]["shape"])
        if var_grad is not None and out["var_coef"] is not None:
            var_grad = var_grad + out["var_coef"] * unbroadcast(gz, p["variable"]["shape"])
    for i, g in grads.items():
        zero = p["returns"] == "none_all" or (p["returns"] == "none_leaf" and i == none_leaf(p))
        result["grads"][i] = (np.zeros_like(g) if zero else g).tolist()
        result["grad_dtypes"][i] = p["leaves"][i]["dtype"]
    if var_grad is not None:
        result["var_grad"] = var_grad.tolist()
    return result
