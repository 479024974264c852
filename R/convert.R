# Conversion between R vectors/arrays and tensors, as raw bytes (reticulate 1.28 cannot use numpy 2).

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
#'   `op_scatter()`, the `bins` of `op_digitize()`, ...) a double vector is `float64` too.
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

# What an op gets for an argument: R arrays and vectors of length > 1 become tensors; scalars
# become Python scalars (keras then gives them its default dtype, weakly typed); lists recurse;
# functions are wrapped so that what they return reaches Python converted.
as_tensor_arg <- function(x) {
  if (is.null(x) || inherits(x, "python.builtin.object")) return(x)
  # the common case first (called for every argument of every op): an R scalar stays as it is
  if ((is.double(x) || is.integer(x) || is.logical(x)) && length(x) == 1L && is.null(dim(x))) {
    return(x)
  }
  if (inherits(x, "customgrad_tuple")) return(reticulate::r_to_py(x))
  if (is.function(x)) return(wrap_r_function(x))
  if (is.list(x)) {
    out <- lapply(x, as_tensor_arg)
    return(if (is.null(names(x))) out else reticulate::py_dict(names(x), unname(out)))
  }
  if (is.character(x)) return(if (length(x) == 1L) x else as.list(x))
  if (is.atomic(x)) {
    # keras3's rule (reticulate's): an array is a numpy array (doubles float64), a vector a list
    if (!is.null(dim(x)) || is.complex(x)) return(r_array_to_numpy(x))
    if (length(x) != 1L) return(r_array_to_tensor(x))
  }
  x
}

# An R list (or one value) as a Python tuple of converted values.
as_tuple_arg <- function(x) {
  if (!is.list(x) || inherits(x, "python.builtin.object")) x <- list(x)
  do.call(reticulate::tuple, lapply(unname(x), as_tensor_arg))
}

# keras3's as_array(): R vectors become arrays too (doubles float64).
as_array_arg <- function(x) {
  if (is.atomic(x) && !is.null(x) && !is.character(x)) return(r_array_to_numpy(x))
  as_tensor_arg(x)
}

# keras3's as_integer(): whole R doubles become integers (arrays keep their dim), then converted.
as_integer_arg <- function(x, fn = "op", arg = "x") {
  if (is.double(x)) x <- whole_to_integer(x, fn, arg)
  as_tensor_arg(x)
}

# keras3's as_integer_array(): whole R doubles become an int32 array (no index shift).
as_int_array_arg <- function(x, fn = "op", arg = "x") {
  if (is.double(x)) x <- whole_to_integer(x, fn, arg)
  if (is.atomic(x) && !is.null(x) && !is.character(x)) return(r_array_to_numpy(x))
  as_tensor_arg(x)
}

whole_to_integer <- function(x, fn, arg, call = parent.frame(2L)) {
  ok <- is.na(x) | (x == round(x) & abs(x) < .Machine$integer.max)
  if (!all(ok)) {
    cg_abort(
      c("{.arg {arg}} must be whole numbers.",
        x = "You supplied {describe_value(x)} with {sum(!ok)} non-whole value{?s}."),
      c("customgrad_error_type", "customgrad_type_error"), call = call
    )
  }
  d <- dim(x)
  x <- as.integer(x)
  dim(x) <- d
  x
}

# Converts what an R function returns so that Python receives tensors (R numerics become
# tensors of the default float dtype) and tuples.
to_py_tree <- function(x) {
  if (is.null(x) || is_py_object(x)) return(x)
  if (inherits(x, "customgrad_tuple")) {
    return(do.call(reticulate::tuple, lapply(unclass(x), to_py_tree)))
  }
  if (is.list(x)) {
    out <- lapply(x, to_py_tree)
    return(if (is.null(names(x))) out else reticulate::py_dict(names(x), unname(out)))
  }
  if (is.function(x)) return(wrap_r_function(x))
  if (is.numeric(x) || is.logical(x)) return(r_array_to_tensor(x))
  x
}

# An R function handed to Python (op_cond, op_map, op_grad, ...): its results are converted and
# its errors kept for the R caller.
wrap_r_function <- function(f) {
  force(f)
  wrapped <- function(...) {
    in_callback(to_py_tree(f(...)))
  }
  wrapped
}

# ---- argument conventions of the generated ops ---------------------------------------------

# Index tensors (indices, segment_ids): whole R doubles become int32 (values are 0-based).
as_index_arg <- function(x) {
  if (is.double(x) && !anyNA(x) && all(x == round(x)) && all(abs(x) < .Machine$integer.max)) {
    d <- dim(x)
    x <- as.integer(x)
    dim(x) <- d
  }
  as_tensor_arg(x)
}

