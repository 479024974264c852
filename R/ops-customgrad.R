# The help page of the R functions over customgrad.ops, and the one written by hand: the
# wrappers themselves are generated into R/ops-generated-customgrad.R (tools/generate_ops.py).

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

# Python's straight_through() wraps a Python function; this one wraps an R function, so it is
# built from op_custom_gradient() rather than generated.
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
