#' Define a function with a custom gradient (customgrad's, which masks keras3's)
#'
#' `f` computes the forward pass and returns `tuple(output, grad)` (keras3's and reticulate's
#' `tuple()`) or `list(output, grad)`.
#' Autodiff on the active backend (jax, TensorFlow or torch: [op_grad()], `tf$GradientTape()`,
#' `torch` autograd, `fit()`) then uses `grad` instead of differentiating `f`. This is the R face of
#' Python's `customgrad.custom_gradient`, so it behaves the same on every backend.
#'
#' keras3 has a function of the same name, so `?op_custom_gradient` can open keras3's page rather
#' than this one: R's help takes the first loaded package that has the topic, and keras3 always
#' loads before customgrad, whatever the order of `library()` calls. Open this page with
#' `?customgrad::op_custom_gradient`. In code, `op_custom_gradient()` is customgrad's whichever
#' package you attach first.
#'
#' The grad function receives the upstream gradients by customgrad's one rule, the same as in
#' Python: it is stated once, in the Python site's convention page (`docs/convention.md`,
#' "How upstream gradients arrive"). The R grad function reaches Python as a callable whose
#' signature mirrors its R formals (`...` is `*args`, formals after `...` are keyword-only, a
#' default stays a default), so `function(dy)`, `function(dy1, dy2)`, `function(...)`,
#' `function(upstream)`, keras3's `function(..., upstream)` and, for both ways at once,
#'
#' ```
#' function(..., upstream = NULL) { upstream <- upstream %||% ..1; ... }
#' ```
#'
#' all work (customgrad re-exports rlang's `%||%`, which base R has only from 4.4). A grad
#' function the rule cannot call is an error of class
#' `customgrad_error_grad_fn_arity` that names it and says what it would be called with.
#'
#' This function masks keras3's `op_custom_gradient()` on purpose (the only name customgrad
#' shares with keras3): keras3's passes the grad function to Keras as it is, so on torch
#' `function(upstream)` and `function(dy)` fail and a `keras.Variable` argument can get a wrong
#' gradient.
#'
#' It returns the gradient with respect to each argument of `f`: a single tensor when `f` takes one
#' argument, else a list with one entry per argument (named lists for named-list arguments).
#' `NULL` means a zero gradient. If `f` reads trainable `keras.Variable`s, the grad function must
#' also take `variables` and return `list(grad_args, grad_variables)`. Gradients that do not fit
#' (not one per argument, a shape other than the argument's) are an error of class
#' `customgrad_error_grad_fn_result`.
#'
#' Arguments of the returned function that are R numbers or arrays become tensors (R doubles of
#' the default float dtype).
#'
#' Forward mode ([op_jvp()], [op_hvp()]) derives its derivatives from the same grad function. On
#' torch and TensorFlow that needs nothing more; on jax it needs `forward_mode = TRUE` (jax builds
#' such a function on `jax.custom_jvp`; its reverse-mode gradients stay grad's).
#'
#' @param f An R function returning `tuple(output, grad)`.
#' @param forward_mode `TRUE` to let `jax.jvp`/[op_jvp()] differentiate the function on jax
#'   (ignored by the other backends, where forward mode always works).
#' @return A function with the arguments of `f` that returns `output`.
#' @examplesIf customgrad:::python_available()
#' # keras3's "backend-agnostic example" (keras3 1.5.1, ?keras3::op_custom_gradient), as it is;
#' # its `%||%` is rlang's, re-exported by customgrad (base R has one only from 4.4)
#' log1pexp <- op_custom_gradient(\(x) {
#'
#'     e <- op_exp(x)
#'
#'     grad <- function(..., upstream = NULL) {
#'       upstream <- upstream %||% ..1
#'       op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
#'     }
#'
#'     tuple(op_log(1 + e), grad)
#'
#' })
#'
#' if(config_backend() == "tensorflow") {
#'   tf <- tensorflow::tf
#'   x <- op_convert_to_tensor(100.0)
#'   with(tf$GradientTape() %as% tape, {
#'     tape$watch(x)
#'     y <- log1pexp(x)
#'   })
#'   dy_dx <- tape$gradient(y, x)
#'   stopifnot(as.numeric(dy_dx) == 1)
#' }
#'
#' # on every backend: the gradient at 100 is 1, where plain autodiff gives NaN
#' op_grad(log1pexp)(100)
#' # the value itself overflows float32 at 100 (Inf): the gradient is what is stable
#' log1pexp(100)
#' log1pexp(10)
#' @export
op_custom_gradient <- function(f, forward_mode = FALSE) {
  if (!is.function(f)) {
    cg_abort(
      c("{.arg f} must be a function returning {.code tuple(output, grad)}.",
        x = "Received {obj_type_friendly(f)}."),
      "type"
    )
  }
  force(f)
  fname <- paste(deparse(substitute(f), width.cutoff = 60L)[[1]], collapse = "")
  if (!grepl("^[A-Za-z._][A-Za-z0-9._]*$", fname)) fname <- "f"

  user_call <- as.call(list(as.name(fname)))
  # keras3's tuple(output, grad) goes to the bridge as f returned it: the bridge takes the common
  # one (a tensor and an R function) apart itself, and hands any other back to `split_res`
  forward <- function(...) in_callback({
    res <- f(...)
    if (inherits(res, "python.builtin.tuple")) res else output_grad_for_python(res, user_call)
  })
  # `pair`: the bridge's split_pair(res), unconverted like `res`
  split_res <- function(res, pair) {
    in_callback(output_grad_for_python(res, user_call, reticulate::py_to_r(pair)))
  }

  decorated <- NULL
  python_function <- function() {
    if (is.null(decorated)) {
      decorated <<- with_py_errors(
        py_mod("bridge")$custom_gradient(
          forward, name = fname, forward_mode = isTRUE(forward_mode),
          # a callable that leaves its arguments unconverted: `res` is the tuple f returned
          r_split = reticulate::r_to_py(split_res, convert = FALSE),
          r_signature_of = grad_signature, r_call = call_r_function,
          r_call_upstream_twice = call_r_function_upstream_twice
        ),
        user_call
      )
    }
    decorated
  }
  structure(
    function(...) {
      with_py_errors(py_invoke(python_function(), call_args(..., .f = f)), user_call)
    },
    class = c("customgrad_function", "function"),
    python_function = python_function,
    r_function = f
  )
}

