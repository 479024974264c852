# The argument and result transformers that tools/op_conventions.py names for the op wrappers:
# index shifts, integer coercions, shapes, axes. Each prepares a value and hands it to to_py().

# An R list (or one value) as a Python tuple of converted values.
as_tuple_arg <- function(x) {
  if (!is.list(x) || inherits(x, "python.builtin.object")) x <- list(x)
  do.call(reticulate::tuple, lapply(unname(x), to_py))
}

# keras3's as_array(): R vectors become arrays too (doubles float64).
as_array_arg <- function(x) {
  if (is.atomic(x) && !is.null(x) && !is.character(x)) return(r_array_to_numpy(x))
  to_py(x)
}

# keras3's as_integer(): whole R doubles become integers (arrays keep their dim), then converted.
as_integer_arg <- function(x, fn = "op", arg = "x") {
  if (is.double(x)) x <- whole_to_integer(x, fn, arg)
  to_py(x)
}

# keras3's as_integer_array(): whole R doubles become an int32 array (no index shift).
as_int_array_arg <- function(x, fn = "op", arg = "x") {
  if (is.double(x)) x <- whole_to_integer(x, fn, arg)
  if (is.atomic(x) && !is.null(x) && !is.character(x)) return(r_array_to_numpy(x))
  to_py(x)
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

# Index tensors (indices, segment_ids): whole R doubles become int32 (values are 0-based).
as_index_arg <- function(x) {
  if (is.double(x) && !anyNA(x) && all(x == round(x)) && all(abs(x) < .Machine$integer.max)) {
    d <- dim(x)
    x <- as.integer(x)
    dim(x) <- d
  }
  to_py(x)
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
