# Conversion between R vectors/arrays and tensors, as raw bytes (reticulate 1.28 cannot use numpy 2).

r_array_to_tensor <- function(x, dtype = NULL) {
  if (is.factor(x)) x <- as.character(x)
  rtype <- typeof(x)
  if (!rtype %in% c("double", "integer", "logical")) {
    cg_abort(
      c("Cannot convert this value to a tensor.",
        x = "Expected a double, integer or logical vector or array; received {describe_value(x)}."),
      "customgrad_conversion_error", call = NULL
    )
  }
  if (rtype == "logical" && anyNA(x)) {
    cg_abort(c("Cannot convert a logical vector with NA to a boolean tensor."),
             "customgrad_conversion_error", call = NULL)
  }
  dims <- dim(x) %||% length(x)
  if (is.null(dim(x)) && length(x) == 1L) dims <- integer()
  buf <- writeBin(if (rtype == "double") as.double(x) else as.integer(x), raw(), size = if (rtype == "double") 8L else 4L,
                  endian = "little")
  py_mod("glue")$from_r(buf, as.list(as.integer(dims)), rtype, dtype)
}

tensor_to_r_array <- function(x, drop_dim = FALSE) {
  res <- with_py_errors(py_mod("glue")$to_r(x), "as.array")
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
#' configured), integers `int32`, logicals `bool`; arrays keep their dimensions (R's column-major
#' layout is converted). A length-one vector without dimensions becomes a scalar (shape `()`).
#' Tensors are returned unchanged (cast if `dtype` is given). Lists are converted element-wise.
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
  if (is.atomic(x) && (length(x) != 1L || !is.null(dim(x)))) return(r_array_to_tensor(x))
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
as_axis <- function(axis, fn = "op", arg = "axis") {
  if (is.null(axis)) return(NULL)
  if (is_py_object(axis)) return(axis)
  if (is.list(axis)) return(lapply(axis, as_axis, fn = fn, arg = arg))
  if (!is.numeric(axis) || anyNA(axis) || any(axis != round(axis))) {
    cg_abort(
      c("{.fn {fn}}: {.arg {arg}} must be whole numbers (1-based axes).",
        x = "Received {describe_value(axis)}."),
      "customgrad_axis_error", call = NULL
    )
  }
  if (any(axis == 0)) {
    cg_abort(
      c("{.fn {fn}}: {.arg {arg}} is 1-based; 0 is not an axis.",
        i = "Use 1 for the first axis and -1 for the last."),
      "customgrad_axis_error", call = NULL
    )
  }
  axis <- as.integer(axis)
  axis <- ifelse(axis > 0L, axis - 1L, axis)
  if (length(axis) == 1L) axis else as.list(axis)
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
op_call <- function(name, args, fn, module = "ops", dots = NULL, positional = NULL,
                    dots_convert = as_tensor_arg) {
  pyfn <- py_fn(module, name)
  res <- with_py_errors({
    if (is.null(dots) && is.null(positional)) {
      py_invoke(pyfn, args)
    } else {
      dots <- dots %||% list()
      nms <- names(dots) %||% rep("", length(dots))
      pos <- c(positional %||% list(), lapply(dots[!nzchar(nms)], as_tensor_arg))
      kw <- c(args, lapply(dots[nzchar(nms)], dots_convert))
      py_mod("glue")$call(pyfn, unname(pos), reticulate::py_dict(as.list(names(kw)), unname(kw)))
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
