# The R face of customgrad.grad / value_and_grad / vjp / check_gradients (1-based argnums).

r_fn_to_py <- function(f, arg = caller_arg(f), call = caller_env()) {
  if (!is.function(f)) {
    cg_abort(c("{.arg {arg}} must be a function.", x = "Received {obj_type_friendly(f)}."),
             "type", call = call)
  }
  if (inherits(f, "customgrad_function")) {
    return(with_py_errors(attr(f, "python_function")(), call))
  }
  wrap_r_function(f)
}

as_argnums <- function(argnums, arg = caller_arg(argnums), call = caller_env()) {
  if (!is.numeric(argnums) || !length(argnums) || anyNA(argnums) ||
      any(argnums != round(argnums)) || any(argnums < 1)) {
    # obj_type_friendly() shows a single number; several are listed after it
    values <- if (is.numeric(argnums) && length(argnums) > 1L) {
      paste0(": ", paste(argnums, collapse = ", "))
    }
    cg_abort(
      c("{.arg {arg}} must be positive whole numbers (1-based).",
        x = "Received {obj_type_friendly(argnums)}{values}."),
      "argnums", call = call
    )
  }
  argnums <- as.integer(argnums) - 1L
  if (length(argnums) == 1L) argnums else do.call(reticulate::tuple, as.list(argnums))
}

call_args <- function(..., .f = NULL) {
  args <- list(...)
  # the common case, tensors passed positionally: nothing to convert
  if (is.null(names(args))) {
    all_py <- TRUE
    for (a in args) if (!inherits(a, "python.builtin.object")) { all_py <- FALSE; break }
    if (all_py) return(args)
  }
  lapply(positional_args(.f, args), to_py)
}

# R callers name arguments freely; Python gives gradients only to positional ones. Named
# arguments that match formals of `f` are passed positionally, in the order of the formals.
positional_args <- function(f, args) {
  f <- attr(f, "r_function") %||% f
  nms <- names(args)
  if (!is.function(f) || is.null(nms) || !any(nzchar(nms))) return(args)
  fm <- names(formals(f))
  if (is.null(fm) || "..." %in% fm) return(args)
  mc <- match.call(f, as.call(c(list(as.name("f")), args)))
  out <- as.list(mc)[-1]
  if (!all(names(out) %in% fm)) return(args)
  unname(out[order(match(names(out), fm))])
}

#' Gradients on any backend
#'
#' `op_grad(f)` returns a function computing the gradient of the scalar `f(...)` with respect to
#' its `argnums`-th argument(s) (1-based); `op_value_and_grad(f)` also returns the value. They use
#' the active backend's autodiff (and custom gradients from [op_custom_gradient()]), compose with
#' each other (gradient of a gradient), and return tensors. With several `argnums` the gradient is
#' a list. `op_vjp(f, ...)` returns the outputs and a function mapping cotangents to gradients.
#'
#' @param f An R function returning a scalar tensor (or, with `has_aux = TRUE`,
#'   `list(scalar, aux)`).
#' @param argnums Which arguments to differentiate with respect to (1-based).
#' @param has_aux Whether `f` returns `list(value, aux)`.
#' @return A function taking `f`'s arguments (R numbers and arrays become tensors).
#'   `op_grad()`'s returns the gradient (with `has_aux`, `list(gradient, aux)`);
#'   `op_value_and_grad()`'s returns `list(value, gradient)`.
#' @examplesIf customgrad:::python_available()
#' d <- op_grad(function(x) op_sum(x^3))
#' d(c(1, 2))
#' dd <- op_grad(op_grad(function(x) x^3))
#' dd(2)
#' op_value_and_grad(function(x, y) x * y, argnums = c(1, 2))(3, 4)
#' @export
op_grad <- function(f, argnums = 1L, has_aux = FALSE) {
  pyf <- r_fn_to_py(f)
  nums <- as_argnums(argnums)
  g <- with_py_errors(py_mod("customgrad")$grad(pyf, argnums = nums, has_aux = has_aux),
                      current_env())
  call <- current_call()
  function(...) with_py_errors(py_invoke(g, call_args(..., .f = f)), call)
}

#' @rdname op_grad
#' @export
op_value_and_grad <- function(f, argnums = 1L, has_aux = FALSE) {
  pyf <- r_fn_to_py(f)
  nums <- as_argnums(argnums)
  g <- with_py_errors(py_mod("customgrad")$value_and_grad(pyf, argnums = nums, has_aux = has_aux),
                      current_env())
  call <- current_call()
  function(...) with_py_errors(py_invoke(g, call_args(..., .f = f)), call)
}

