#' Hessian-vector products on any backend
#'
#' `op_hvp(f, primals, vectors)` returns the product of the Hessian of the scalar `f` at `primals`
#' with `vectors`, one entry per argument of `f` (forward over reverse: the JVP of [op_grad()] of
#' `f`). For a function made by [op_custom_gradient()] the Hessian is the derivative of its grad
#' function, on every backend (on jax too, without `forward_mode = TRUE`). It is the R face of
#' Python's `customgrad.hvp`.
#'
#' @param f An R function of one or more tensors returning a scalar tensor.
#' @param primals A list with the arguments of `f` (R numbers and arrays become tensors); a single
#'   argument may be given as it is.
#' @param vectors A list like `primals`: the vectors to multiply the Hessian with.
#' @return A list with one tensor per argument of `f`.
#' @examplesIf customgrad:::python_available()
#' log1pexp <- op_custom_gradient(\(x) {
#'   e <- op_exp(x)
#'   tuple(op_log(1 + e), function(dy) dy * op_sigmoid(x))
#' })
#' # the Hessian of sum(log1pexp(x)) is diag(sigmoid(x) * (1 - sigmoid(x)))
#' op_hvp(\(x) op_sum(log1pexp(x)), c(0, 2), c(1, 1))
#' @export
op_hvp <- function(f, primals, vectors) {
  pyf <- r_fn_to_py(f)
  result <- with_py_errors(
    py_mod("customgrad")$hvp(pyf, as_tuple_arg(primals), as_tuple_arg(vectors)),
    current_env())
  as.list(result)
}

# primals or tangents as the Python tuple customgrad.jvp/hvp take: one tensor per argument.
as_tuple_arg <- function(x) {
  if (!is.list(x)) x <- list(x)
  do.call(reticulate::tuple, lapply(x, to_py))
}

#' Jacobian-vector products on any backend
#'
#' `op_jvp(f, primals, tangents)` returns `list(outputs, output_tangents)`: the directional
#' derivative of `f` at `primals` along `tangents` (forward mode), the R face of Python's
#' `customgrad.jvp`. For a function made by [op_custom_gradient()] it is derived from the grad
#' function (on jax that needs `forward_mode = TRUE`).
#'
#' @param f An R function of one or more tensors.
#' @param primals A list with the arguments of `f` (R numbers and arrays become tensors); a single
#'   argument may be given as it is.
#' @param tangents A list like `primals`.
#' @param has_aux Whether `f` returns `list(output, aux)`; `aux` is then a third element.
#' @return `list(outputs, output_tangents)` (and `aux`).
#' @examplesIf customgrad:::python_available()
#' op_jvp(\(x) x^2, list(3), list(1))
#' @export
op_jvp <- function(f, primals, tangents, has_aux = FALSE) {
  pyf <- r_fn_to_py(f)
  result <- with_py_errors(
    py_mod("customgrad")$jvp(pyf, as_tuple_arg(primals), as_tuple_arg(tangents),
                             has_aux = has_aux), current_env())
  as.list(result)
}
