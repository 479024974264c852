# Loading the package starts no Python and sets no environment variable: it declares customgrad's
# Python package to reticulate (py_require()) and adds the tensor methods keras3 lacks.
.onLoad <- function(libname, pkgname) {
  declare_python_requirement()
  register_tensor_methods()
  invisible()
}