# 1-based axis -> 0-based; negative axes count from the end as in Python; 0 is an error.
# `as_tuple`: several axes become a tuple (rot90's `axes`) rather than a list.
as_axis <- function(axis, fn = "op", arg = "axis", as_tuple = FALSE, call = parent.frame()) {
  if (is.null(axis)) return(NULL)
  if (is_py_object(axis)) return(axis)
  if (is.list(axis)) axis <- unlist(axis)
  if (!is.numeric(axis) || anyNA(axis) || any(axis != round(axis))) {
    cg_abort(
      c("{.arg {arg}} must be whole numbers (1-based axes).",
        x = "You supplied {describe_value(axis)}."),
      c("customgrad_error_axis", "customgrad_axis_error"), call = call
    )
  }
  if (any(axis == 0)) {
    cg_abort(
      c("{.arg {arg}} is 1-based; 0 is not an axis.",
        i = "Use 1 for the first axis and -1 for the last."),
      c("customgrad_error_axis", "customgrad_axis_error"), call = call
    )
  }
  axis <- as.integer(axis)
  axis <- ifelse(axis > 0L, axis - 1L, axis)
  if (length(axis) == 1L) return(axis)
  if (as_tuple) do.call(reticulate::tuple, as.list(axis)) else as.list(axis)
}

# After a failed op: if an axis the user supplied does not fit the rank of `ref`, say so in R
# terms (1-based) instead of the backend's 0-based message. `extra` is 1 where the axis indexes
# the result, which has one more dimension (expand_dims). Runs only on the error path.
check_axes <- function(axes, ref, call, extra = 0L) {
  rank <- tryCatch(r_rank(ref), error = function(e) NULL)
  if (is.null(rank)) return(invisible())
  rank <- rank + extra
  for (arg in names(axes)) {
    value <- unlist(axes[[arg]])
    if (is.null(value) || !is.numeric(value)) next
    bad <- value[value > rank | value < -rank]
    if (length(bad)) {
      cg_abort(
        c("{.arg {arg}} must be between -{rank} and {rank} (1-based: 1 is the first axis, -1 the last); you supplied {bad[[1]]}.",
          i = "The input has {rank - extra} dimension{?s}."),
        c("customgrad_error_axis", "customgrad_axis_error"), call = call
      )
    }
  }
  invisible()
}

r_rank <- function(x) {
  if (is.list(x)) x <- x[[1]]
  if (is_py_object(x)) return(length(py_mod("bridge")$shape(x)))
  if (is.null(dim(x))) as.integer(length(x) != 1L) else length(dim(x))
}

# 1-based R indices -> 0-based, as keras3's index arguments: positive values move down by one,
# negative ones count from the end and stay; whole doubles become integers (a vector an int32
# array, a scalar a Python int). 0 is an error unless `allow_zero` (op_switch clamps it to the
# first branch, as keras3 documents). With `zero_indexed = TRUE` the values go as they are.
as_index_in <- function(x, fn = "op", arg = "indices", zero_indexed = FALSE,
                        allow_zero = FALSE, call = parent.frame()) {
  if (is.null(x)) return(NULL)
  if (is.list(x) && !is_py_object(x)) {
    return(lapply(x, as_index_in, fn = fn, arg = arg, zero_indexed = zero_indexed,
                  allow_zero = allow_zero, call = call))
  }
  if (is.factor(x)) x <- unclass(x)  # the level codes, 1-based as keras3 takes them
  if (is_py_object(x)) {
    if (isTRUE(zero_indexed)) return(x)
    ops <- py_mod("ops")
    return(with_py_errors(ops$where(ops$greater(x, 0L), ops$subtract(x, 1L), x), fn))
  }
  if (!is.numeric(x)) {
    cg_abort(c("{.arg {arg}} must be whole numbers (1-based indices).",
               x = "You supplied {describe_value(x)}."),
             c("customgrad_error_index", "customgrad_type_error"), call = call)
  }
  if (is.double(x)) {
    if (anyNA(x) || any(x != round(x))) {
      cg_abort(c("{.arg {arg}} must be whole numbers (1-based indices).",
                 x = "You supplied {describe_value(x)} with non-whole or missing values."),
               c("customgrad_error_index", "customgrad_type_error"), call = call)
    }
    x <- whole_to_integer(x, fn, arg)
  }
  if (!isTRUE(zero_indexed)) {
    if (!allow_zero && any(x == 0L, na.rm = TRUE)) {
      cg_abort(c("{.arg {arg}} is 1-based; 0 is not an index.",
                 i = "Use 1 for the first element and -1 for the last (or {.code zero_indexed = TRUE})."),
               "customgrad_error_index", call = call)
    }
    pos <- !is.na(x) & x > 0L
    x[pos] <- x[pos] - 1L
  }
  if (length(x) == 1L && is.null(dim(x))) return(x)
  r_array_to_numpy(x)
}

