"""The function under `check_gradients`: its float tensor leaves and constants, evaluated as it is
(`call`), in float64 for finite differences (`call_float64`), and differentiated through
customgrad (`custom_vjp`, `custom_jvp`).

>>> import keras
>>> problem = Problem(lambda x: x * 2.0, (keras.ops.ones((2,)),), {})
>>> [a.tolist() for a in problem.call_float64([[1.0, 2.0]])]
[[2.0, 4.0]]
"""

from __future__ import annotations

import contextlib

import keras
import numpy as np
from keras.src.backend.common import dtypes as keras_dtypes

from . import _messages as msg, _tree
from ._autodiff import jvp, vjp
from ._core import backend_module

# Unit roundoff by dtype, for the noise of finite differences not computed in float64.
ROUNDING = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def as_float64_array(x) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(x), dtype=np.float64)


def dtype_name(x) -> str:
    return keras.backend.standardize_dtype(x.dtype)


class Problem:
    """The function and its arguments, split into float tensor leaves and constants."""

    def __init__(self, f, args, kwargs):
        self.f, self.args, self.kwargs = f, args, kwargs
        self.B = backend_module()
        self.leaves = _tree.flatten(args)
        self.paths = _tree.leaf_paths(args, "args")
        values = [self.B.tensor_value(leaf) for leaf in self.leaves]
        self.index = [i for i, v in enumerate(values) if v is not None and self.B.is_float(v)]
        if not self.index:
            raise msg.check_no_float_argument(f, args)
        for i in self.index:
            spec = self.B.spec(values[i])
            if spec.check_gradient is not None:  # a tf.RaggedTensor or tf.SparseTensor
                raise msg.check_composite_argument(self.paths[i], f, spec)
        self.values = [values[i] for i in self.index]
        self.dtype = widest([dtype_name(v) for v in self.values])
        self.fd_dtype = "float64"  # lowered if f's outputs at float64 inputs are not float64

    def call(self, diff_values, f=None):
        leaves = list(self.leaves)
        for i, v in zip(self.index, diff_values):
            leaves[i] = v
        return (f or self.f)(*_tree.unflatten(self.args, leaves), **self.kwargs)

    def call_float64(self, arrays, f=None):
        """f at float64 copies of the float leaves (numpy arrays), outputs as float64 numpy."""
        with self.B.float64_scope(), _keras_keeps_float64():
            tensors = [keras.ops.convert_to_tensor(a, dtype="float64") for a in arrays]
            out = _tree.flatten(self.call(tensors, f))
            for o in out:
                # Some Keras ops compute float64 inputs in float32 (on jax, ops.sin and others
                # promote with float32 scalars): finite differences then carry that noise.
                name = dtype_name(o)
                if ROUNDING.get(name, 0.0) > ROUNDING[self.fd_dtype]:
                    self.fd_dtype = name
            return [as_float64_array(o) for o in out]

    def custom_vjp(self, u_leaves, f=None):
        """J^T u through autodiff (custom gradients included), one numpy array per float leaf."""
        out, vjp_fn = vjp(lambda *v: self.call(v, f), *self.values)
        flat_out = _tree.flatten(out)
        cts = [keras.ops.convert_to_tensor(u, dtype=dtype_name(o)) for u, o in zip(u_leaves, flat_out)]
        grads = vjp_fn(_tree.unflatten(out, cts))
        return [np.zeros(v.shape) if g is None else as_float64_array(g) for g, v in zip(grads, self.values)]

    def custom_jvp(self, k, v, outs):
        """J v through customgrad.jvp (derived from grad_fn for a custom-gradient function) for
        the direction v (numpy) of float leaf k, one numpy array per output leaf."""
        tangents = [keras.ops.zeros_like(value) for value in self.values]
        tangents[k] = keras.ops.convert_to_tensor(v, dtype=dtype_name(self.values[k]))
        _, jv = jvp(lambda *values: self.call(values), tuple(self.values), tuple(tangents))
        return [np.zeros(o.shape) if t is None else as_float64_array(t)
                for t, o in zip(_tree.flatten(jv), outs)]


@contextlib.contextmanager
def _keras_keeps_float64():
    """Keras's type promotion caps float64 at float32 on jax and torch (so `ops.sin` of a
    float64 tensor is float32 there); lift the cap while finite differences are computed."""
    table = keras_dtypes.BIT64_TO_BIT32_DTYPE
    saved = table.get("float64")
    table["float64"] = "float64"
    try:
        yield
    finally:
        table["float64"] = saved


def widest(dtypes: list) -> str:
    for name in ("float64", "float32", "float16", "bfloat16"):
        if name in dtypes:
            return name
    return "float32"
