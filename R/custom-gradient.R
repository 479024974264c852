#' Define a function with a custom gradient
#'
#' `f` computes the forward pass and returns `tuple(output, grad)` (or `list(output, grad)`).
#' Autodiff on the active backend (jax, TensorFlow or torch: [op_grad()], `tf$GradientTape()`,
#' `torch` autograd, `fit()`) then uses `grad` instead of differentiating `f`. This is the R face of
#' Python's `customgrad.custom_gradient`, so it behaves the same on every backend.
#'
#' The grad function receives the upstream gradient by one rule, the same as in Python:
#' * exactly one positional argument (`function(dy)`): the whole upstream, in the structure of the
#'   output (a tensor for a single output, a list for a list or tuple output of several
#'   elements, as `jax.custom_gradient` passes it);
#' * `...` (`function(...)`) or one argument per output (`function(dy1, dy2)`): one upstream per
#'   output, positionally (as `tf.custom_gradient` passes them);
#' * an argument named `upstream` (`function(upstream)`, `function(..., upstream)`): the whole upstream
#'   by name, and with `...` also one per output positionally. `function(..., upstream = NULL)`
#'   with `upstream <- upstream \%||\% ..1` works both ways.
#'
#' Any other grad function (`function()`, or more required arguments than outputs) is an error of
#' class `customgrad_error_grad_fn_arity` that names it and says what it would be called with.
#'
#' It returns the gradient with respect to each argument of `f`: a single tensor when `f` takes one
#' argument, else a list with one entry per argument (named lists for named-list arguments).
#' `NULL` means a zero gradient. If `f` reads trainable `keras.Variable`s, the grad function must
#' also take `variables` and return `list(grad_args, grad_variables)`.
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
#' log1pexp <- op_custom_gradient(\(x) {
#'   e <- op_exp(x)
#'   grad <- function(..., upstream = NULL) {
#'     upstream <- upstream %||% ..1
#'     op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
#'   }
#'   tuple(op_log(1 + e), grad)
#' })
#' log1pexp(100)
#' op_grad(log1pexp)(100)  # 1, where plain autodiff gives NaN
#' @export
op_custom_gradient <- function(f, forward_mode = FALSE) {
  if (!is.function(f)) {
    cg_abort(
      c("{.arg f} must be a function returning {.code tuple(output, grad)}.",
        x = "Received {describe_value(f)}."),
      "type"
    )
  }
  force(f)
  fname <- paste(deparse(substitute(f), width.cutoff = 60L)[[1]], collapse = "")
  if (!grepl("^[A-Za-z._][A-Za-z0-9._]*$", fname)) fname <- "f"

  user_call <- as.call(list(as.name(fname)))
  forward <- function(...) in_callback({
    res <- f(...)
    pair <- split_output_grad(res, user_call)
    output <- pair[[1]]
    grad <- pair[[2]]
    if (is_py_object(grad)) {
      return(list(to_py(output, tensors = TRUE), py_grad_caller(grad), FALSE))
    }
    plan <- grad_plan(grad, count_outputs(output), fname, user_call)
    list(to_py(output, tensors = TRUE), grad_caller(grad, plan, user_call), plan$by_name)
  })

  decorated <- NULL
  python_function <- function() {
    if (is.null(decorated)) {
      decorated <<- with_py_errors(
        py_mod("bridge")$custom_gradient(forward, name = fname,
                                       forward_mode = isTRUE(forward_mode)),
        "op_custom_gradient",
        call = user_call
      )
    }
    decorated
  }
  structure(
    function(...) {
      with_py_errors(py_invoke(python_function(), call_args(..., .f = f)), fname)
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

split_output_grad <- function(res, call) {
  if (is_py_object(res) && inherits(res, "python.builtin.tuple")) {
    res <- list(reticulate::py_get_item(res, 0L), reticulate::py_get_item(res, 1L))
  }
  if (!is.list(res) || length(res) != 2L) {
    cg_abort(
      c("The function given to {.fn op_custom_gradient} must return {.code tuple(output, grad)}.",
        x = "It returned {describe_value(res)}."),
      "custom_gradient", call = call
    )
  }
  grad <- res[[2]]
  if (!is.function(grad) && !(is_py_object(grad) && reticulate::py_has_attr(grad, "__call__"))) {
    cg_abort(
      c("The second element returned by the function given to {.fn op_custom_gradient} must be the grad function.",
        x = "It is {describe_value(grad)}."),
      "custom_gradient", call = call
    )
  }
  res
}

# How many upstream gradients arrive positionally: one per element of an unnamed list or tuple
# output (Python receives those as a list or tuple), else one.
count_outputs <- function(output) {
  if (is.list(output) && is.null(names(output))) return(length(output))
  if (inherits(output, c("python.builtin.tuple", "python.builtin.list"))) {
    return(reticulate::py_len(output))
  }
  1L
}

# The one upstream rule, read from the grad function's R formals (`variables` aside):
#   exactly one positional formal (not `upstream`) -> the whole upstream (a list for n > 1 outputs)
#   `...`, or as many positional formals as outputs -> one upstream per output
#   a formal named `upstream`                      -> also the whole upstream by name
#   anything else                                  -> customgrad_error_grad_fn_arity
grad_plan <- function(grad, n_outputs, fname, call) {
  formal_names <- names(formals(grad))
  # the common one-argument grad functions, decided without the general rule (this runs in
  # every eager forward)
  if (length(formal_names) == 1L) {
    mode <- switch(formal_names,
      "..." = "per_output",
      upstream = "none",
      variables = "error",
      if (n_outputs == 1L) "per_output" else "whole"
    )
    if (mode != "error") {
      return(list(mode = mode, by_name = formal_names == "upstream",
                  takes_variables = formal_names == "...", formal_names = formal_names))
    }
  }
  formal_names <- formal_names %||% character()
  has_dots <- "..." %in% formal_names
  by_name <- "upstream" %in% formal_names
  if (has_dots) {
    return(list(mode = "per_output", by_name = by_name, takes_variables = TRUE,
                formal_names = formal_names))
  }
  formal_list <- formals(grad)
  takes_variables <- "variables" %in% formal_names
  positional <- formal_names[!formal_names %in% c("...", "upstream", "variables")]
  required <- positional[vapply(formal_list[positional], is_missing_default, logical(1))]
  mode <- if (!length(positional) && by_name) {
    "none"
  } else if (length(positional) == 1L) {
    if (n_outputs == 1L) "per_output" else "whole"
  } else if (length(positional) && length(required) <= n_outputs &&
             n_outputs <= length(positional)) {
    "per_output"
  } else {
    "error"
  }
  if (mode == "error") {
    signature <- paste0("function(", paste(formal_names, collapse = ", "), ")")
    outputs <- if (n_outputs == 1L) "a single output" else sprintf("%d outputs", n_outputs)
    cg_abort(
      c("The grad function of {.fn {fname}} must take the upstream gradient.",
        x = "It is {.code {signature}}; {.fn {fname}} has {outputs}, so it would be called with {n_outputs} upstream gradient{?s} positionally.",
        i = "Write {.code function(dy)} (the whole upstream), {.code function(...)} or one argument per output (one upstream each), or {.code function(upstream)} (by name)."),
      "grad_fn_arity", call = call, grad_fn = grad, n_outputs = n_outputs
    )
  }
  list(mode = mode, by_name = by_name, takes_variables = takes_variables,
       formal_names = formal_names)
}

is_missing_default <- function(x) identical(x, quote(expr = ))

# Calls a grad function written in Python (a reticulate callable) positionally.
py_grad_caller <- function(grad) {
  force(grad)
  function(upstreams, upstream, variables) in_callback({
    args <- if (is.null(variables)) upstreams else c(upstreams, list(variables = variables))
    to_py(do.call(grad, args), tensors = TRUE)
  })
}

# How to call the user's R grad function, following its plan (see grad_plan()). `variables =` is
# passed when the forward read trainable variables.
grad_caller <- function(grad, plan, call) {
  force(grad)
  mode <- plan$mode
  by_name <- plan$by_name
  function(upstreams, upstream, variables) in_callback({
    upstreams <- as.list(upstreams)
    args <- switch(mode,
      per_output = upstreams,
      whole = list(upstreams),
      none = list()
    )
    if (by_name) args$upstream <- upstream
    if (length(variables)) {
      if (!plan$takes_variables) {
        cg_abort(
          c("The forward of this custom gradient read {length(variables)} trainable variable{?s}, so its grad function must take {.arg variables} and return {.code list(grad_args, grad_variables)}.",
            x = "The grad function has arguments {.arg {plan$formal_names}}."),
          "custom_gradient", call = call
        )
      }
      args$variables <- variables
    }
    result <- do.call(grad, args)
    to_py(result, tensors = TRUE)  # NULL in a list stays None: a zero gradient
  })
}
