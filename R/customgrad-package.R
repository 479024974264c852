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
#' first `.venv/bin/python` found above the working directory or the installed package. Loading
#' the package does not start Python; the first call that needs it does. The backend is the
#' value of `KERAS_BACKEND` when Python starts (`"jax"`, `"tensorflow"` or `"torch"`).
#'
#' @section Errors:
#' Errors are conditions of class `customgrad_error` with a specific subclass:
#' `customgrad_axis_error`, `customgrad_type_error`, `customgrad_conversion_error`,
#' `customgrad_argnums_error`, `customgrad_custom_gradient_error`,
#' `customgrad_gradient_check_error`, `customgrad_python_missing`, and
#' `customgrad_python_error` for errors raised in Python (its message is kept, also in the
#' field `python_message`).
#'
#' @keywords internal
"_PACKAGE"
