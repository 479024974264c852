# keras3's ops whose R semantics are not a per-argument rule of tools/op_conventions.py:
# op_arange (1-based, end included), op_convert_to_tensor and op_array (keras3's conversion of R
# vectors), op_subset and its assignment form, op_pmax / op_pmin.

#' Evenly spaced values, 1-based and including the end (keras3's `op_arange()`)
#'
#' Calls `keras.ops.arange` with keras3's R conventions: `op_arange(n)` is `1, ..., n` and
#' `end` is included (`include_end = TRUE`), like R's `seq()`. With an integer `dtype`, whole
#' double `start` / `end` are sent as integers (as keras3 does, so that every backend accepts
#' them).
#'
#' @param start The start of the interval (included), or the end if `end` is missing (the
#'   start is then 1).
#' @param end The end of the interval (included unless `include_end = FALSE`).
#' @param step The spacing between values.
#' @param dtype The dtype of the result; by default inferred from the arguments (R integers give
#'   `int32`, doubles [config_floatx()]).
#' @param include_end Whether `end` is part of the sequence.
#' @return A 1-d tensor.
#' @examplesIf customgrad:::python_available()
#' op_arange(3L)
#' op_arange(3L, 7L, 2L)
#' op_arange(3, dtype = "int32")
#' @export
op_arange <- function(start, end, step = 1L, dtype = NULL, include_end = TRUE) {
  if (missing(end)) {
    end <- start
    start <- if (is.double(end)) 1 else 1L
  }
  if (!is.null(dtype) && py_mod("keras")$backend$is_int_dtype(dtype)) {
    if (is.double(start)) start <- whole_to_integer(start, "op_arange", "start", environment())
    if (is.double(end)) end <- whole_to_integer(end, "op_arange", "end", environment())
    if (is.double(step)) step <- whole_to_integer(step, "op_arange", "step", environment())
  }
  if (isTRUE(include_end)) end <- end + step
  op_call("arange", list(to_py(start), to_py(end), to_py(step),
                         dtype = dtype), "op_arange")
}

#' Convert R values to tensors, as keras3 does
#'
#' `op_convert_to_tensor()` follows keras3: an R vector of length > 1 or an R array becomes a
#' numpy array first, so doubles keep `float64` (on tensorflow and torch; jax without x64 mode
#' gives `float32`); an R scalar becomes a tensor of [config_floatx()] (doubles). An integer
#' `dtype` turns whole doubles into integers first. `op_array()` converts an R vector as Keras
#' converts a Python list ([config_floatx()] for doubles) and an R array as a numpy array.
#' See [as_tensor()] for the full conversion rule.
#'
#' @param x An R vector or array, or a tensor.
#' @param dtype Optional dtype name.
#' @param sparse,ragged Passed on to Keras.
#' @return A tensor.
#' @examplesIf customgrad:::python_available()
#' op_convert_to_tensor(c(1, 4))
#' op_convert_to_tensor(c(1, 3, 2, 0), "int32")
#' op_array(c(1, 2, 3))
#' @export
op_convert_to_tensor <- function(x, dtype = NULL, sparse = NULL, ragged = NULL) {
  if (is.double(x) && is_int_dtype(dtype)) {
    x <- whole_to_integer(x, "op_convert_to_tensor", "x", environment())
  }
  if (is.atomic(x) && !is.character(x) && (length(x) > 1L || !is.null(dim(x)))) {
    x <- r_array_to_numpy(x)
  } else {
    x <- to_py(x)
  }
  args <- list(x, dtype = dtype)
  if (!is.null(sparse)) args$sparse <- sparse
  if (!is.null(ragged)) args$ragged <- ragged
  op_call("convert_to_tensor", args, "op_convert_to_tensor")
}

#' @rdname op_convert_to_tensor
#' @export
op_array <- function(x, dtype = NULL) {
  if (is.double(x) && is_int_dtype(dtype)) {
    x <- whole_to_integer(x, "op_array", "x", environment())
  }
  op_call("array", list(to_py(x), dtype = dtype), "op_array")
}

is_int_dtype <- function(dtype) {
  is.character(dtype) && length(dtype) == 1L && grepl("int", dtype, fixed = TRUE)
}

# op_nonzero's result as keras3 gives it: one row per nonzero element, its 1-based coordinates.
# (keras's torch backend returns the coordinates stacked already, one row per axis.)
nonzero_out <- function(res, zero_indexed = FALSE) {
  ops <- py_mod("ops")
  coords <- if (is_py_object(res)) ops$transpose(res) else ops$stack(res, axis = -1L)
  if (isTRUE(zero_indexed)) coords else ops$add(coords, 1L)
}

