#' Default value for `NULL`
#'
#' `x %||% y` is `y` when `x` is `NULL`, else `x`. Grad functions use it to accept the upstream
#' gradient either positionally or as `upstream =`: `upstream <- upstream %||% ..1`.
#'
#' @param x,y Any values.
#' @return `x` if it is not `NULL`, else `y`.
#' @examples
#' NULL %||% 2
#' 1 %||% 2
#' @name null-default
#' @export
`%||%` <- function(x, y) if (is.null(x)) y else x

#' A tuple
#'
#' Groups values the way a Python tuple does; custom-gradient functions return
#' `tuple(output, grad)`. It is an R list (with class `customgrad_tuple`) that becomes a Python
#' tuple when it is passed to Python.
#'
#' @param ... The elements.
#' @return A list of class `customgrad_tuple`.
#' @examples
#' t <- tuple(1, "a")
#' t[[2]]
#' @export
tuple <- function(...) {
  x <- list(...)
  class(x) <- c("customgrad_tuple", "list")  # not structure(): this runs in every forward
  x
}

#' @exportS3Method reticulate::r_to_py
r_to_py.customgrad_tuple <- function(x, convert = FALSE) {
  do.call(reticulate::tuple, lapply(unclass(x), to_py_tree))
}

#' @export
print.customgrad_tuple <- function(x, ...) {
  cat("<tuple of", length(x), "elements>\n")
  print(unclass(x), ...)
  invisible(x)
}

#' Name a Python context manager in `with()`
#'
#' `with(tf$GradientTape() %as% tape, { ... })` binds the context manager's value to `tape`
#' while the block runs (re-exported from reticulate).
#'
#' @name %as%
#' @param object A Python context manager.
#' @param name The name to bind.
#' @return The context manager, marked for `with()`.
#' @examplesIf customgrad:::python_available() && config_backend() == "tensorflow"
#' tf <- reticulate::import("tensorflow")
#' x <- op_convert_to_tensor(3)
#' with(tf$GradientTape() %as% tape, {
#'   tape$watch(x)
#'   y <- x * x
#' })
#' tape$gradient(y, x)
#' @importFrom reticulate %as%
#' @export %as%
NULL

# ---- errors ------------------------------------------------------------------------------------

#' @importFrom rlang caller_env
NULL

cg_abort <- function(message, class = NULL, ..., call = caller_env(),
                     .envir = parent.frame()) {
  cli::cli_abort(message, class = c(class, "customgrad_error"), ..., call = call,
                 .envir = .envir)
}

# Describes an R value for an error message: "a double vector of length 3", "a function", ...
describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (is_py_object(x)) {
    return(paste0("a Python object of class <", class(x)[[1]], ">"))
  }
  if (is.function(x)) return("a function")
  if (is.list(x)) return(sprintf("a list of length %d", length(x)))
  if (is.array(x)) {
    return(sprintf("a %s array of dimensions %s", typeof(x), paste(dim(x), collapse = "x")))
  }
  sprintf("a %s vector of length %d", typeof(x), length(x))
}

is_py_object <- function(x) inherits(x, "python.builtin.object")

# Errors raised inside R callbacks (called from Python) are kept here so that the R caller
# re-signals the original classed condition rather than Python's wrapper of it.
callback_error <- function(e) {
  .cg$callback_error <- e
  stop(e)
}

in_callback <- function(expr) {
  withCallingHandlers(expr, error = function(e) {
    if (is.null(.cg$callback_error)) .cg$callback_error <- e
  })
}

# Evaluates a Python call; customgrad errors from callbacks are re-signalled as they were, other R
# errors from callbacks become `customgrad_callback_error` (original kept in `r_error`), Python errors
# become `customgrad_python_error` conditions carrying Python's message.
with_py_errors <- function(expr, fn) {
  if (!is.null(.cg$callback_error)) .cg$callback_error <- NULL
  # A calling handler rather than tryCatch(): this wraps every op call, and it costs less.
  # py_error() always signals an error of its own, so the handler never returns.
  withCallingHandlers(expr, error = function(e) py_error(e, fn))
}

py_error <- function(e, fn) {
  inner <- .cg$callback_error
  .cg$callback_error <- NULL
  if (!is.null(inner)) {
    if (inherits(inner, "customgrad_error")) stop(inner)
    # an R error raised by the user's f or grad function: keep its message, give it a class
    inner_msg <- conditionMessage(inner)
    cg_abort(
      c("An R function called by {.fn {fn}} raised an error.", x = "{inner_msg}"),
      "customgrad_callback_error", call = NULL, parent = NA, r_error = inner
    )
  }
  if (inherits(e, "customgrad_error")) stop(e)
  msg <- python_message(e)
  # the Python core's contract errors keep a specific class in R too
  specific <- if (grepl("CustomGradientError", msg, fixed = TRUE)) {
    "customgrad_custom_gradient_error"
  }
  cg_abort(
    c("{.fn {fn}} failed in Python.", x = "{msg}"),
    c(specific, "customgrad_python_error"), call = NULL, python_message = msg, parent = NULL
  )
}

python_message <- function(e) {
  msg <- conditionMessage(e)
  msg <- sub("\n*Detailed traceback:.*$", "", msg)
  msg <- sub("\\s*-+\\s*For simplicity, JAX has removed.*$", "", msg)
  msg <- sub("\n*Run `reticulate::py_last_error\\(\\)` for details.*$", "", msg)
  trimws(msg)
}
