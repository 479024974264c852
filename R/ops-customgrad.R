# Thin wrappers over the Python module customgrad.ops (the R face of its ready-made ops).

cg_ops_call <- function(name, ..., .fn) {
  args <- list(...)
  with_py_errors(do.call(py_mod("customgrad")$ops[[name]], args), .fn)
}

#' Gradient-shaping ops from customgrad.ops
#'
#' `op_log1pexp(x)`: `log(1 + exp(x))` with a stable gradient (exactly 1 at large `x`).
#' `op_reverse_gradient(x, scale)`: identity forward, gradient multiplied by `-scale`.
#' `op_scale_gradient(x, scale)`: identity forward, gradient multiplied by `scale`.
#' `op_clip_gradient(x, min_value, max_value)`: identity forward, gradient clipped elementwise.
#' `op_clip_gradient_norm(x, max_norm)`: identity forward, gradient rescaled so that its L2 norm
#' is at most `max_norm`.
#' `op_round_ste(x)`, `op_sign_ste(x)`: `round(x)` / `sign(x)` forward, identity gradient
#' (straight-through estimators); `op_straight_through(fn)` makes one from any R function.
#' `op_safe_sqrt(x)`: `sqrt(x)` with gradient 0 (not `Inf`) at 0.
#' `op_safe_norm(x, axis, keepdims)`: the L2 norm with gradient `x / norm`, and 0 (not `NaN`)
#' where the norm is 0.
#' `op_safe_logsumexp(x, axis, keepdims)`: `log(sum(exp(x)))` whose gradient is 0 (not `NaN`)
#' for entries of `-Inf`, also when a whole slice is `-Inf`. (Python's `customgrad.ops.logsumexp`;
#' [op_logsumexp()] is the plain keras op.)
#' `op_efficient_swish(x)`: `x * sigmoid(x)` whose backward keeps only `x` and recomputes the
#' sigmoid. (Python's `customgrad.ops.swish`; [op_swish()] is the plain keras op.)
#'
#' @param x A tensor or R array.
#' @param scale,min_value,max_value,max_norm Numbers.
#' @param fn An R function of one tensor, written with `op_*` functions.
#' @param axis Axes to reduce (1-based, as in the other `op_*` functions); `NULL` for all.
#' @param keepdims Whether reduced axes are kept with length 1.
#' @return A tensor; `op_straight_through()` returns a function.
#' @name customgrad_ops
#' @examplesIf customgrad:::python_available()
#' op_grad(op_log1pexp)(100)
#' op_grad(\(x) op_safe_norm(x))(c(0, 0))
NULL

#' @rdname customgrad_ops
#' @export
op_log1pexp <- function(x) cg_ops_call("log1pexp", as_tensor(x), .fn = "op_log1pexp")

#' @rdname customgrad_ops
#' @export
op_reverse_gradient <- function(x, scale = 1) {
  cg_ops_call("reverse_gradient", as_tensor(x), scale = scale, .fn = "op_reverse_gradient")
}

#' @rdname customgrad_ops
#' @export
op_scale_gradient <- function(x, scale) {
  cg_ops_call("scale_gradient", as_tensor(x), scale, .fn = "op_scale_gradient")
}

#' @rdname customgrad_ops
#' @export
op_clip_gradient <- function(x, min_value, max_value) {
  cg_ops_call("clip_gradient", as_tensor(x), min_value, max_value, .fn = "op_clip_gradient")
}

#' @rdname customgrad_ops
#' @export
op_clip_gradient_norm <- function(x, max_norm) {
  cg_ops_call("clip_gradient_norm", as_tensor(x), max_norm, .fn = "op_clip_gradient_norm")
}

#' @rdname customgrad_ops
#' @export
op_round_ste <- function(x) cg_ops_call("round_ste", as_tensor(x), .fn = "op_round_ste")

#' @rdname customgrad_ops
#' @export
op_sign_ste <- function(x) cg_ops_call("sign_ste", as_tensor(x), .fn = "op_sign_ste")

#' @rdname customgrad_ops
#' @export
op_straight_through <- function(fn) {
  if (!is.function(fn)) {
    cg_abort(
      c("{.fn op_straight_through} needs a function of one tensor.",
        x = "Received {describe_value(fn)}."),
      "customgrad_type_error"
    )
  }
  force(fn)
  op_custom_gradient(function(x) {
    y <- op_cast(fn(x), x$dtype)
    tuple(y, function(upstream) upstream)
  })
}

#' @rdname customgrad_ops
#' @export
op_safe_sqrt <- function(x) cg_ops_call("safe_sqrt", as_tensor(x), .fn = "op_safe_sqrt")

#' @rdname customgrad_ops
#' @export
op_safe_norm <- function(x, axis = NULL, keepdims = FALSE) {
  cg_ops_call("safe_norm", as_tensor(x), axis = as_axis(axis, "op_safe_norm"),
              keepdims = keepdims, .fn = "op_safe_norm")
}

#' @rdname customgrad_ops
#' @export
op_safe_logsumexp <- function(x, axis = NULL, keepdims = FALSE) {
  cg_ops_call("logsumexp", as_tensor(x), axis = as_axis(axis, "op_safe_logsumexp"),
              keepdims = keepdims, .fn = "op_safe_logsumexp")
}

#' @rdname customgrad_ops
#' @export
op_efficient_swish <- function(x) cg_ops_call("swish", as_tensor(x), .fn = "op_efficient_swish")