#' Elementwise maximum and minimum (R's `pmax()` / `pmin()` names)
#'
#' `op_pmax()` is [op_maximum()] and `op_pmin()` is [op_minimum()], under the names of R's
#' `pmax()` and `pmin()`, as in keras3.
#'
#' @param x1,x2 Tensors or R values (broadcast against each other).
#' @return A tensor.
#' @examplesIf customgrad:::python_available()
#' op_pmax(c(1, 5, 3), c(4, 2, 6))
#' op_pmin(c(1, 5, 3), 2)
#' @export
op_pmax <- function(x1, x2) op_maximum(x1, x2)

#' @rdname op_pmax
#' @export
op_pmin <- function(x1, x2) op_minimum(x1, x2)

#' Subset a tensor with R's 1-based indices (keras3's `op_subset()` and `[`)
#'
#' `op_subset(x, ...)`, `x[...]`, and their assignment forms `op_subset(x, ...) <- value`,
#' `x[...] <- value` (also `op_subset_set(x, ..., value = )`) index a tensor as keras3 does:
#'
#' * indices are 1-based; negative ones count from the end (`-1` is the last), they do not drop
#'   elements as in base R; 0 is an error;
#' * a single number drops its axis; a range `a:b` (or an increasing run such as `c(2, 3, 4)`)
#'   keeps it, and includes `b`; `NA` as an end of a range is open (`NA:3`, `2:NA`); `1:-2`
#'   drops the last element;
#' * an empty argument takes the whole axis; `..` stands for all the axes not given; `NULL`
#'   inserts a new axis of length 1; missing trailing axes are taken whole (`x[1]` is the
#'   first row of a matrix);
#' * other integer vectors pick elements, and several of them pick the outer product (as in R);
#' * a logical array shaped like `x` selects its `TRUE` elements in row-major order, as a 1-d
#'   tensor; a matrix with one column per axis of `x` picks one element per row.
#'
#' Assignment returns a new tensor (a `keras.Variable` or TensorFlow variable is assigned in
#' place and returned). Subsetting and assignment are differentiable.
#'
#' @param x A tensor.
#' @param ... The indices, one per axis (see Details).
#' @param value The values to put in place (broadcast to the selection).
#' @return A tensor.
#' @examplesIf customgrad:::python_available()
#' x <- op_arange(5L) + 10L
#' op_subset(x, 1)
#' x[c(1, -1)]
#' m <- op_convert_to_tensor(array(1:12, c(3, 4)))
#' m[, 2]
#' m[, 2:2]
#' m[m >= 6]
#' m[1, 1] <- 100L
#' m
#' @export
op_subset <- function(x, ...) {
  key <- subset_key(x, substitute(list(...)), parent.frame(), environment())
  with_py_errors(py_fn("bridge", "subset")(x, key), "op_subset")
}

#' @rdname op_subset
#' @export
`op_subset<-` <- function(x, ..., value) {
  key <- subset_key(x, substitute(list(...)), parent.frame(), environment())
  with_py_errors(py_fn("bridge", "subset_assign")(x, key, subset_value(x, value)), "op_subset<-")
}

#' @rdname op_subset
#' @export
op_subset_set <- function(x, ..., value) {
  key <- subset_key(x, substitute(list(...)), parent.frame(), environment())
  with_py_errors(py_fn("bridge", "subset_assign")(x, key, subset_value(x, value)), "op_subset_set")
}

subset_value <- function(x, value) {
  if (is.double(value) && !is.null(x$dtype) && grepl("int", dtype_name(x), fixed = TRUE)) {
    value <- as.integer(value)
  }
  to_py(value)
}

dtype_name <- function(x) py_mod("keras")$backend$standardize_dtype(x$dtype)

