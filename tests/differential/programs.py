"""The generator: `program(seed, index)` describes one random custom-gradient program as plain
JSON data, the same for every (seed, index) on every machine.

A program is `f(*args, **kwargs)` returning `(output, grad_fn)`. Each output leaf j is
`reduce_j(op_j(z_j))` with `z_j = sum(c * leaf for each term) + offset`, where the terms are
floating-point leaves of the arguments (broadcast together) and the offset collects the
constants: integer leaves, keyword arguments and a `keras.Variable` f reads. grad_fn returns the
exact gradient times `scale` (a constant other than 1), so a test sees that the custom rule, not
autodiff, gave it. A `fault` makes the program wrong on purpose (grad_fn's signature, what f or
grad_fn returns, what is differentiated): the expected outcome is then the documented error.
`truth.py` computes every expected outcome in numpy float64 from this description alone.

>>> p = program(0, 7)
>>> p == program(0, 7) and p["id"]
'0:7'
"""

import math
import random

OPS = ("identity", "sin", "tanh", "exp", "square", "softplus", "sigmoid")
SECOND_ORDER_OPS = ("sin", "tanh", "exp", "square", "softplus")
REDUCTIONS = ("none", "none", "sum", "mean")
BASE_SHAPES = ((), (3,), (2, 3))
# leaf shapes that broadcast with each base shape (few distinct shapes: torch.compile and
# jax.jit compile once per shape)
VARIANTS = {(): [()], (3,): [(), (3,), (1,)], (2, 3): [(), (3,), (2, 3), (1, 3), (2, 1)]}
FLOAT_KINDS = ("tensor", "pyfloat", "npscalar", "nparray")
# What grad_fn's signature is, by name; runner.GRAD_FNS makes each. The ones after "kwargs"
# receive no variables; "too_many" and "required_keyword" break the upstream rule.
SIGNATURES = ("dy", "positional", "star", "upstream_only", "upstream_named", "star_upstream",
              "star_upstream_required", "dy_variables", "star_variables", "kwargs",
              "callable_object")
TAKES_VARIABLES = ("dy_variables", "star_variables", "kwargs")
RETURNS = ("structure", "structure", "list", "flat", "none_leaf", "none_all")
MODES = ("grad", "value_and_grad", "vjp", "native")
COMPILED_MODES = ("compiled_api", "compiled_native", "native_of_compiled")
SECOND_MODES = ("second", "second_native")
# the share of programs compiled: torch.compile takes seconds a program
COMPILE_RATE = 0.02
# Modes that differentiate every floating-point leaf (customgrad's own API converts Python
# floats and numpy values); the others differentiate the float tensors only.
API_MODES = ("grad", "value_and_grad", "vjp", "second")
FAULTS = ("not_a_pair", "grad_fn_not_callable", "too_many", "required_keyword",
          "variables_not_accepted", "extra_gradients", "wrong_shape", "string_gradient",
          "variable_count", "int_argnum", "keyword_differentiated")


def program(seed: int, index: int, compile_rate: float = COMPILE_RATE) -> dict:
    """The description of program `index` of run `seed` (a JSON-serialisable dict)."""
    rng = random.Random(f"{seed}:{index}")
    mode = _pick_mode(rng, compile_rate)
    if mode in SECOND_MODES:
        p = _second_order_program(rng)
    else:
        p = _first_order_program(rng, mode)
    p.update(id=f"{seed}:{index}", seed=seed, index=index, mode=mode,
             scale=rng.choice([2.0, -0.5, 3.0, 0.25]))
    return p


def _pick_mode(rng, compile_rate):
    r = rng.random()
    if r < compile_rate:
        return rng.choice(COMPILED_MODES)
    if r < compile_rate + 0.08:
        return rng.choice(SECOND_MODES)
    return rng.choice(MODES)


def _first_order_program(rng, mode) -> dict:
    base = rng.choice(BASE_SHAPES)
    leaves, args = [], []
    n_args = rng.choice([0, 1, 1, 2, 2, 3, 4])
    if n_args == 0 and mode != "native":
        n_args = 1  # f without arguments reads a variable: only a tape or backward() sees it
    for position in range(n_args):
        args.append(_argument(rng, leaves, base, depth=0, first=position == 0))
    kwargs = {}
    for name in rng.sample(["alpha", "beta"], rng.randint(0, 2)):
        kwargs[name] = rng.choice([
            {"kind": "pyfloat", "value": _value(rng, ())},
            {"kind": "tensor", "dtype": "float32", "shape": [3], "values": _value(rng, (3,))},
        ])
    variable = None
    if n_args == 0 or rng.random() < 0.15:
        shape = rng.choice(VARIANTS[base])
        variable = {"shape": list(shape), "values": _value(rng, shape)}
    float_leaves = [i for i, leaf in enumerate(leaves) if leaf["kind"] in FLOAT_KINDS]
    p = {"leaves": leaves, "args": args, "kwargs": kwargs, "variable": variable}
    p["output"], p["outputs"] = _outputs(rng, float_leaves, variable)
    p["signature"] = rng.choice(SIGNATURES)
    if variable is not None and p["signature"] not in TAKES_VARIABLES and rng.random() < 0.8:
        p["signature"] = rng.choice(TAKES_VARIABLES)  # mostly right; else the fault below
    p["returns"] = rng.choice(RETURNS)
    p["fault"] = _fault(rng, p, mode)
    if p["fault"] == "int_argnum":
        # an argument holding only an integer, which customgrad.grad refuses to differentiate
        leaves.append({"kind": rng.choice(["pyint", "inttensor"]), "dtype": "int32",
                       "shape": [], "values": rng.randint(-3, 3)})
        args.append({"leaf": len(leaves) - 1})
    return p


