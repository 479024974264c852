# The R functions over customgrad.ops: the ops keras3 does not have. Each converts its tensor
# argument by to_py() and its axes from 1-based R to Python (keras3's convention).

#' Gradient-shaping ops from customgrad.ops
#'
#' `op_log1pexp(x)`: `log(1 + exp(x))` with a stable gradient (exactly 1 at large `x`).
#' `op_reverse_gradient(x, scale)`: identity forward, gradient multiplied by `-scale`.
#' `op_scale_gradient(x, scale)`: identity forward, gradient multiplied by `scale`.
#' `op_clip_gradient(x, min_value, max_value)`: identity forward, gradient clipped elementwise.
#' `op_clip_gradient_norm(x, max_norm, across_replicas)`: identity forward, gradient rescaled so
#' that its L2 norm is at most `max_norm` (with `across_replicas = TRUE`, the norm one device
#' would see under a data-parallel engine, as Python's `clip_gradient_norm()` explains).
#' `op_round_ste(x)`, `op_sign_ste(x)`: `round(x)` / `sign(x)` forward, identity gradient
#' (straight-through estimators); `op_straight_through(fn)` makes one from any R function.
#' `op_safe_sqrt(x)`: `sqrt(x)` with gradient 0 (not `Inf`) at 0.
#' `op_safe_norm(x, axis, keepdims)`: the L2 norm with gradient `x / norm`, and 0 (not `NaN`)
#' where the norm is 0.
#' `op_safe_logsumexp(x, axis, keepdims)`: `log(sum(exp(x)))` whose gradient is 0 (not `NaN`)
#' for entries of `-Inf`, also when a whole slice is `-Inf`. (Python's `customgrad.ops.logsumexp`;
#' keras3's `op_logsumexp()` is the plain keras op.)
#' `op_efficient_swish(x)`: `x * sigmoid(x)` whose backward keeps only `x` and recomputes the
#' sigmoid. (Python's `customgrad.ops.swish`; keras3's `op_swish()` is the plain keras op.)
#'
#' @param x A tensor or R array.
#' @param scale,min_value,max_value,max_norm Numbers.
#' @param across_replicas `TRUE` to clip by the norm of the whole batch under a data-parallel
#'   engine (torch DDP or FSDP, a `tf.distribute` strategy), `FALSE` for each replica's own.
#' @param fn An R function of one tensor, written with `op_*` functions.
#' @param axis Axes to reduce (1-based, as in the other `op_*` functions); `NULL` for all.
#' @param keepdims Whether reduced axes are kept with length 1.
#' @return A tensor; `op_straight_through()` returns a function.
#' @name customgrad_ops
#' @examplesIf customgrad:::python_available()
#' op_grad(op_log1pexp)(100)
#' op_grad(\(x) op_safe_norm(x))(c(0, 0))
NULL


# Calls customgrad.ops.<name>; errors report `call`, the op_*() function the user called.
customgrad_op <- function(name, x, ..., call = caller_env()) {
  with_py_errors(py_invoke(py_mod("customgrad")$ops[[name]], c(list(to_py(x)), list(...))),
                 call)
}

#' @rdname customgrad_ops
#' @export
op_log1pexp <- function(x) customgrad_op("log1pexp", x)

#' @rdname customgrad_ops
#' @export
op_reverse_gradient <- function(x, scale = 1) {
  customgrad_op("reverse_gradient", x, scale)
}

#' @rdname customgrad_ops
#' @export
op_scale_gradient <- function(x, scale) customgrad_op("scale_gradient", x, scale)

#' @rdname customgrad_ops
#' @export
op_clip_gradient <- function(x, min_value, max_value) {
  customgrad_op("clip_gradient", x, min_value, max_value)
}

#' @rdname customgrad_ops
#' @export
op_clip_gradient_norm <- function(x, max_norm, across_replicas = FALSE) {
  customgrad_op("clip_gradient_norm", x, max_norm, across_replicas = across_replicas)
}

#' @rdname customgrad_ops
#' @export
op_round_ste <- function(x) customgrad_op("round_ste", x)

#' @rdname customgrad_ops
#' @export
op_sign_ste <- function(x) customgrad_op("sign_ste", x)

#' @rdname customgrad_ops
#' @export
op_safe_sqrt <- function(x) customgrad_op("safe_sqrt", x)

#' @rdname customgrad_ops
#' @export
op_safe_norm <- function(x, axis = NULL, keepdims = FALSE) {
  customgrad_op("safe_norm", x, as_axis(axis), keepdims)
}

#' @rdname customgrad_ops
#' @export
op_safe_logsumexp <- function(x, axis = NULL, keepdims = FALSE) {
  customgrad_op("logsumexp", x, as_axis(axis), keepdims)
}

#' @rdname customgrad_ops
#' @export
op_efficient_swish <- function(x) customgrad_op("swish", x)

# 1-based R axes (negative ones count from the end) as keras3 takes them, 0-based for Python.
# keras3's own as_axis() (unexported) does this conversion; this one follows it, with
# customgrad's classed error for an invalid axis and a tuple for several axes.
as_axis <- function(axis, arg = caller_arg(axis), call = caller_env()) {
  if (is.null(axis)) return(NULL)
  if (!is.numeric(axis) || anyNA(axis) || any(axis != round(axis)) || any(axis == 0)) {
    cg_abort(
      c("{.arg {arg}} must be whole non-zero numbers (1-based axes; -1 is the last).",
        x = "Received {obj_type_friendly(axis)}."),
      "axis", call = call
    )
  }
  axis <- as.integer(ifelse(axis > 0, axis - 1, axis))
  if (length(axis) == 1L) axis else do.call(reticulate::tuple, as.list(axis))
}

# Python's straight_through() wraps a Python function; this one wraps an R function, so it is
# built from op_custom_gradient() rather than generated.
#' @rdname customgrad_ops
#' @importFrom keras3 op_cast
#' @export
op_straight_through <- function(fn) {
  if (!is.function(fn)) {
    cg_abort(
      c("{.arg fn} must be a function of one tensor.",
        x = "Received {obj_type_friendly(fn)}."),
      "type"
    )
  }
  force(fn)
  op_custom_gradient(function(x) {
    y <- op_cast(fn(x), x$dtype)
    tuple(y, function(upstream) upstream)
  })
}
