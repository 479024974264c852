# Thin wrappers over the Python module customgrad.ops (issue 5, R part).

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
#'
#' @param x A tensor or R array.
#' @param scale,min_value,max_value Numbers.
#' @return A tensor.
#' @name customgrad_ops
#' @examplesIf customgrad:::python_available()
#' op_grad(op_log1pexp)(100)
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