#' @rdname op_grad
#' @param ... For `op_vjp()`, the primal inputs of `f`.
#' @export
op_vjp <- function(f, ...) {
  pyf <- r_fn_to_py(f)
  res <- with_py_errors(do.call(py_mod("customgrad")$vjp, c(list(pyf), call_args(..., .f = f))),
                        current_env())
  vjp_fn <- res[[2]]
  call <- current_call()
  list(res[[1]], function(cotangents) with_py_errors(vjp_fn(to_py(cotangents)), call))
}

#' Check a gradient against finite differences
#'
#' The R face of Python's `customgrad.check_gradients`: compares the gradient autodiff uses for
#' `f` (its custom gradient, if it has one) with float64 central finite differences of `f`
#' (or, with `against = "autodiff"`, with plain autodiff of its forward). A wrong gradient raises
#' an error of class `customgrad_error_gradient_check` (unless `raise_on_failure = FALSE`) whose
#' message names the failing check.
#'
#' @param f The function to check, e.g. made by [op_custom_gradient()].
#' @param ... Its arguments (R numbers and arrays become tensors).
#' @param atol,rtol Tolerances (by default chosen by dtype).
#' @param eps The finite-difference step (float64).
#' @param order 1 checks first derivatives; 2 also checks second derivatives.
#' @param against `"finite_differences"` or `"autodiff"`.
#' @param jacobian Also compare the full Jacobian (small inputs only).
#' @param directions Random directions per input.
#' @param seed Random seed.
#' @param raise_on_failure Raise an error when a check fails (default) or just return the report.
#' @return An object of class `customgrad_gradient_check`, which prints its report (in R's
#'   words: `op_check_gradients(f)`, `args[[1]]`): a list with `passed` (logical), `checks` (a
#'   data frame: name, where, error, allowed, passed) and `report` (text).
#' @examplesIf customgrad:::python_available()
#' square <- op_custom_gradient(function(x) tuple(x^2, function(dy) dy * 2 * x))
#' op_check_gradients(square, c(0.5, 2))
#' @export
op_check_gradients <- function(f, ..., atol = NULL, rtol = NULL, eps = NULL, order = 1L,
                               against = c("finite_differences", "autodiff"), jacobian = FALSE,
                               directions = 2L, seed = 0L, raise_on_failure = TRUE) {
  against <- match.arg(against)
  if (!order %in% c(1, 2)) {
    cg_abort(c("{.arg order} must be 1 or 2.", x = "Received {order}."), "argument")
  }
  cg <- with_py_errors(py_mod("customgrad"), current_env())
  if (!reticulate::py_has_attr(cg, "check_gradients")) {
    cg_abort(c("The Python package customgrad must provide {.code check_gradients}.",
               x = "The installed one does not; it is older than this R package.",
               i = "Run {.run customgrad::install_customgrad()} to install the matching version."),
             "python_missing")
  }
  pyf <- if (is.function(f)) r_fn_to_py(f) else f
  args <- c(list(pyf), call_args(..., .f = f))
  kwargs <- list(order = as.integer(order), against = against, jacobian = jacobian,
                 directions = as.integer(directions), seed = as.integer(seed),
                 atol = atol, rtol = rtol, eps = eps, raise_on_failure = FALSE)
  report <- with_py_errors(do.call(cg$check_gradients, c(args, kwargs)), current_env())
  checks <- lapply(report$checks, function(ch) {
    data.frame(name = ch$name, where = r_path(ch$where), error = ch$error, allowed = ch$allowed,
               passed = isTRUE(ch$passed), stringsAsFactors = FALSE)
  })
  checks <- if (length(checks)) do.call(rbind, checks) else
    data.frame(name = character(), where = character(), error = numeric(), allowed = numeric(),
               passed = logical())
  out <- structure(
    list(passed = isTRUE(report$passed), checks = checks,
         report = r_terms(sub("^check_gradients\\(", "op_check_gradients(",
                              reticulate::py_str(report)))),
    class = "customgrad_gradient_check"
  )
  if (raise_on_failure && !out$passed) {
    first <- checks[!checks$passed, , drop = FALSE][1, ]
    cg_abort(
      c("The gradient of {.arg f} must match {if (against == 'autodiff') 'plain autodiff' else 'float64 finite differences'}.",
        x = "{first$name} failed at {.code {first$where}}: error {signif(first$error, 4)} > allowed {signif(first$allowed, 4)} ({sum(!checks$passed)} of {nrow(checks)} checks failed).",
        i = "Call with {.code raise_on_failure = FALSE} to get the whole report."),
      "gradient_check", report = out
    )
  }
  out
}

#' @export
print.customgrad_gradient_check <- function(x, ...) {
  cat(x$report, "\n", sep = "")
  invisible(x)
}