#' @export
print.customgrad_function <- function(x, ...) {
  cat("<function with a custom gradient (customgrad)>\n")
  invisible(x)
}

# f's result as list(output, grad): an R list, or the Python tuple keras3's tuple() makes, which
# comes with `pair`, the bridge's split_pair() of it (NULL when the tuple is not a pair).
split_output_grad <- function(res, call, pair = NULL) {
  if (!is.null(pair)) res <- list(pair[[1]], pair[[2]] %||% reticulate::py_get_item(res, 1L))
  if (!is.list(res) || length(res) != 2L) {
    cg_abort(
      c("The function given to {.fn op_custom_gradient} must return {.code tuple(output, grad)}.",
        x = "It returned {obj_type_tensor(res)}."),
      "custom_gradient", call = call
    )
  }
  grad <- res[[2]]
  if (!is.function(grad) && !(is_py_object(grad) && reticulate::py_has_attr(grad, "__call__"))) {
    cg_abort(
      c("The second element returned by the function given to {.fn op_custom_gradient} must be the grad function.",
        x = "It is {obj_type_tensor(grad)}."),
      "custom_gradient", call = call
    )
  }
  res
}

# f's result as Python receives it: list(output, grad), the output converted by to_py() and grad
# by grad_for_python().
output_grad_for_python <- function(res, call, pair = NULL) {
  pair <- split_output_grad(res, call, pair)
  list(to_py(pair[[1]]), grad_for_python(pair[[2]]))
}

# What Python receives as grad_fn: an R function (split_output_grad() found it also behind the
# Python callable tuple() made of it) as list(the function, its signature), from which the
# bridge builds a callable called through call_r_function(); a Python callable as it is.
grad_for_python <- function(grad) {
  if (is_py_object(grad)) return(grad)
  list(grad, grad_signature(grad))
}

# The Python signature mirroring an R function's formals (the bridge's r_signature()). A grad
# function is made anew at every step, by the same `function(...)` expression, so each one has
# the same formals object as the one before: the signatures of the last 16 formals are kept here
# (cheaper than formals' names and defaults sent to Python every step). identical() compares the
# formals themselves (at once when they are the same object), so a cached signature is only
# ever used for formals equal to those it was made of.
grad_signature <- function(fn) {
  formal_list <- formals(fn)
  cached <- .cg$grad_signatures
  for (entry in cached) if (identical(entry[[1L]], formal_list)) return(entry[[2L]])
  has_default <- !vapply(formal_list, is_missing_default, logical(1))
  sig <- bridge_fn("r_signature")(as.list(names(formal_list)), as.list(unname(has_default)))
  .cg$grad_signatures <- c(list(list(formal_list, sig)), utils::head(cached, 15L))
  sig
}

is_missing_default <- function(x) identical(x, quote(expr = ))