# The Python key (a list of ints, slices, None, Ellipsis and index arrays, 0-based) for R's
# 1-based subsetting arguments, given unevaluated as `exprs` (a call to list()).
subset_key <- function(x, exprs, envir, call) {
  exprs <- as.list(exprs)[-1L]
  builtins <- py_mod("builtins")
  single <- length(exprs) == 1L && !is_empty_at(exprs, 1L) &&
    !identical(exprs[[1L]], quote(..)) &&
    !(is.call(exprs[[1L]]) && identical(exprs[[1L]][[1L]], as.name(":")))
  if (single) {
    only <- eval(exprs[[1L]], envir)
    if (is.logical(only) && !is.null(dim(only))) return(list(r_array_to_numpy(only)))
    if (is_py_object(only) && identical(dtype_name(only), "bool")) return(list(only))
    if (is.numeric(only) && is.matrix(only) && ncol(only) > 1L && ncol(only) == r_rank(x)) {
      cols <- lapply(seq_len(ncol(only)), function(j) {
        r_array_to_numpy(as_subset_index(only[, j], call, vector = TRUE))
      })
      return(cols)
    }
    exprs <- list(only)
    evaluated <- TRUE
  } else {
    evaluated <- FALSE
  }
  advanced <- logical(length(exprs))
  key <- vector("list", length(exprs))
  for (i in seq_along(exprs)) {
    if (!evaluated && is_empty_at(exprs, i)) {
      key[[i]] <- builtins$slice(NULL)
      next
    }
    e <- exprs[[i]]
    item <- if (evaluated) {
      e
    } else if (identical(e, quote(..))) {
      builtins$Ellipsis
    } else if (is.call(e) && identical(e[[1L]], as.name(":"))) {
      range_item(eval(e[[2L]], envir), eval(e[[3L]], envir), call)
    } else {
      eval(e, envir)
    }
    if (is.null(item)) next  # NULL: a new axis (None)
    if (!is_py_object(item) || inherits(item, tensor_classes)) {
      item <- as_subset_index(item, call)
      advanced[[i]] <- is.array(item) || (is_py_object(item) && length(dim(item)) == 1L)
    }
    key[i] <- list(item)
  }
  # several index vectors pick their outer product, as in R
  if (sum(advanced) > 1L) {
    k <- sum(advanced)
    pos <- 0L
    for (i in which(advanced)) {
      pos <- pos + 1L
      shape <- rep(1L, k)
      shape[[pos]] <- length(key[[i]])
      if (is_py_object(key[[i]])) {
        key[[i]] <- py_mod("ops")$reshape(key[[i]], as.list(shape))
      } else {
        dim(key[[i]]) <- shape
      }
    }
  }
  lapply(key, function(item) if (is.array(item)) r_array_to_numpy(item) else item)
}

# An empty argument (`x[, 1]`), checked in place: a variable holding it can't be read.
is_empty_at <- function(exprs, i) identical(exprs[[i]], quote(expr = ))

# `a:b`: a slice that keeps the axis (end included); NA is an open end. A decreasing range of
# same-signed numbers picks those elements instead.
range_item <- function(a, b, call) {
  if (!is.na(a) && !is.na(b) && sign(a) == sign(b) && a > b) return(seq(a, b))
  if (identical(a, 0) || identical(a, 0L) || identical(b, 0) || identical(b, 0L)) {
    cg_abort(c("Indices are 1-based; 0 is not an index.",
               i = "Use 1 for the first element and -1 for the last."),
             "customgrad_error_index", call = call)
  }
  start <- if (is.na(a)) NULL else if (a > 0) as.integer(a - 1) else as.integer(a)
  stop <- if (is.na(b) || b == -1) NULL else if (b > 0) as.integer(b) else as.integer(b + 1)
  py_mod("builtins")$slice(start, stop)
}

# One index: a number (drops the axis), a run (a slice, keeps it), a vector (picks elements),
# a logical vector (its TRUE positions), or a tensor of indices (shifted to 0-based).
as_subset_index <- function(v, call, vector = FALSE) {
  if (is_py_object(v)) {
    if (identical(dtype_name(v), "bool")) return(py_mod("ops")$nonzero(v)[[1L]])
    ops <- py_mod("ops")
    return(ops$where(ops$greater(v, 0L), ops$subtract(v, 1L), v))
  }
  if (is.logical(v)) {
    if (anyNA(v)) {
      cg_abort("A logical index can't contain {.code NA}.", "customgrad_error_index", call = call)
    }
    return(as.array(which(v) - 1L))
  }
  if (!is.numeric(v) || anyNA(v) || any(v != round(v))) {
    cg_abort(c("Indices must be whole numbers, logicals, ranges or tensors.",
               x = "You supplied {describe_value(v)}."), "customgrad_error_index", call = call)
  }
  if (any(v == 0)) {
    cg_abort(c("Indices are 1-based; 0 is not an index.",
               i = "Use 1 for the first element and -1 for the last."),
             "customgrad_error_index", call = call)
  }
  v <- as.integer(v)
  if (length(v) == 1L && !vector) return(if (v > 0L) v - 1L else v)
  if (!vector && length(v) > 1L && all(sign(v) == sign(v[[1L]]))) {
    step <- v[[2L]] - v[[1L]]
    if (step > 0L && identical(v, seq.int(v[[1L]], by = step, length.out = length(v)))) {
      last <- v[[length(v)]]
      start <- if (v[[1L]] > 0L) v[[1L]] - 1L else v[[1L]]
      stop <- if (last > 0L) last else if (last == -1L) NULL else last + 1L
      return(py_mod("builtins")$slice(start, stop, if (step == 1L) NULL else step))
    }
  }
  as.array(ifelse(v > 0L, v - 1L, v))
}
