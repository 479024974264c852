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
# or RETICULATE_PYTHON names one that does not run), the one running lacks the backend Keras is
# set to use (keras then fails with "No module named 'tensorflow'"), or it cannot import `module`
# (keras or customgrad's Python package). `parent` is reticulate's error. with_py_errors() reports
# it in the name of the function the user called.
python_missing_error <- function(parent = NULL, module = "customgrad", call = caller_env()) {
  started <- reticulate::py_available()
  backend <- if (started) missing_backend(parent)
  python <- if (started) reticulate::py_config()$python
  lines <- if (!is.null(backend)) {
    backend_missing_lines(backend, python, installed_backends())
  } else {
    python_missing_lines(started, Sys.getenv("RETICULATE_PYTHON"), python, module, parent)
  }
  # reticulate's condition is a Python object whose `trace` (a data frame) rlang cannot print as
  # a parent's backtrace: the parent is an R condition with its message (the Python exception in
  # `python`); the backtrace is this error's own, ending at the user's call
  if (inherits(parent, "python.builtin.object")) {
    parent <- structure(class = c("customgrad_python_exception", "error", "condition"),
                        list(message = conditionMessage(parent), call = NULL, python = parent))
  }
  cg_abort(lines, "python_missing", call = call, parent = parent)
}

# The backend Keras could not import, from reticulate's error ("No module named 'tensorflow'"),
# or NULL.
missing_backend <- function(parent) {
  if (is.null(parent)) return(NULL)
  found <- regmatches(conditionMessage(parent),
                      regexec("No module named '(jax|jaxlib|tensorflow|torch)[.']",
                              conditionMessage(parent)))[[1]]
  if (length(found) < 2L) return(NULL)
  if (found[[2]] == "jaxlib") "jax" else found[[2]]
}

# The Keras backends the running Python has (found, not imported: importing one takes seconds).
installed_backends <- function() {
  util <- reticulate::import("importlib.util")
  backends <- c("jax", "tensorflow", "torch")
  backends[vapply(backends, function(b) !is.null(util$find_spec(b)), logical(1))]
}

# The message when Keras's backend (`backend`) is missing from `python`, which has `installed`.
# The fix needs a new session: once keras has failed to import, use_backend() in the same session
# does not always take (it did for a missing tensorflow, not for a missing jax).
backend_missing_lines <- function(backend, python, installed) {
  python <- inline_path(python)
  lines <- sprintf("Keras is set to use the backend %s, which the Python in use does not have.",
                   backend)
  if (!length(installed)) {
    return(c(lines,
      x = paste(python, "has no Keras backend (jax, tensorflow or torch)."),
      i = "Run {.run customgrad::install_customgrad()} to create an environment with keras, a backend and customgrad's Python package."))
  }
  use <- installed[[1]]
  c(lines,
    x = sprintf("%s has the backend %s.", python, paste(installed, collapse = " and ")),
    i = sprintf("Restart R and run {.code keras3::use_backend(\"%s\")} before Python starts (e.g. right after {.code library(customgrad)}), or set {.envvar KERAS_BACKEND} to {.val %s} in {.path ~/.Renviron}.", use, use))
}

# The message when no Python could start (`started` FALSE) or `python` cannot import `module`.
# RETICULATE_PYTHON (`chosen`) set: the user chose a Python of their own, so the other way is to
# unset it; unset, reticulate's py_require() provides the packages, and `parent` says why it could
# not.
python_missing_lines <- function(started, chosen, python, module, parent = NULL) {
  problem <- if (!started && nzchar(chosen)) {
    c(x = paste0("No Python could start ({.envvar RETICULATE_PYTHON} is ", inline_path(chosen), ")."))
  } else if (!started) {
    why <- if (is.null(parent)) "." else paste0(": ", cli_escape(first_line(conditionMessage(parent))))
    c(x = "No Python could start.",
      x = paste0("{.envvar RETICULATE_PYTHON} is unset, and {.fn reticulate::py_require} could not provide a Python with them", why))
  } else {
    c(x = sprintf("The Python in use (%s) cannot import {.pkg %s}.", inline_path(python), module))
  }
  other <- if (nzchar(chosen)) {
    c(i = "Or unset {.envvar RETICULATE_PYTHON}, so that {.fn reticulate::py_require} provides them (as keras3 does).")
  } else if (started) {
    c(i = "Or, in a new R session, select no Python (no {.envvar RETICULATE_PYTHON}, {.fn reticulate::use_virtualenv} or {.fn reticulate::use_python}), so that {.fn reticulate::py_require} provides them (as keras3 does).")
  }
  c("customgrad needs a Python that starts and imports keras and customgrad's Python package.",
    problem,
    i = "Run {.run customgrad::install_customgrad()} to create an environment with them; select it in a new R session before Python starts, with {.code reticulate::use_virtualenv(\"r-customgrad\")} or {.envvar RETICULATE_PYTHON}.",
    other)
}

# A path as cli shows it ('/a/b'), ready to go into a cli message as it is.
inline_path <- function(path) paste0("{.path ", cli_escape(path), "}")

first_line <- function(text) sub("\n.*$", "", trimws(text))

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
