# Loading the package does not start Python: it only points reticulate at the project's Python
# (so that reticulate::import() before any customgrad call uses it too). Python starts on the
# first call that needs it, with the backend named by KERAS_BACKEND.
.onLoad <- function(libname, pkgname) {
  if (reticulate::py_available(initialize = FALSE)) return(invisible())
  python <- tryCatch(find_python(), error = function(e) NULL)
  if (!is.null(python) && file.exists(python)) Sys.setenv(RETICULATE_PYTHON = python)
  invisible()
}