# An index result (argmax, argsort, ...) in R's 1-based terms.
index_out <- function(res, zero_indexed = FALSE) {
  if (isTRUE(zero_indexed)) return(res)
  if (is.list(res)) return(lapply(res, index_out))
  py_invoke(py_fn("ops", "add"), list(res, 1L))
}

# split's `indices_or_sections`: a number is a count of sections, a vector 1-based split points
# (the index where each new piece starts).
as_split_arg <- function(x, fn = "op", arg = "indices_or_sections", zero_indexed = FALSE,
                         call = parent.frame()) {
  if (is.numeric(x) && length(x) == 1L && is.null(dim(x))) return(as_py_int(x, fn, arg))
  if (is_py_object(x) && length(py_mod("bridge")$shape(x)) == 0L) return(x)
  idx <- as_index_in(x, fn, arg, zero_indexed, call = call)
  if (is_py_object(idx)) return(idx)
  idx
}

# Whole numbers -> Python ints (a vector -> tuple); NA -> None (unknown dimension).
as_py_int <- function(x, fn = "op", arg = "x") {
  if (is.null(x) || is_py_object(x) || is.character(x) || is.logical(x) || is.function(x)) return(x)
  if (is.list(x)) return(lapply(x, as_py_int, fn = fn, arg = arg))
  if (!is.numeric(x)) return(x)
  ok <- is.na(x) | x == round(x)
  if (!all(ok)) {
    cg_abort(
      c("{.fn {fn}}: {.arg {arg}} must be whole numbers.", x = "Received {describe_value(x)}."),
      "customgrad_type_error", call = NULL
    )
  }
  if (!is.null(dim(x)) || length(x) != 1L) {
    return(do.call(reticulate::tuple, lapply(as.integer(x), function(v) if (is.na(v)) NULL else v)))
  }
  if (is.na(x)) NULL else as.integer(x)
}

# Shapes: always a tuple of ints (a single number n means (n,)).
as_shape <- function(x, fn = "op", arg = "shape") {
  if (is.null(x) || is_py_object(x)) return(x)
  if (is.list(x)) x <- vapply(x, function(v) if (is.null(v)) NA_integer_ else as.integer(v), 1L)
  if (!is.numeric(x) && !all(is.na(x))) {
    cg_abort(c("{.fn {fn}}: {.arg {arg}} must be a shape (whole numbers).",
               x = "Received {describe_value(x)}."), "customgrad_type_error", call = NULL)
  }
  # reshape's new shape takes -1 for the one unknown dimension
  unknown <- if (identical(arg, "newshape")) -1L else NULL
  do.call(reticulate::tuple, lapply(as.integer(x), function(v) if (is.na(v)) unknown else v))
}

# Calls keras.ops.<name> (or keras.ops.image.<name>) with converted arguments.
# `axes` (the axis arguments as the user gave them) and `ref` (the tensor they index) turn a
# backend error into an R one naming the out-of-range axis (see check_axes()).
op_call <- function(name, args, fn, module = "ops", dots = NULL, positional = NULL,
                    dots_convert = as_tensor_arg, axes = NULL, ref = NULL, axis_extra = 0L) {
  if (!is.null(axes)) {
    call <- parent.frame()
    return(withCallingHandlers(
      op_call(name, args, fn, module, dots, positional, dots_convert),
      error = function(e) {
        if (!inherits(e, "customgrad_error_axis")) check_axes(axes, ref, call, axis_extra)
      }
    ))
  }
  pyfn <- py_fn(module, name)
  res <- with_py_errors({
    if (is.null(dots) && is.null(positional)) {
      py_invoke(pyfn, args)
    } else {
      dots <- dots %||% list()
      nms <- names(dots) %||% rep("", length(dots))
      pos <- c(positional %||% list(), lapply(dots[!nzchar(nms)], as_tensor_arg))
      kw <- c(args, lapply(dots[nzchar(nms)], dots_convert))
      py_mod("bridge")$call(pyfn, unname(pos), reticulate::py_dict(as.list(names(kw)), unname(kw)))
    }
  }, fn)
  # namedtuples (TensorFlow's top_k, ...) stay Python objects in reticulate: make them lists
  if (inherits(res, "python.builtin.tuple")) {
    res <- lapply(seq_len(reticulate::py_len(res)) - 1L, function(i) reticulate::py_get_item(res, i))
  }
  res
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