def _argument(rng, leaves, base, depth, first=False):
    """One positional argument: a leaf, or (below depth 2) a tuple, list or dict of them. The
    first argument starts with a float tensor, so every mode has something to differentiate."""
    kind = "leaf" if first or depth == 2 else rng.choice(["leaf", "leaf", "tuple", "list", "dict"])
    if kind == "leaf":
        leaves.append(_leaf(rng, base, tensor=first))
        return {"leaf": len(leaves) - 1}
    if kind == "dict":
        keys = sorted(rng.sample(["a", "b", "c"], rng.randint(1, 3)))
        return {"dict": {k: _argument(rng, leaves, base, depth + 1) for k in keys}}
    return {kind: [_argument(rng, leaves, base, depth + 1) for _ in range(rng.randint(1, 3))]}


def _leaf(rng, base, tensor=False) -> dict:
    kind = "tensor" if tensor else rng.choice(
        ["tensor"] * 5 + ["pyfloat", "npscalar", "nparray", "pyint", "inttensor"])
    shape = rng.choice(VARIANTS[base]) if kind in ("tensor", "nparray", "inttensor") else ()
    dtype = rng.choice(["float32", "float32", "float64"])
    if kind == "pyfloat":
        dtype = "float32"  # a Python float becomes a float32 tensor (Keras's floatx)
    if kind in ("pyint", "inttensor"):
        return {"kind": kind, "dtype": "int32", "shape": list(shape),
                "values": _ints(rng, shape)}
    return {"kind": kind, "dtype": dtype, "shape": list(shape), "values": _value(rng, shape)}


def _value(rng, shape):
    # multiples of 1/1024: exact in float32, so a Python float is the same number in every
    # dtype (Keras's torch backend rounds a Python float to float32 before it multiplies a
    # float64 tensor by it)
    if not shape:
        return rng.randint(-1536, 1536) / 1024
    return [_value(rng, shape[1:]) for _ in range(shape[0])]


def _ints(rng, shape):
    if not shape:
        return rng.randint(-3, 3)
    return [_ints(rng, shape[1:]) for _ in range(shape[0])]


def _outputs(rng, float_leaves, variable):
    """The output structure and its leaves. The first leaf is always a tensor the loss reads, so
    grad_fn runs; others may be unused by the loss (their upstream is zeros), None, or a Python
    float f returns (a constant output)."""
    outputs = []

    def leaf(first=False):
        kind = "tensor" if first else rng.choice(["tensor"] * 6 + ["none", "const"])
        out = {"kind": kind}
        if kind == "tensor":
            terms = rng.sample(float_leaves, rng.randint(min(1, len(float_leaves)),
                                                         min(3, len(float_leaves))))
            out.update(op=rng.choice(OPS), reduce=rng.choice(REDUCTIONS),
                       terms=[[i, rng.choice([1.0, -1.0, 0.5, 2.0])] for i in terms],
                       var_coef=None if variable is None else rng.choice([1.0, -2.0]),
                       used=first or rng.random() < 0.8)
        elif kind == "const":
            out.update(value=1.5, used=rng.random() < 0.5)
        outputs.append(out)
        return {"out": len(outputs) - 1}

    top = rng.choice(["single", "single", "tuple", "tuple", "list", "dict", "nested"])
    if top == "single":
        return leaf(first=True), outputs
    if top == "dict":
        keys = sorted(rng.sample(["p", "q", "r"], rng.randint(1, 3)))
        return {"dict": {k: leaf(first=i == 0) for i, k in enumerate(keys)}}, outputs
    items = [leaf(first=True)] + [leaf() for _ in range(rng.randint(0, 2))]
    if top == "nested":
        items.append({"dict": {"s": leaf()}} if rng.random() < 0.5 else {"list": [leaf(), leaf()]})
        top = "tuple"
    return {top: items}, outputs


