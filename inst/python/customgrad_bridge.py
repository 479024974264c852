"""The bridge between R (reticulate) and customgrad: array transfer as raw bytes, custom gradients
whose forward and grad functions are R functions.

reticulate 1.28 cannot use numpy 2's C API, so arrays travel as bytes: R writes its column-major
doubles/ints with writeBin, Python reads them with np.frombuffer(order="F"), and back.
"""

from __future__ import annotations

import numpy as np
import keras

import customgrad

_R_READ = {"double": np.float64, "integer": np.int32, "logical": np.int32,
           "complex": np.complex128}


def from_r_numpy(buf, dims, rtype):
    """A numpy array (float64, int32, bool or complex128) from the bytes of an R vector/array.

    This is what reticulate makes of an R array, and what keras3 hands to an op: keras keeps
    float64 where the backend has it (jax without x64 makes it float32).
    """
    arr = np.frombuffer(buf, dtype=_R_READ[rtype]).reshape(tuple(int(d) for d in dims), order="F")
    if rtype == "logical":
        arr = arr != 0
    return np.ascontiguousarray(arr)


def from_r(buf, dims, rtype, dtype=None):
    """A tensor from the bytes of an R vector/array (column-major) with dimensions `dims`."""
    arr = np.frombuffer(buf, dtype=_R_READ[rtype])
    dims = tuple(int(d) for d in dims)
    arr = arr.reshape(dims, order="F")
    if dtype is None and rtype == "complex":
        return keras.ops.convert_to_tensor(np.ascontiguousarray(arr))
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


def custom_gradient(r_forward, name="f", forward_mode=False):
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
    return customgrad.custom_gradient(forward, forward_mode=forward_mode)


def call(fn, args, kwargs):
    """Calls fn(*args, **kwargs) (used for ops with *args / **kwargs)."""
    return fn(*args, **kwargs)


def shape(x):
    """The static shape as a list of ints (None for unknown dimensions), on every backend."""
    return [None if d is None else int(d) for d in tuple(x.shape)]


# ---- subsetting with keras3's R semantics (op_subset, `[`): the key arrives 0-based --------------

def _is_basic(item) -> bool:
    return item is None or item is Ellipsis or isinstance(item, (int, slice))


def _is_static(item) -> bool:
    return _is_basic(item) or isinstance(item, np.ndarray)


def _is_bool(x) -> bool:
    return keras.backend.standardize_dtype(x.dtype) == "bool"


def _eager_to_numpy(item):
    """TensorFlow's eager index tensors as numpy (tf tensors have no advanced indexing)."""
    if type(item).__name__ == "EagerTensor":
        return item.numpy()
    return item


def _positions(x, key):
    """The flat (row-major) positions that key selects from x, or None if key or shape is dynamic."""
    key = tuple(_eager_to_numpy(k) for k in key)
    shape = tuple(x.shape)
    if any(d is None for d in shape) or not all(_is_static(k) for k in key):
        return None
    grid = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return np.asarray(grid[key])


def subset(x, key):
    """x[key] with numpy semantics on every backend (TensorFlow tensors lack advanced indexing)."""
    key = tuple(key)
    if all(_is_basic(k) for k in key):
        return x[key]
    if len(key) == 1 and keras.ops.is_tensor(key[0]) and _is_bool(key[0]):
        if type(x).__module__.startswith("tensorflow"):
            import tensorflow as tf
            return tf.boolean_mask(x, key[0])
        return x[key[0]]
    positions = _positions(x, key)
    if positions is None:
        return x[key]
    flat = keras.ops.reshape(x, (-1,))
    return keras.ops.take(flat, keras.ops.convert_to_tensor(positions.astype(np.int32)))


def subset_assign(x, key, value):
    """A copy of x with x[key] replaced by value (broadcast); a variable is assigned in place."""
    key = tuple(key)
    positions = _positions(x, key)
    if positions is None:
        if hasattr(x, "at"):  # jax
            new = x.at[key].set(value)
        elif keras.backend.backend() == "torch" and hasattr(x, "clone"):
            new = x.clone()
            new[key] = keras.ops.convert_to_tensor(value, dtype=new.dtype)
        else:
            raise TypeError("this tensor (dynamic shape or tensor index) cannot be assigned into")
    else:
        ref = x.value if isinstance(x, keras.Variable) else x
        flat = keras.ops.reshape(ref, (-1,))
        values = keras.ops.broadcast_to(keras.ops.cast(value, ref.dtype), positions.shape)
        new = keras.ops.scatter_update(
            flat, positions.reshape(-1, 1).astype(np.int32), keras.ops.reshape(values, (-1,)))
        new = keras.ops.reshape(new, tuple(ref.shape))
    if isinstance(x, keras.Variable) or type(x).__name__ in ("ResourceVariable", "Variable"):
        x.assign(new)
        return x
    return new
