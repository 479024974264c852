#' customgrad: custom gradients that work the same on every Keras backend
#'
#' [op_custom_gradient()] defines a function whose gradient is the one you write, on the jax,
#' TensorFlow and torch backends of Keras 3 alike, through the Python package customgrad (no
#' second implementation in R). [op_grad()], [op_value_and_grad()] and [op_check_gradients()]
#' take and check gradients on any backend; all of `keras.ops` is available as `op_<name>()`
#' functions with the conventions of the keras3 R package (1-based axes, integer shapes, R
#' doubles as tensors of the default float dtype), and tensors support R's arithmetic, `Math`
#' and `Summary` functions and `as.array()`.
#'
#' @section Python and the backend:
#' The package uses the Python named by `CUSTOMGRAD_PYTHON`, else `RETICULATE_PYTHON`, else the
#' first `.venv/bin/python` found above the working directory or the installed package, else
#' the environment [install_customgrad()] creates. Loading
#' the package does not start Python; the first call that needs it does. The backend is the
#' value of `KERAS_BACKEND` when Python starts (`"jax"`, `"tensorflow"` or `"torch"`).
#'
#' @section Errors:
#' Errors are conditions of class `customgrad_error` and of a class `customgrad_error_<what>`;
#' [customgrad_errors] lists them.
#'
#' @keywords internal
"_PACKAGE"
