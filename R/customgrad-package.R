#' customgrad: custom gradients that work the same on every Keras backend
#'
#' An extension of keras3. keras3 provides the `op_*()` functions, tensors and their methods,
#' `tuple()`, `config_*()`, layers and training; customgrad adds what keras3 lacks:
#' [op_custom_gradient()] with one rule for the grad function on the jax, TensorFlow and torch
#' backends alike (through the Python package customgrad: no second implementation in R),
#' [op_grad()], [op_value_and_grad()], [op_vjp()], [op_jvp()], [op_hvp()] and
#' [op_check_gradients()] on any backend, gradient-shaping ops ([customgrad_ops]) and layers
#' ([gradient-layers]).
#'
#' @section keras3 and the attach order:
#' customgrad depends on keras3, so `library(customgrad)` attaches keras3 first. The one name the
#' two share is `op_custom_gradient()`: customgrad's masks keras3's, on purpose, whichever
#' package the user loads first (`library(keras3); library(customgrad)` and the reverse order
#' give the same functions). Its help page is another matter: `?op_custom_gradient` can open
#' keras3's page (R's help takes the first loaded package that has the topic, and keras3 always
#' loads first); `?customgrad::op_custom_gradient` opens customgrad's.
#'
#' @section Tensor methods customgrad adds:
#' Only where nothing (keras3, the tensorflow R package) has registered one when customgrad loads:
#' `as.double()`/`as.numeric()`, `as.integer()`, `as.logical()`, `dim()` and the `Math`
#' (`exp()`, `log()`, `sqrt()`, ...) and `Summary` (`sum()`, `max()`, ...) groups for torch and
#' jax tensors, `Math` and `Summary` for jax tracers (inside [op_grad()]) and for the members
#' the tensorflow R package lacks (`tanh()`, `cumsum()`, ...), and `as.logical()`,
#' `dim()`, `Math` and `Summary` for keras Variables.
#'
#' @section Python and the backend:
#' Loading customgrad starts no Python and sets no environment variable. It declares its Python
#' package to reticulate with [reticulate::py_require()] (the wheel shipped inside this package),
#' so it lands in the same environment as keras and the backend that keras3 declares, whether
#' keras3 or customgrad starts Python first. Users who manage their own Python set
#' `RETICULATE_PYTHON` (or call [reticulate::use_virtualenv()]) as keras3 documents;
#' [install_customgrad()] creates such an environment. The backend is the value of
#' `KERAS_BACKEND` when Python starts (`"jax"`, `"tensorflow"` or `"torch"`).
#'
#' The package's own examples, tests and vignettes start Python only where the user opted in:
#' `NOT_CRAN=true`, `RETICULATE_PYTHON` set, an interactive session, or a Python already running.
#' Elsewhere (as in `R CMD check` on CRAN, where starting Python would make reticulate download
#' one) the examples that need Python do not run, the tests that need it are skipped, and the
#' vignettes show outputs computed beforehand.
#'
#' R can also run inside a Python that started first (through rpy2): reticulate then attaches to
#' that Python, and customgrad runs the module load hooks ([reticulate::py_register_load_hook()])
#' that keras3 registered for modules Python had already imported, which reticulate would otherwise
#' never run (keras3 registers `as.array()` of torch tensors in one).
#'
#' @section Errors:
#' Errors are conditions of class `customgrad_error` and of a class `customgrad_error_<what>`;
#' [customgrad_errors] lists them.
#'
#' @keywords internal
"_PACKAGE"
