#' Define a function with a custom gradient
#'
#' `f` computes the forward pass and returns `tuple(output, grad)` (or `list(output, grad)`).
#' Autodiff on the active backend (jax, TensorFlow or torch: [op_grad()], `tf$GradientTape()`,
#' `torch` autograd, `fit()`) then uses `grad` instead of differentiating `f`. This is the R face of
#' Python's `customgrad.custom_gradient`, so it behaves the same on every backend.
#'
#' The grad function receives the upstream gradient (one per output; for a list or tuple output one
#' per element) and may be written in any of these ways:
#' * `function(upstream)` or `function(dy)`: the upstream gradient(s) positionally;
#' * `function(..., upstream = NULL)` with `upstream <- upstream %||% ..1`, or
#'   `\(..., upstream)`: the upstream gradients positionally *and* as `upstream =` (the whole
#'   upstream structure: a tensor for a single output, a list for several).
#'
#' It returns the gradient with respect to each argument of `f`: a single tensor when `f` takes one
#' argument, else a list with one entry per argument (named lists for named-list arguments).
#' `NULL` means a zero gradient. If `f` reads trainable `keras.Variable`s, the grad function must
#' also take `variables` and return `list(grad_args, grad_variables)`.
#'
#' Arguments of the returned function that are R numbers or arrays become tensors (R doubles of
#' the default float dtype).
#'
#' @param f An R function returning `tuple(output, grad)`.
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
op_custom_gradient <- function(f) {
  if (!is.function(f)) {
    cg_abort(
      c("{.fn op_custom_gradient} needs a function {.code f(...)} returning {.code tuple(output, grad)}.",
        x = "Received {describe_value(f)}."),
      "customgrad_type_error"
    )
  }
  force(f)
  fname <- paste(deparse(substitute(f), width.cutoff = 60L)[[1]], collapse = "")
  if (!grepl("^[A-Za-z._][A-Za-z0-9._]*$", fname)) fname <- "f"

  forward <- function(...) in_callback({
    res <- f(...)
    pair <- split_output_grad(res)
    grad <- pair[[2]]
    wants_upstream <- is.function(grad) && "upstream" %in% names(formals(grad))
    list(to_py_tree(pair[[1]]), grad_caller(grad), wants_upstream)
  })

  decorated <- NULL
  python_function <- function() {
    if (is.null(decorated)) {
      decorated <<- with_py_errors(
        py_mod("glue")$custom_gradient(forward, name = fname), "op_custom_gradient"
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

split_output_grad <- function(res) {
  if (is_py_object(res) && inherits(res, "python.builtin.tuple")) {
    res <- list(reticulate::py_get_item(res, 0L), reticulate::py_get_item(res, 1L))
  }
  if (!is.list(res) || length(res) != 2L) {
    cg_abort(
      c("The function given to {.fn op_custom_gradient} must return {.code tuple(output, grad)}.",
        x = "It returned {describe_value(res)}."),
      "customgrad_custom_gradient_error", call = NULL
    )
  }
  grad <- res[[2]]
  if (!is.function(grad) && !(is_py_object(grad) && reticulate::py_has_attr(grad, "__call__"))) {
    cg_abort(
      c("The second element returned by the function given to {.fn op_custom_gradient} must be the grad function.",
        x = "It is {describe_value(grad)}."),
      "customgrad_custom_gradient_error", call = NULL
    )
  }
  res
}

# How to call the user's grad function, from its R formals:
#   ... and upstream -> upstreams positionally and upstream = (the whole upstream structure)
#   upstream only    -> upstream = (the whole upstream structure)
#   anything else    -> upstreams positionally (function(dy), function(dy1, dy2), function(...))
# variables = is passed when the forward read trainable variables.
grad_caller <- function(grad) {
  force(grad)
  if (is_py_object(grad)) {
    return(function(upstreams, upstream, variables) in_callback({
      args <- if (is.null(variables)) upstreams else c(upstreams, list(variables = variables))
      to_py_tree(do.call(grad, args))
    }))
  }
  formal_names <- names(formals(grad)) %||% character()
  has_dots <- "..." %in% formal_names
  has_upstream <- "upstream" %in% formal_names
  takes_variables <- "variables" %in% formal_names || has_dots
  function(upstreams, upstream, variables) in_callback({
    upstreams <- as.list(upstreams)
    args <- if (has_upstream && has_dots) {
      c(upstreams, list(upstream = upstream))
    } else if (has_upstream) {
      list(upstream = upstream)
    } else {
      upstreams
    }
    if (length(variables)) {
      if (!takes_variables) {
        cg_abort(
          c("The forward of this custom gradient read {length(variables)} trainable variable{?s}, so its grad function must take {.arg variables} and return {.code list(grad_args, grad_variables)}.",
            x = "The grad function has arguments {.arg {formal_names}}."),
          "customgrad_custom_gradient_error", call = NULL
        )
      }
      args$variables <- variables
    }
    result <- do.call(grad, args)
    to_py_grads(result)
  })
}

# Gradients back to Python: R numbers become tensors, lists keep NULLs (= zero gradients).
to_py_grads <- function(x) {
  if (is.null(x) || is_py_object(x)) return(x)
  if (is.list(x) && !inherits(x, "customgrad_tuple")) {
    out <- lapply(x, to_py_grads)
    if (!is.null(names(x)) && all(nzchar(names(x)))) {
      return(reticulate::py_dict(names(x), unname(out)))
    }
    return(out)
  }
  to_py_tree(x)
}
