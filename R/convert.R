# What R hands to Python from customgrad's functions: to_py() is the one rule for the values an R
# function gives back to Python (the output and gradients of op_custom_gradient(), the result of
# a function given to op_grad()) and for the arguments of differentiated functions.
#
#   R value                          becomes
#   NULL, a Python object            itself
#   double/integer/logical           a tensor: doubles of config_floatx(), integers int32,
#                                    logicals bool; arrays keep their dimensions, a length-one
#                                    vector without dim is a scalar
#   character                        itself (reticulate: a str or a list of str)
#   function                         a Python callable whose results are converted by this rule
#                                    and whose R errors are kept for the R caller
#   list                             a list (a dict when every element is named), elements
#                                    converted by this rule
#
# The op_*() functions of keras3 convert their own arguments (keras3's rule); this one only
# decides what customgrad's own entry points give Python.
to_py <- function(x) {
  if (is.null(x) || inherits(x, "python.builtin.object")) return(x)
  if (is.function(x)) return(wrap_r_function(x))
  if (is.list(x)) {
    out <- lapply(x, to_py)
    nms <- names(x)
    return(if (is.null(nms) || !all(nzchar(nms))) out else reticulate::py_dict(nms, unname(out)))
  }
  if (is.double(x) || is.integer(x) || is.logical(x)) return(r_tensor(x))
  x
}

r_tensor <- function(x) {
  dtype <- switch(typeof(x), double = py_mod("keras")$config$floatx(), integer = "int32",
                  logical = "bool")
  value <- if (is.null(dim(x)) && length(x) == 1L) x else reticulate::np_array(x)
  py_mod("keras")$ops$convert_to_tensor(value, dtype = dtype)
}

# An R function handed to Python (op_grad, op_vjp, ...): its results are converted and its
# errors kept for the R caller, by call_r_function().
wrap_r_function <- function(f) {
  force(f)
  function(...) call_r_function(f, ...)
}

# Calls an R function for Python: its result converted by to_py(), its errors kept for the R
# caller. The bridge calls R grad functions through it directly, with no wrapper made per step.
call_r_function <- function(.f, ...) {
  f <- .f  # an error's call reads f(...)
  in_callback(to_py(f(...)))
}

# call_r_function(.f, upstream, upstream = upstream): the bridge's call of a grad function given
# the same upstream gradient positionally and as `upstream =`, which then crosses from Python
# once (see the bridge's RGradFn).
call_r_function_upstream_twice <- function(.f, upstream) {
  call_r_function(.f, upstream, upstream = upstream)
}

is_py_object <- function(x) inherits(x, "python.builtin.object")