def _fault(rng, p, mode):
    """At most one deliberate fault (None for a right program, about three in four)."""
    variable_read = p["variable"] is not None
    if variable_read and p["signature"] not in TAKES_VARIABLES:
        return "variables_not_accepted"
    if rng.random() < 0.75:
        return None
    choices = ["not_a_pair", "grad_fn_not_callable", "too_many", "required_keyword",
               "extra_gradients"]
    if p["args"]:
        choices += ["wrong_shape", "string_gradient"]  # in the gradient of leaf 0
    if variable_read:
        choices.append("variable_count")
    if mode in ("grad", "value_and_grad"):
        choices.append("int_argnum")
    if mode in ("grad", "value_and_grad", "native", "native_of_compiled") and p["args"]:
        choices.append("keyword_differentiated")
    fault = rng.choice(choices)
    if fault in ("too_many", "required_keyword"):
        p["signature"] = fault
    return fault


def _second_order_program(rng) -> dict:
    """One float tensor x, one output `reduce(op(c * x))`, a right grad_fn: its gradient's
    gradient comes from grad_fn's own (differentiable) ops."""
    shape = rng.choice(BASE_SHAPES)
    leaves = [{"kind": "tensor", "dtype": rng.choice(["float32", "float64"]),
               "shape": list(shape), "values": _value(rng, shape)}]
    outputs = [{"kind": "tensor", "op": rng.choice(SECOND_ORDER_OPS),
                "reduce": rng.choice(REDUCTIONS), "terms": [[0, rng.choice([1.0, -1.0, 0.5])]],
                "var_coef": None, "used": True}]
    return {"leaves": leaves, "args": [{"leaf": 0}], "kwargs": {}, "variable": None,
            "output": {"out": 0}, "outputs": outputs,
            "signature": rng.choice(["dy", "star", "upstream_only", "dy_variables"]),
            "returns": rng.choice(["structure", "flat"]), "fault": None,
            "second_weights": _value(rng, shape)}


def loss_weights(shape, j: int):
    """The weights of output leaf j in the loss `sum_j sum(w_j * out_j)` (nested lists): the
    upstream gradient it receives, different in every element so that a mixed-up upstream
    shows."""
    size = 1
    for n in shape:
        size *= n
    flat = [round(1024 * (1.0 + 0.5 * math.sin(k + 3 * j))) / 1024 for k in range(size)]
    return _nest(flat, list(shape))


def _nest(flat, shape):
    if not shape:
        return flat[0]
    step = len(flat) // shape[0]
    return [_nest(flat[k * step:(k + 1) * step], shape[1:]) for k in range(shape[0])]


def float_leaves(p: dict) -> list:
    """Indices of the floating-point leaves (tensors, Python floats, numpy values)."""
    return [i for i, leaf in enumerate(p["leaves"]) if leaf["kind"] in FLOAT_KINDS]


def none_leaf(p: dict):
    """The leaf whose gradient grad_fn returns as None with `returns="none_leaf"`: the last
    floating-point one (its gradient is then zero); None if there is none."""
    found = float_leaves(p)
    return found[-1] if found else None


def differentiated(p: dict) -> list:
    """Indices of the leaves the program's mode differentiates."""
    kinds = FLOAT_KINDS if p["mode"] in API_MODES else ("tensor",)
    found = [i for i, leaf in enumerate(p["leaves"])
             if leaf["kind"] in kinds and leaf["dtype"].startswith("float")]
    if p["mode"] in API_MODES:
        # customgrad.grad takes the arguments that hold a float (and, as a fault, an int one)
        wanted = set(argnums(p))
        found = [i for i in found if _arg_of_leaf(p, i) in wanted]
    return found


def argnums(p: dict) -> list:
    """The positional arguments customgrad.grad differentiates: those holding a float leaf,
    and the integer-only argument the `int_argnum` fault adds."""
    nums = []
    for position, arg in enumerate(p["args"]):
        kinds = {p["leaves"][i]["kind"] for i in arg_leaves(arg)}
        if kinds & set(FLOAT_KINDS) or (p["fault"] == "int_argnum"
                                        and position == len(p["args"]) - 1):
            nums.append(position)
    return nums


def arg_leaves(node) -> list:
    """The leaf indices below an argument node, in flattening order (dict keys sorted)."""
    if "leaf" in node:
        return [node["leaf"]]
    if "dict" in node:
        return [i for k in sorted(node["dict"]) for i in arg_leaves(node["dict"][k])]
    (children,) = [node[k] for k in ("tuple", "list") if k in node]
    return [i for child in children for i in arg_leaves(child)]


def _arg_of_leaf(p, leaf_index):
    for position, arg in enumerate(p["args"]):
        if leaf_index in arg_leaves(arg):
            return position
    raise ValueError(f"leaf {leaf_index} is in no argument")
