# install_customgrad(): a virtualenv with keras, one backend and the Python package shipped
# inside this R package (inst/python/dist: a wheel of the same version, and the pinned
# requirements), as keras3's install_keras() does for keras.

#' Install Python, keras, a backend and customgrad's Python side
#'
#' Creates a Python virtual environment with keras, the chosen backend and the customgrad Python
#' package that ships inside this R package (a wheel of the same version, so R and Python always
#' match). The versions of keras and the backend are the ones the package was tested with (its
#' pinned requirements). Most users need none of this: keras3 and customgrad declare their
#' Python packages with [reticulate::py_require()]. This is for a named environment of your
#' own.
#'
#' @details
#' To use the environment, start a new R session and, before anything starts Python, select it
#' and its backend:
#'
#' ```
#' reticulate::use_virtualenv("r-customgrad")
#' keras3::use_backend("jax")
#' library(customgrad)
#' ```
#'
#' (with your `envname` and `backend`; the success message prints these lines, and the result's
#' `setup` holds them). The backend line is needed: keras3 sets `KERAS_BACKEND` to
#' `"tensorflow"` when it loads unless it is set already, so an environment with only jax or
#' torch fails with "No module named 'tensorflow'" until a session chooses its backend.
#' [keras3::use_backend()] works only before Keras starts; setting `KERAS_BACKEND=jax` in
#' `~/.Renviron` does the same for every session. Nothing is written outside the environment.
#'
#' The commands run without R's `LD_LIBRARY_PATH`: R sets it to its own library directories,
#' which can make a Python built elsewhere (e.g. by pyenv) load another Python's libraries and
#' lose SSL, so pip cannot download.
#'
#' @param backend The Keras backend to install: `"jax"`, `"tensorflow"` or `"torch"`.
#' @param envname The name of the environment (created under [reticulate::virtualenv_root()]), or
#'   a path containing a `/`.
#' @param python The Python (>= 3.11) that creates the environment; by default `python3` on the
#'   `PATH`.
#' @param extra_packages More pip requirements to install in the same environment.
#' For torch, pip also looks at PyTorch's CPU wheel index (PyPI's torch wheels bring CUDA).
#'
#' @param pip_options Options for `pip install`, e.g. `c("--index-url", url)` or
#'   `c("--no-index", "--find-links", dir)` for an offline install from downloaded wheels.
#' @param dry_run If `TRUE`, only return the plan (the commands it would run).
#' @return (Invisibly) a list: `envname`, `path` (the environment), `python` (its interpreter),
#'   `packages`, `commands` (each a character vector: program and arguments) and `setup` (the
#'   lines that select the environment and its backend in a new R session).
#' @examples
#' plan <- install_customgrad("torch", dry_run = TRUE)
#' plan$packages
#' # what to run in a new R session once it is installed
#' writeLines(plan$setup)
#' @export
install_customgrad <- function(backend = c("jax", "tensorflow", "torch"),
                               envname = "r-customgrad", python = NULL,
                               extra_packages = NULL, pip_options = character(),
                               dry_run = FALSE) {
  backends <- c("jax", "tensorflow", "torch")
  if (identical(backend, backends)) backend <- "jax"
  if (!is.character(backend) || length(backend) != 1L || !backend %in% backends) {
    cg_abort(c("{.arg backend} must be one of {.or {.val {backends}}}.",
               x = "Received {obj_type_friendly(backend)}."),
             "argument")
  }
  if (!is.character(envname) || length(envname) != 1L || !nzchar(envname)) {
    cg_abort(c("{.arg envname} must be a single non-empty string.",
               x = "Received {obj_type_friendly(envname)}."), "type")
  }
  dist <- shipped_python()
  path <- env_path(envname)
  python <- python %||% Sys.which("python3")
  if (!nzchar(python)) {
    cg_abort(c("Creating the environment needs a Python (>= 3.11).",
               x = "{.code python3} is not on the {.envvar PATH}.",
               i = "Give its path as {.arg python}."), "python_missing")
  }
  packages <- c(backend_requirements(dist$requirements, backend), dist$wheel, extra_packages)
  env_python <- file.path(path, "bin", "python")
  commands <- list(
    c(python, "-m", "venv", path),
    c(env_python, "-m", "pip", "install", "--disable-pip-version-check",
      backend_pip_options(backend), pip_options, packages),
    # the shipped wheel again, by itself: an R package updated without a new version number
    # ships another wheel of the same version, which pip would call "already installed"
    c(env_python, "-m", "pip", "install", "--disable-pip-version-check", "--force-reinstall",
      "--no-deps", pip_options, dist$wheel)
  )
  setup <- c(sprintf("reticulate::use_virtualenv(%s)", deparse(envname)),
             sprintf("keras3::use_backend(%s)", deparse(backend)),
             "library(customgrad)")
  plan <- list(envname = envname, path = path, python = env_python, packages = packages,
               commands = commands, setup = setup)
  if (dry_run) return(plan)
  for (cmd in commands) {
    cli::cli_inform("Running {.code {paste(cmd, collapse = ' ')}}")
    status <- run_command(cmd)
    if (!identical(status, 0L)) {
      cg_abort(c("Installing customgrad's Python environment failed.",
                 x = "{.code {paste(cmd, collapse = ' ')}} exited with status {status}."),
               "install")
    }
  }
  cli::cli_inform(c(v = "Installed keras, {backend} and customgrad in {.path {path}}.",
                    i = "To use it, start a new R session and run these lines before anything starts Python:",
                    structure(cli_escape(setup), names = rep(" ", length(setup)))))
  invisible(plan)
}

