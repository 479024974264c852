# Finding and starting Python. Nothing here runs at load time: Python starts on first use.

.cg <- new.env(parent = emptyenv())

#' Where the package looks for Python
#'
#' The Python interpreter is, in order: the environment variable `CUSTOMGRAD_PYTHON`; an already
#' set `RETICULATE_PYTHON`; the first `.venv/bin/python` found in the working directory, the
#' package's installation directory or one of their parents; the environment made by
#' [install_customgrad()] (`r-customgrad` under [reticulate::virtualenv_root()]).
#'
#' @return The path of the Python interpreter, or `NULL` if none was found.
#' @keywords internal
#' @noRd
find_python <- function(starts = c(getwd(), system.file(package = "customgrad"))) {
  env <- Sys.getenv("CUSTOMGRAD_PYTHON", "")
  if (nzchar(env)) return(env)
  env <- Sys.getenv("RETICULATE_PYTHON", "")
  if (nzchar(env)) return(env)
  for (start in starts[nzchar(starts)]) {
    dir <- normalizePath(start, mustWork = FALSE)
    repeat {
      candidate <- file.path(dir, ".venv", "bin", "python")
      if (file.exists(candidate)) return(candidate)
      parent <- dirname(dir)
      if (identical(parent, dir)) break
      dir <- parent
    }
  }
  installed <- file.path(env_path("r-customgrad"), "bin", "python")
  if (file.exists(installed)) return(installed)
  NULL
}

configure_python <- function(call = caller_env()) {
  if (reticulate::py_available(initialize = FALSE)) return(invisible(TRUE))
  python <- find_python()
  if (is.null(python) || !file.exists(python)) {
    python_missing_error(call)
  }
  Sys.setenv(RETICULATE_PYTHON = python)
  if (!nzchar(Sys.getenv("TF_CPP_MIN_LOG_LEVEL"))) Sys.setenv(TF_CPP_MIN_LOG_LEVEL = "2")
  reticulate::use_python(python, required = TRUE)
  invisible(TRUE)
}

python_missing_error <- function(call = caller_env()) {
  cg_abort(
    c("customgrad needs Python with keras, a backend and the customgrad Python package.",
      x = "No Python interpreter was found.",
      i = "Run {.run customgrad::install_customgrad()} to create one, or set {.envvar CUSTOMGRAD_PYTHON} to a Python that has them."),
    "python_missing", call = call
  )
}

#' Is Python with customgrad available?
#'
#' Used by the examples: `TRUE` when a Python interpreter was found and it can import keras and
#' customgrad. Starts Python if it is not running yet.
#'
#' @return `TRUE` or `FALSE`.
#' @keywords internal
#' @noRd
python_available <- function() {
  ok <- tryCatch({
    configure_python()
    reticulate::py_module_available("keras") && reticulate::py_module_available("customgrad")
  }, error = function(e) FALSE)
  isTRUE(ok)
}

# Lazily imported Python modules (convert = TRUE: tuples become R lists, tensors stay objects).
py_mod <- function(name) {
  mod <- .cg[[name]]
  if (is.null(mod)) {
    configure_python()
    mod <- switch(name,
      keras = reticulate::import("keras"),
      ops = reticulate::import("keras.ops"),
      image = reticulate::import("keras.ops.image"),
      customgrad = reticulate::import("customgrad"),
      bridge = reticulate::import_from_path(
        "customgrad_bridge", system.file("python", package = "customgrad", mustWork = TRUE)
      ),
      builtins = reticulate::import_builtins(),
      reticulate::import(name)
    )
    assign(name, mod, envir = .cg)
  }
  mod
}

# A function of a Python module, looked up once: through reticulate an attribute lookup costs
# about as much as the call itself (~0.1 ms), and ops run on every forward and backward.
py_fn <- function(module, name) {
  cache <- .cg$fns[[module]]
  if (is.null(cache)) {
    cache <- new.env(parent = emptyenv())
    if (is.null(.cg$fns)) .cg$fns <- new.env(parent = emptyenv())
    assign(module, cache, envir = .cg$fns)
  }
  fn <- cache[[name]]
  if (is.null(fn)) {
    fn <- py_mod(module)[[name]]
    assign(name, fn, envir = cache)
  }
  fn
}

# Calls a Python function with a list of arguments (named ones become keywords) and returns what
# a convert = TRUE handle would, except that a tensor is returned as it is: reticulate's py_to_r()
# would only re-wrap it, which costs ~40 us a call (a third of a small op). Other results (tuples,
# lists, numbers, None) are converted by py_to_r() as before.
#' @importFrom reticulate py_to_r
py_invoke <- function(fn, args) {
  nms <- names(args)
  res <- if (is.null(nms)) {
    call_python(fn, args, NULL)
  } else {
    named <- nzchar(nms)
    call_python(fn, unname(args[!named]), args[named])
  }
  if (inherits(res, tensor_classes)) res else py_to_r(res)
}

# call_python(fn, positional, keywords): the C++ entry point behind reticulate::py_call(). Ops hand
# over ready argument lists, so going around py_call()'s own handling of `...` (splitting names
# in R, re-checking that Python runs) saves ~15 us of the ~70-100 us a small op costs from R.
# reticulate 1.28 has it; with a reticulate without it, the handle itself is called.
call_python <- local({
  impl <- NULL
  function(fn, positional, keywords) {
    if (is.null(impl)) impl <<- find_call_impl()
    impl(fn, positional, keywords)
  }
})

find_call_impl <- function() {
  ns <- asNamespace("reticulate")
  if (exists("py_call_impl", envir = ns, inherits = FALSE)) {
    impl <- get("py_call_impl", envir = ns)
    if (identical(names(formals(impl)), c("x", "args", "keywords"))) return(impl)
  }
  function(fn, positional, keywords) do.call(fn, c(positional, keywords))
}

#' The active Keras backend
#'
#' The backend is chosen by the environment variable `KERAS_BACKEND` before Python starts
#' (`"jax"`, `"tensorflow"` or `"torch"`); it cannot change afterwards in the same R session.
#'
#' @return The backend's name, a string.
#' @examplesIf customgrad:::python_available()
#' config_backend()
#' @export
config_backend <- function() {
  with_py_errors(py_mod("keras")$config$backend(), "config_backend")
}

#' The default float dtype
#'
#' R doubles become tensors of this dtype (keras' `floatx`, `"float32"` unless configured).
#'
#' @return A string such as `"float32"`.
#' @examplesIf customgrad:::python_available()
#' config_floatx()
#' @export
config_floatx <- function() {
  with_py_errors(py_mod("keras")$config$floatx(), "config_floatx")
}
