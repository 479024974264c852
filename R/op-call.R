# Calling a keras (or customgrad) op from R with converted arguments, and the R error for an
# out-of-range axis.

# Calls keras.ops.<name> (or keras.ops.image.<name>, customgrad.ops.<name>) with converted arguments.
# `axes` (the axis arguments as the user gave them) and `ref` (the tensor they index) turn a
# backend error into an R one naming the out-of-range axis (see check_axes()).
op_call <- function(name, args, fn, module = "ops", dots = NULL, positional = NULL,
                    dots_convert = to_py, axes = NULL, ref = NULL, axis_extra = 0L) {
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
      pos <- c(positional %||% list(), lapply(dots[!nzchar(nms)], to_py))
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
