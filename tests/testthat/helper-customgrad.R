# Shared by every test file. Python starts once per R process; the backend comes from
# KERAS_BACKEND (set by tests/integration/test_r_package.py, one process per backend).

# Tests that need Python run only where the user opted in (customgrad:::python_opted_in():
# NOT_CRAN=true, RETICULATE_PYTHON, ...), as keras3's run only under NOT_CRAN: on a CRAN check
# machine starting Python would make reticulate download and install one.
skip_without_python <- function() {
  if (!customgrad:::python_opted_in()) {
    skip("Python is not started here: NOT_CRAN is not \"true\" and RETICULATE_PYTHON is unset")
  }
  if (!customgrad:::python_available()) {
    skip(paste("the session's Python cannot import keras and customgrad; RETICULATE_PYTHON is",
               Sys.getenv("RETICULATE_PYTHON", "unset")))
  }
}

backend <- function() {
  skip_without_python()
  config_backend()
}

num <- function(x) as.numeric(as.array(x))

dtype_of <- function(x) keras$backend$standardize_dtype(x$dtype)

as_tensor <- function(x, dtype = NULL) op_convert_to_tensor(x, dtype = dtype %||% config_floatx())

# The S3 methods keras3 (with the tensorflow R package) registers for a class, read from their
# namespaces' S3 tables.
keras3_registered <- function(cls) {
  found <- character()
  for (pkg in c("keras3", "tensorflow")) {
    table <- getNamespaceInfo(asNamespace(pkg), "S3methods")
    found <- c(found, table[table[, 2] == cls, 1])
  }
  found
}

# Runs R code (lines) in a fresh Rscript process with this session's libraries; its output lines.
run_r <- function(code, env = character()) {
  rscript <- file.path(R.home("bin"), "Rscript")
  libs <- paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))
  system2(rscript, c("-e", shQuote(paste(code, collapse = "\n"))), stdout = TRUE, stderr = TRUE,
          env = c(libs, env))
}
