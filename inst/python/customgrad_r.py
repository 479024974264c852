"""Glue between R (reticulate) and customgrad: array transfer as raw bytes, and custom gradients
whose forward and grad functions are R functions.

reticulate 1.28 cannot use numpy 2's C API, so arrays travel as bytes: R writes its column-major
doubles/ints with writeBin, Python reads them with np.frombuffer(order="F"), and back.
"""

from __future__ import annotations

import numpy as np
import keras

import customgrad

_R_READ = {"double": np.float64, "integer": np.int32, "logical": np.int32}


def from_r(buf, dims, rtype, dtype=None):
    """A tensor from the bytes of an R vector/array (column-major) with dimensions `dims`."""
    arr = np.frombuffer(buf, dtype=_R_READ[rtype])
    dims = tuple(int(d) for d in dims)
    arr = arr.reshape(dims, order="F")
    if dtype is None:
        dtype = {"double": keras.config.floatx(), "integer": "int32", "logical": "bool"}[rtype]
    if rtype == "logical":
        arr = arr != 0
    # One pass: column-major -> row-major and the cast to the target dtype.
    np_dtype = np.dtype("float32") if dtype == "bfloat16" else np.dtype(dtype)
    arr = np.array(arr, dtype=np_dtype, order="C")  # keeps 0-d arrays 0-d
    return keras.ops.convert_to_tensor(arr, dtype=dtype)


def to_r(x):
    """(bytes, shape, R type, dtype name) for a tensor, column-major as R stores arrays."""
    if isinstance(x, np.ndarray):
        arr = x
    else:
        arr = np.asarray(keras.ops.convert_to_numpy(x))
    dtype = str(arr.dtype)
    if arr.dtype.kind not in "biufc":  # bfloat16 and other ml_dtypes floats
        arr = arr.astype(np.float64)
    kind = arr.dtype.kind
    if kind == "b":
        rtype, arr = "logical", arr.astype(np.int32)
    elif kind in "iu" and arr.dtype.itemsize <= 4 and dtype != "uint32":
        rtype, arr = "integer", arr.astype(np.int32)
    elif kind in "iuf":
        rtype, arr = "double", arr.astype(np.float64)
    elif kind == "c":
        rtype, arr = "complex", arr.astype(np.complex128)
    else:
        raise TypeError(f"customgrad: cannot convert a tensor of dtype {dtype} to an R array")
    return bytearray(arr.tobytes(order="F")), [int(d) for d in arr.shape], rtype, dtype


def describe(x) -> str:
    """A short description of a tensor (for print): backend class, dtype and shape."""
    shape = tuple(getattr(x, "shape", ()))
    dtype = keras.backend.standardize_dtype(getattr(x, "dtype", None)) if hasattr(x, "dtype") else "?"
    backend = type(x).__module__.split(".")[0]
    return f"{backend} tensor, dtype={dtype}, shape={shape}"


def is_tensor(x) -> bool:
    return keras.ops.is_tensor(x) or isinstance(x, keras.Variable)


def custom_gradient(r_forward, name="f"):
    """customgrad.custom_gradient for an R forward.

    `r_forward(*args)` (an R function) returns a list [output, r_grad, wants_upstream];
    `r_grad(upstreams, upstream, variables)` (an R function) calls the user's R grad function
    according to its R formals. The Python grad_fn handed to customgrad has a fixed signature, so
    nothing depends on introspecting an R function from Python. `upstream` is passed to R only when
    the R grad function takes it: each tensor handed to R costs a conversion.
    """

    def forward(*args):
        output, r_grad, wants_upstream = r_forward(*args)

        def grad_fn(*upstreams, upstream=None, variables=None):
            return r_grad(upstreams, upstream if wants_upstream else None, variables)

        grad_fn.__name__ = grad_fn.__qualname__ = f"{name}.grad"
        return output, grad_fn

    forward.__name__ = forward.__qualname__ = name
    return customgrad.custom_gradient(forward)


def call(fn, args, kwargs):
    """Calls fn(*args, **kwargs) (used for ops with *args / **kwargs)."""
    return fn(*args, **kwargs)


def shape(x):
    """The static shape as a list of ints (None for unknown dimensions), on every backend."""
    return [None if d is None else int(d) for d in tuple(x.shape)]