# Runs `cmd` (program and arguments) with R's LD_LIBRARY_PATH removed: R points it at its own
# library directories, and a Python built elsewhere (pyenv) can then load another libpython's
# extension modules (`_ssl`: undefined symbol), so pip finds no SSL. `...` goes to system2().
run_command <- function(cmd, ...) {
  old <- Sys.getenv("LD_LIBRARY_PATH", unset = NA)
  if (!is.na(old)) {
    Sys.unsetenv("LD_LIBRARY_PATH")
    on.exit(Sys.setenv(LD_LIBRARY_PATH = old), add = TRUE)
  }
  system2(cmd[[1]], shQuote(cmd[-1]), ...)
}

# The wheel and the pinned requirements shipped in inst/python/dist.
shipped_python <- function(call = caller_env()) {
  dir <- system.file("python", "dist", package = "customgrad")
  wheel <- if (nzchar(dir)) Sys.glob(file.path(dir, "customgrad-*.whl")) else character()
  requirements <- file.path(dir, "requirements.txt")
  if (length(wheel) != 1L || !file.exists(requirements)) {
    cg_abort(c("This installation of customgrad must ship its Python package.",
               x = "{.path inst/python/dist} has no customgrad wheel and requirements.",
               i = "Install the R package from a tarball made by {.code R CMD build} after {.code scripts/ship_python.sh}, or run that script before {.code R CMD INSTALL}."),
             "install", call = call)
  }
  list(wheel = wheel, requirements = requirements)
}

# keras and the backend's packages, pinned as in requirements.txt.
backend_requirements <- function(requirements, backend) {
  lines <- trimws(sub("#.*$", "", readLines(requirements, warn = FALSE)))
  lines <- lines[nzchar(lines)]
  name <- sub("[=<>!~ ].*$", "", lines)
  wanted <- c("keras", switch(backend, jax = c("jax", "jaxlib"), tensorflow = "tensorflow-cpu",
                              torch = "torch"))
  found <- lines[name %in% wanted]
  if (length(found) != length(wanted)) {
    cg_abort(c("The shipped requirements must pin {.pkg {wanted}}.",
               x = "Found {.val {found}}."), "install")
  }
  found
}

# torch's wheels on PyPI bring CUDA; its CPU builds (torch==X matches X+cpu) come from its own index.
backend_pip_options <- function(backend) {
  if (backend == "torch") c("--extra-index-url", "https://download.pytorch.org/whl/cpu") else character()
}

env_path <- function(envname) {
  if (grepl("/", envname, fixed = TRUE)) return(path.expand(envname))
  file.path(path.expand(reticulate::virtualenv_root()), envname)
}
