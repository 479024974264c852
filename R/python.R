# The Python side. customgrad declares its Python package with reticulate::py_require() (the wheel
# shipped in this R package) and otherwise leaves the choice of Python to reticulate and keras3:
# loading it never starts Python and never sets RETICULATE_PYTHON.

.cg <- new.env(parent = emptyenv())

# The customgrad wheel shipped in inst/python/dist (same version as this R package), or
# character() in a source tree where scripts/ship_python.sh has not run.
shipped_wheel <- function() {
  dir <- system.file("python", "dist", package = "customgrad")
  if (!nzchar(dir)) return(character())
  Sys.glob(file.path(dir, "customgrad-*.whl"))
}

# The requirement customgrad adds to the session's Python (keras3 adds keras and the backend):
# the shipped wheel. Once customgrad is on PyPI this becomes its name and version.
python_requirement <- function() {
  wheel <- shipped_wheel()
  if (length(wheel) != 1L) return(NULL)
  paste0("customgrad @ file://", normalizePath(wheel, winslash = "/"))
}

# A Python chosen by RETICULATE_PYTHON is the user's to provision (reticulate installs nothing in
# it, and would only warn that the wheel's requirement looks missing), so nothing is declared then.
declare_python_requirement <- function() {
  if (nzchar(Sys.getenv("RETICULATE_PYTHON"))) return(invisible(NULL))
  requirement <- python_requirement()
  if (!is.null(requirement)) reticulate::py_require(requirement)
  invisible(requirement)
}

#' May the examples, tests and vignettes use Python here?
#'
#' `TRUE` when the user opted in to Python ([python_opted_in()]) and the session's Python
#' (whichever reticulate and keras3 chose) can import keras and customgrad. The `@examplesIf` of
#' every example that needs Python, the testthat suite (`skip_without_python()`) and the
#' vignettes ask it. Not opted in (as on a CRAN check machine), it is `FALSE` without touching
#' reticulate; opted in, it starts Python if it is not running yet.
#'
#' @return `TRUE` or `FALSE`.
#' @keywords internal
#' @noRd
python_available <- function() {
  if (!python_opted_in()) return(FALSE)
  ok <- tryCatch(
    reticulate::py_module_available("keras") && reticulate::py_module_available("customgrad"),
    error = function(e) FALSE
  )
  isTRUE(ok)
}

#' Did the user opt in to starting Python from examples, tests and vignettes?
#'
#' Starting Python with `RETICULATE_PYTHON` unset makes reticulate provision the packages
#' declared with [reticulate::py_require()]: it installs uv and downloads keras and a backend
#' (hundreds of MB, into `~/.cache`). CRAN's policy forbids that in `R CMD check`, so, as keras3
#' does, the package's own examples, tests and vignettes start Python only when asked to:
#' `NOT_CRAN=true` (devtools, testthat and the project's tests set it), a Python of the user's
#' own (`RETICULATE_PYTHON`), an interactive session (a user running `example()`), or a Python
#' that is already running. Reads the environment only: it never starts Python.
#'
#' @return `TRUE` or `FALSE`.
#' @keywords internal
#' @noRd
python_opted_in <- function() {
  identical(Sys.getenv("NOT_CRAN"), "true") || nzchar(Sys.getenv("RETICULATE_PYTHON")) ||
    interactive() || reticulate::py_available(initialize = FALSE)
}

# The error for a Python that cannot serve customgrad: none could start (reticulate found none,
# or RETICULATE_PYTHON names one that does not run), or the one running cannot import `module`
# (keras or customgrad's Python package). `parent` is reticulate's error. with_py_errors() reports
# it in the name of the function the user called.
python_missing_error <- function(parent = NULL, module = "customgrad", call = caller_env()) {
  chosen <- Sys.getenv("RETICULATE_PYTHON")
  problem <- if (!reticulate::py_available()) {
    if (nzchar(chosen)) {
      c(x = "No Python could start ({.envvar RETICULATE_PYTHON} is {.path {chosen}}).")
    } else {
      c(x = "No Python could start.")
    }
  } else {
    python <- reticulate::py_config()$python
    c(x = "The Python in use ({.path {python}}) cannot import {.pkg {module}}.")
  }
  cg_abort(
    c("customgrad needs a Python that starts and imports keras and customgrad's Python package.",
      problem,
      i = "Run {.run customgrad::install_customgrad()} to create an environment with them; select it in a new R session before Python starts, with {.code reticulate::use_virtualenv(\"r-customgrad\")} or {.envvar RETICULATE_PYTHON}.",
      i = "Or leave {.envvar RETICULATE_PYTHON} unset, so that {.fn reticulate::py_require} provides them (as keras3 does)."),
    "python_missing", call = call, parent = parent
  )
}

import_module <- function(name) {
  switch(name,
    bridge = reticulate::import_from_path(
      "customgrad_bridge", system.file("python", package = "customgrad", mustWork = TRUE)
    ),
    builtins = reticulate::import_builtins(),
    reticulate::import(name)
  )
}

# Lazily imported Python modules (convert = TRUE: tuples become R lists, tensors stay objects).
# The first import starts Python: if none can start, or the package is not in it, the error says
# so and how to get one (python_missing_error()); any other import error is raised as it is.
py_mod <- function(name) {
  mod <- .cg[[name]]
  if (is.null(mod)) {
    call <- caller_env()
    mod <- tryCatch(import_module(name), error = function(e) {
      if (!reticulate::py_available()) python_missing_error(e, call = call)
      # the packages the module needs, in the order it imports them
      needs <- switch(name, builtins = character(), keras = "keras", customgrad = ,
                      bridge = c("keras", "customgrad"), name)
      for (package in needs) {
        if (!reticulate::py_module_available(package)) python_missing_error(e, package, call = call)
      }
      stop(e)
    })
    assign(name, mod, envir = .cg)
  }
  mod
}

# A function of the bridge module, looked up once: through reticulate an attribute lookup costs
# about as much as the call itself, and these run in every forward.
bridge_fn <- function(name) {
  key <- paste0("bridge.", name)
  fn <- .cg[[key]]
  if (is.null(fn)) {
    fn <- py_mod("bridge")[[name]]
    assign(key, fn, envir = .cg)
  }
  fn
}

# Calls a Python function with a list of arguments (named ones become keywords). A tensor result
# is returned as it is; other results (tuples, lists, numbers, None) are converted by py_to_r().
#' @importFrom reticulate py_to_r
py_invoke <- function(fn, args) {
  res <- do.call(fn, args)
  if (inherits(res, "python.builtin.object") && !inherits(res, tensor_classes)) py_to_r(res) else res
}
