# The conversion between R values and Python: R arrays and tensors as raw bytes (reticulate 1.28
# cannot use numpy 2), as_tensor(), and to_py(), the one rule for every R value handed to Python.

r_array_bytes <- function(x) {
  if (is.factor(x)) x <- as.character(x)
  rtype <- typeof(x)
  if (!rtype %in% c("double", "integer", "logical", "complex")) {
    cg_abort(
      c("Cannot convert this value to a tensor.",
        x = "Expected a double, integer, logical or complex vector or array; received {describe_value(x)}."),
      "customgrad_conversion_error", call = NULL
    )
  }
  if (rtype == "logical" && anyNA(x)) {
    cg_abort(c("Cannot convert a logical vector with NA to a boolean tensor."),
             "customgrad_conversion_error", call = NULL)
  }
  dims <- dim(x) %||% length(x)
  if (is.null(dim(x)) && length(x) == 1L) dims <- integer()
  values <- switch(rtype, double = as.double(x), complex = as.complex(x), as.integer(x))
  size <- switch(rtype, double = 8L, complex = 16L, 4L)
  list(writeBin(values, raw(), size = size, endian = "little"), as.list(as.integer(dims)), rtype)
}

r_array_to_tensor <- function(x, dtype = NULL) {
  b <- r_array_bytes(x)
  py_mod("bridge")$from_r(b[[1]], b[[2]], b[[3]], dtype)
}

# An R array as the numpy array reticulate would make of it (doubles float64): what keras3 hands
# to an op for an R array.
r_array_to_numpy <- function(x) {
  b <- r_array_bytes(x)
  reticulate::py_call(py_fn("bridge", "from_r_numpy"), b[[1]], b[[2]], b[[3]])
}

tensor_to_r_array <- function(x, drop_dim = FALSE) {
  res <- with_py_errors(py_mod("bridge")$to_r(x), "as.array")
  buf <- res[[1]]
  shape <- as.integer(unlist(res[[2]]))
  rtype <- res[[3]]
  n <- if (length(shape)) prod(shape) else 1L
  out <- switch(rtype,
    double = readBin(buf, "double", n = n, size = 8L, endian = "little"),
    integer = readBin(buf, "integer", n = n, size = 4L, endian = "little"),
    logical = as.logical(readBin(buf, "integer", n = n, size = 4L, endian = "little")),
    complex = readBin(buf, "complex", n = n, size = 16L, endian = "little")
  )
  if (!drop_dim && length(shape) >= 1L) dim(out) <- shape
  out
}

#' Convert R values to tensors of the active backend
#'
#' R doubles become tensors of the default float dtype ([config_floatx()], `"float32"` unless
#' configured), integers `int32`, logicals `bool`, complex numbers `complex128` (`complex64` on
#' jax); arrays keep their dimensions (R's column-major layout is converted). A length-one vector
#' without dimensions becomes a scalar (shape `()`). Tensors are returned unchanged (cast if
#' `dtype` is given). Lists are converted element-wise.
#'
#' @section Conversion of `op_*()` arguments:
#' The `op_*()` functions convert their arguments as 'keras3' does (through 'reticulate'):
#'
#' * an R scalar (a length-one vector without `dim`) becomes a Python scalar, which Keras treats
#'   as weakly typed: `op_add(x, 1)` keeps `x`'s dtype, and a double alone becomes
#'   [config_floatx()];
#' * an R vector of another length (no `dim`) becomes a tensor of [config_floatx()] for doubles
#'   (as Keras converts the Python list 'reticulate' makes of it), `int32` for integers;
#' * an R array (with `dim`, including `array(1:3)`) becomes a numpy array: doubles stay
#'   `float64`, and Keras keeps `float64` on tensorflow and torch (jax, without its x64 mode,
#'   computes in `float32`);
#' * where 'keras3' converts a vector to an array (`op_convert_to_tensor()`, the `values` of
#'   `op_scatter()`, the `bins` of `op_digitize()`, ...) a double vector is `float64` too;
#' * strings stay strings, R functions become Python functions, `tuple()` a Python tuple, and a
#'   list a Python list (a dict when every element is named), its elements converted alike.
#'
#' What an R function hands back to Python (the output and gradients of [op_custom_gradient()],
#' the result of a function given to [op_grad()] or [op_map()]) is converted as `as_tensor()`
#' does: every R number becomes a tensor, scalars included.
#'
#' `as_tensor()` is this package's own conversion: it always gives [config_floatx()] for
#' doubles unless `dtype` says otherwise.
#'
#' @param x An R vector, array or list, or a tensor.
#' @param dtype Optional dtype name such as `"float64"`.
#' @return A tensor (or a list of them).
#' @examplesIf customgrad:::python_available()
#' x <- as_tensor(matrix(1:6 + 0.5, 2, 3))
#' x
#' as.array(x)
#' @export
as_tensor <- function(x, dtype = NULL) {
  if (is.null(x)) return(NULL)
  if (is_py_object(x)) {
    if (is.null(dtype)) return(x)
    return(with_py_errors(py_mod("ops")$convert_to_tensor(x, dtype = dtype), "as_tensor"))
  }
  if (is.list(x)) return(lapply(x, as_tensor, dtype = dtype))
  r_array_to_tensor(x, dtype)
}

