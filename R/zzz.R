# Loading the package starts no Python and sets no environment variable: it declares customgrad's
# Python package to reticulate (py_require()), adds the tensor methods keras3 lacks and, for a
# Python that started before R (rpy2), runs the module load hooks reticulate left pending.
.onLoad <- function(libname, pkgname) {
  declare_python_requirement()
  register_tensor_methods()
  register_pending_load_hooks()
  invisible()
}
