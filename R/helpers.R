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
  to_py(x)
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

is_py_object <- function(x) inherits(x, "python.builtin.object")