# ---- the R -> Python conversion ---------------------------------------------------------------
#
# to_py() is the one conversion of R values for Python: op arguments, what R functions hand back
# to Python (outputs, gradients), the arguments of differentiated functions. Its one switch,
# `tensors`, changes only what R numbers become:
#
#   R value                           tensors = FALSE (op arguments:      tensors = TRUE (what R
#                                     keras3's rule, as reticulate does)  functions give Python)
#   NULL, a Python object             as it is                            as it is
#   double/integer/logical scalar     a Python scalar (weakly typed)      a 0-d tensor
#   vector (no dim, length != 1)      a tensor                            a tensor
#   array (with dim), complex         a numpy array (doubles float64)     a tensor
#   character                         a str, or a list of str             the same
#   function                          a Python callable: its results converted with tensors = TRUE,
#                                     its R errors kept for the R caller
#   tuple()                           a Python tuple, elements converted with tensors = TRUE
#   list                              a list (a dict when every element is named), elements
#                                     converted with the same `tensors`
#
# Tensors made from R numbers are of the default float dtype for doubles (config_floatx()),
# int32 for integers, bool for logicals (r_array_to_tensor()). The keras3 transformers of the
# generated ops (as_array_arg(), as_integer_arg(), ...) prepare a value and then call to_py().
to_py <- function(x, tensors = FALSE) {
  if (is.null(x) || inherits(x, "python.builtin.object")) return(x)
  # the common case first (every argument of every op): an R scalar stays as it is
  if (!tensors && (is.double(x) || is.integer(x) || is.logical(x)) && length(x) == 1L &&
      is.null(dim(x))) {
    return(x)
  }
  if (inherits(x, "customgrad_tuple")) {
    return(do.call(reticulate::tuple, lapply(unclass(x), to_py, tensors = TRUE)))
  }
  if (is.function(x)) return(wrap_r_function(x))
  if (is.list(x)) {
    out <- lapply(x, to_py, tensors = tensors)
    nms <- names(x)
    return(if (is.null(nms) || !all(nzchar(nms))) out else reticulate::py_dict(nms, unname(out)))
  }
  if (is.character(x)) return(if (length(x) == 1L) x else as.list(x))
  if (is.atomic(x)) {
    if (tensors) return(r_array_to_tensor(x))
    if (!is.null(dim(x)) || is.complex(x)) return(r_array_to_numpy(x))
    if (length(x) != 1L) return(r_array_to_tensor(x))
  }
  x
}

# An R function handed to Python (op_cond, op_map, op_grad, ...): its results are converted and
# its errors kept for the R caller.
wrap_r_function <- function(f) {
  force(f)
  function(...) in_callback(to_py(f(...), tensors = TRUE))
}

#' @rdname op_convert_to_numpy
#' @export
op_convert_to_array <- function(x) {
  tensor_to_r_array(as_tensor(x))
}

#' Convert a tensor to an R array
#'
#' The R face of `keras.ops.convert_to_numpy`: returns an R array (numpy arrays cannot cross
#' reticulate 1.28 with numpy 2, so the values travel as bytes).
#'
#' @param x A tensor (or an R value).
#' @return An R array (a scalar for a 0-d tensor); `op_convert_to_array()` is an alias.
#' @examplesIf customgrad:::python_available()
#' op_convert_to_numpy(op_ones(c(2, 2)))
#' @export
op_convert_to_numpy <- function(x) {
  tensor_to_r_array(as_tensor(x))
}
