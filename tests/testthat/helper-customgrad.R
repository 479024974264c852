# Shared by every test file. Python starts once per R process; the backend comes from
# KERAS_BACKEND (set by tests/integration/test_r_package.py, one process per backend).

skip_without_python <- function() {
  if (!customgrad:::python_available()) {
    skip(paste("no Python with keras and customgrad was found (set CUSTOMGRAD_PYTHON);",
               "looked for", customgrad:::find_python() %||% "nothing"))
  }
}

backend <- function() {
  skip_without_python()
  config_backend()
}

num <- function(x) as.numeric(as.array(x))

dtype_of <- function(x) customgrad:::py_mod("keras")$backend$standardize_dtype(x$dtype)
