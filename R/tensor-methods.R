# S3 methods for the tensors of every backend. reticulate gives each Python object the class
# vector of its Python MRO, so the methods are registered for the base class of each backend's
# tensors (and of its tracers and keras.Variables) -- see the NAMESPACE entries below.

tensor_classes <- c(
  "jaxlib._jax.ArrayImpl",                        # jax arrays
  "jax._src.core.Tracer",                         # jax tracers (grad, jit, vmap)
  "jax._src.literals.TypedNdArray",               # jax's typed numpy constants (zero gradients)
  "tensorflow.python.types.core.Tensor",          # tf eager and symbolic tensors, tf variables
  "torch._C.TensorBase",                          # torch tensors and parameters
  "keras.src.backend.common.variables.Variable",  # keras.Variable on every backend
  "keras.src.backend.common.keras_tensor.KerasTensor"  # keras.Input() and functional models
)

#' Subsetting, transpose and matrix product of tensors
#'
#' `x[...]` and `x[...] <- value` are [op_subset()] and `op_subset<-`: 1-based indices, a
#' number drops its axis and a range keeps it, as in keras3 (see [op_subset()] for every rule).
#' `t(x)` reverses the axes ([op_transpose()]), and `x %*% y` is [op_matmul()] when either side
#' is a tensor (and R's own `%*%` otherwise).
#'
#' @param x,y Tensors (or R values, for `%*%`).
#' @return A tensor (or what R's `%*%` returns for two R values).
#' @name tensor-subset
#' @examplesIf customgrad:::python_available()
#' x <- op_convert_to_tensor(array(1:12, c(3, 4)))
#' x[, 2]
#' x[2, ] <- 0L
#' x
#' t(x)
#' x %*% t(x)
#' @rawNamespace S3method("[", "jaxlib._jax.ArrayImpl", tensor_subset)
#' @rawNamespace S3method("[", "jax._src.literals.TypedNdArray", tensor_subset)
#' @rawNamespace S3method("[", "jax._src.core.Tracer", tensor_subset)
#' @rawNamespace S3method("[", "tensorflow.python.types.core.Tensor", tensor_subset)
#' @rawNamespace S3method("[", "torch._C.TensorBase", tensor_subset)
#' @rawNamespace S3method("[", "keras.src.backend.common.variables.Variable", tensor_subset)
#' @rawNamespace S3method("[", "keras.src.backend.common.keras_tensor.KerasTensor", tensor_subset)
#' @rawNamespace S3method("[<-", "jaxlib._jax.ArrayImpl", tensor_subset_assign)
#' @rawNamespace S3method("[<-", "jax._src.literals.TypedNdArray", tensor_subset_assign)
#' @rawNamespace S3method("[<-", "jax._src.core.Tracer", tensor_subset_assign)
#' @rawNamespace S3method("[<-", "tensorflow.python.types.core.Tensor", tensor_subset_assign)
#' @rawNamespace S3method("[<-", "torch._C.TensorBase", tensor_subset_assign)
#' @rawNamespace S3method("[<-", "keras.src.backend.common.variables.Variable", tensor_subset_assign)
#' @rawNamespace S3method("[<-", "keras.src.backend.common.keras_tensor.KerasTensor", tensor_subset_assign)
#' @rawNamespace S3method(t, "jaxlib._jax.ArrayImpl", tensor_t)
#' @rawNamespace S3method(t, "jax._src.literals.TypedNdArray", tensor_t)
#' @rawNamespace S3method(t, "jax._src.core.Tracer", tensor_t)
#' @rawNamespace S3method(t, "tensorflow.python.types.core.Tensor", tensor_t)
#' @rawNamespace S3method(t, "torch._C.TensorBase", tensor_t)
#' @rawNamespace S3method(t, "keras.src.backend.common.variables.Variable", tensor_t)
#' @rawNamespace S3method(t, "keras.src.backend.common.keras_tensor.KerasTensor", tensor_t)
NULL

tensor_subset <- function(x, ...) {
  key <- subset_key(x, substitute(list(...)), parent.frame(), environment())
  with_py_errors(py_fn("bridge", "subset")(x, key), "[")
}

tensor_subset_assign <- function(x, ..., value) {
  key <- subset_key(x, substitute(list(...)), parent.frame(), environment())
  with_py_errors(py_fn("bridge", "subset_assign")(x, key, subset_value(x, value)), "[<-")
}

tensor_t <- function(x) op_transpose(x)

# R 4.2's %*% dispatches only S4 methods, so the package's %*% checks for tensors itself and
# hands everything else to base R's.
#' @rdname tensor-subset
#' @export
`%*%` <- function(x, y) {
  if (inherits(x, tensor_classes) || inherits(y, tensor_classes)) return(op_matmul(x, y))
  base::`%*%`(x, y)
}

#' Arithmetic, math and summaries of tensors
#'
#' Tensors of every backend (jax arrays and tracers, TensorFlow tensors, torch tensors,
#' `keras.Variable`s) support R's operators (`+ - * / ^ %% %/% == != < <= > >= & | !`), the
#' `Math` group (`exp`, `log`, `sqrt`, `abs`, `sin`, `cumsum`, ...) and the `Summary` group
#' (`sum`, `prod`, `max`, `min`, `range`, `all`, `any`), all computed by `keras.ops` on the active
#' backend (so they work inside custom gradients and under autodiff). R numbers combined with a
#' tensor are weakly typed: `1 + x` keeps `x`'s dtype. `as.array()`, `as.numeric()`,
#' `as.integer()`, `as.logical()` copy a tensor into R.
#'
#' `log(x, base)` and `round(x, digits)` take their usual extra argument; `dim(x)` is the
#' tensor's shape.
#'
#' @return A tensor for the operators and the groups; an R vector or array for the conversions.
#' @name tensor-methods
#' @examplesIf customgrad:::python_available()
#' x <- as_tensor(c(1, 2, 3))
#' y <- exp(x) * 2 + 1
#' sum(y)
#' as.numeric(y)
#' x > 1
#' @rawNamespace S3method(Ops, "jaxlib._jax.ArrayImpl", tensor_ops)
#' @rawNamespace S3method(Ops, "jax._src.literals.TypedNdArray", tensor_ops)
#' @rawNamespace S3method(Ops, "jax._src.core.Tracer", tensor_ops)
#' @rawNamespace S3method(Ops, "tensorflow.python.types.core.Tensor", tensor_ops)
#' @rawNamespace S3method(Ops, "torch._C.TensorBase", tensor_ops)
#' @rawNamespace S3method(Ops, "keras.src.backend.common.variables.Variable", tensor_ops)
#' @rawNamespace S3method(Ops, "keras.src.backend.common.keras_tensor.KerasTensor", tensor_ops)
#' @rawNamespace S3method(Math, "keras.src.backend.common.keras_tensor.KerasTensor", tensor_math)
#' @rawNamespace S3method(print, "keras.src.backend.common.keras_tensor.KerasTensor", tensor_print)
#' @rawNamespace S3method(dim, "keras.src.backend.common.keras_tensor.KerasTensor", tensor_dim)
#' @rawNamespace S3method(Ops, "jax._src.export.shape_poly._DimExpr", dim_expr_ops)
#' @rawNamespace S3method(Math, "jaxlib._jax.ArrayImpl", tensor_math)
#' @rawNamespace S3method(Math, "jax._src.literals.TypedNdArray", tensor_math)
#' @rawNamespace S3method(Math, "jax._src.core.Tracer", tensor_math)
#' @rawNamespace S3method(Math, "tensorflow.python.types.core.Tensor", tensor_math)
#' @rawNamespace S3method(Math, "torch._C.TensorBase", tensor_math)
#' @rawNamespace S3method(Math, "keras.src.backend.common.variables.Variable", tensor_math)
#' @rawNamespace S3method(Summary, "jaxlib._jax.ArrayImpl", tensor_summary)
#' @rawNamespace S3method(Summary, "jax._src.literals.TypedNdArray", tensor_summary)
#' @rawNamespace S3method(Summary, "jax._src.core.Tracer", tensor_summary)
#' @rawNamespace S3method(Summary, "tensorflow.python.types.core.Tensor", tensor_summary)
#' @rawNamespace S3method(Summary, "torch._C.TensorBase", tensor_summary)
#' @rawNamespace S3method(Summary, "keras.src.backend.common.variables.Variable", tensor_summary)
#' @rawNamespace S3method(as.array, "jaxlib._jax.ArrayImpl", tensor_as_array)
#' @rawNamespace S3method(as.array, "jax._src.literals.TypedNdArray", tensor_as_array)
#' @rawNamespace S3method(as.array, "jax._src.core.Tracer", tensor_as_array)
#' @rawNamespace S3method(as.array, "tensorflow.python.types.core.Tensor", tensor_as_array)
#' @rawNamespace S3method(as.array, "torch._C.TensorBase", tensor_as_array)
#' @rawNamespace S3method(as.array, "keras.src.backend.common.variables.Variable", tensor_as_array)
#' @rawNamespace S3method(as.double, "jaxlib._jax.ArrayImpl", tensor_as_double)
#' @rawNamespace S3method(as.double, "jax._src.literals.TypedNdArray", tensor_as_double)
#' @rawNamespace S3method(as.double, "jax._src.core.Tracer", tensor_as_double)
#' @rawNamespace S3method(as.double, "tensorflow.python.types.core.Tensor", tensor_as_double)
#' @rawNamespace S3method(as.double, "torch._C.TensorBase", tensor_as_double)
#' @rawNamespace S3method(as.double, "keras.src.backend.common.variables.Variable", tensor_as_double)
#' @rawNamespace S3method(as.integer, "jaxlib._jax.ArrayImpl", tensor_as_integer)
#' @rawNamespace S3method(as.integer, "jax._src.literals.TypedNdArray", tensor_as_integer)
#' @rawNamespace S3method(as.integer, "jax._src.core.Tracer", tensor_as_integer)
#' @rawNamespace S3method(as.integer, "tensorflow.python.types.core.Tensor", tensor_as_integer)
#' @rawNamespace S3method(as.integer, "torch._C.TensorBase", tensor_as_integer)
#' @rawNamespace S3method(as.logical, "jaxlib._jax.ArrayImpl", tensor_as_logical)
#' @rawNamespace S3method(as.logical, "jax._src.literals.TypedNdArray", tensor_as_logical)
#' @rawNamespace S3method(as.logical, "jax._src.core.Tracer", tensor_as_logical)
#' @rawNamespace S3method(as.logical, "tensorflow.python.types.core.Tensor", tensor_as_logical)
#' @rawNamespace S3method(as.logical, "torch._C.TensorBase", tensor_as_logical)
#' @rawNamespace S3method(print, "jaxlib._jax.ArrayImpl", tensor_print)
#' @rawNamespace S3method(print, "jax._src.literals.TypedNdArray", tensor_print)
#' @rawNamespace S3method(print, "jax._src.core.Tracer", tensor_print)
#' @rawNamespace S3method(print, "tensorflow.python.types.core.Tensor", tensor_print)
#' @rawNamespace S3method(print, "torch._C.TensorBase", tensor_print)
#' @rawNamespace S3method(print, "keras.src.backend.common.variables.Variable", tensor_print)
#' @rawNamespace S3method(dim, "jaxlib._jax.ArrayImpl", tensor_dim)
#' @rawNamespace S3method(dim, "jax._src.literals.TypedNdArray", tensor_dim)
#' @rawNamespace S3method(dim, "jax._src.core.Tracer", tensor_dim)
#' @rawNamespace S3method(dim, "tensorflow.python.types.core.Tensor", tensor_dim)
#' @rawNamespace S3method(dim, "torch._C.TensorBase", tensor_dim)
#' @rawNamespace S3method(dim, "keras.src.backend.common.variables.Variable", tensor_dim)
NULL

#' @rawNamespace S3method(reticulate::r_to_py, "jaxlib._jax.ArrayImpl", tensor_r_to_py)
#' @rawNamespace S3method(reticulate::r_to_py, "jax._src.literals.TypedNdArray", tensor_r_to_py)
#' @rawNamespace S3method(reticulate::r_to_py, "jax._src.core.Tracer", tensor_r_to_py)
#' @rawNamespace S3method(reticulate::r_to_py, "tensorflow.python.types.core.Tensor", tensor_r_to_py)
#' @rawNamespace S3method(reticulate::r_to_py, "torch._C.TensorBase", tensor_r_to_py)
#' @rawNamespace S3method(reticulate::r_to_py, "keras.src.backend.common.variables.Variable", tensor_r_to_py)
NULL

# reticulate 1.28 passes every argument with a class attribute through r_to_py(), and for a Python
# object its default method makes a new reference to the same object (a new environment, the
# class names looked up again): ~30 us for each tensor handed to Python -- a third of a small op.
# Tensors made by customgrad are convert = TRUE references, and r_to_py(x, convert = TRUE) of
# such a tensor is the same object, so it is returned as it is; anything else (convert = FALSE)
# goes to reticulate's method as before.
tensor_r_to_py <- function(x, convert = FALSE) {
  if (isTRUE(convert)) x else NextMethod()
}

ops_names <- c(
  "+" = "add", "-" = "subtract", "*" = "multiply", "/" = "divide", "^" = "power",
  "%%" = "mod", "%/%" = "floor_divide", "==" = "equal", "!=" = "not_equal", "<" = "less",
  "<=" = "less_equal", ">" = "greater", ">=" = "greater_equal", "&" = "logical_and",
  "|" = "logical_or"
)

tensor_ops <- function(e1, e2) {
  generic <- .Generic
  if (missing(e2)) {
    fn <- switch(generic, "-" = "negative", "!" = "logical_not", "+" = NULL,
                 cg_abort("Unary {.code {generic}} is not defined for tensors.",
                          "customgrad_type_error", call = NULL))
    if (is.null(fn)) return(e1)
    return(with_py_errors(py_invoke(py_fn("ops", fn), list(to_py(e1))), generic))
  }
  if (inherits(e1, "jax._src.export.shape_poly._DimExpr") ||
      inherits(e2, "jax._src.export.shape_poly._DimExpr")) {
    return(dim_expr_ops_impl(generic, e1, e2))
  }
  fn <- py_fn("ops", ops_names[[generic]])
  with_py_errors(py_invoke(fn, list(to_py(e1), to_py(e2))), generic)
}

# jax's symbolic dimensions (export.symbolic_shape, shape polymorphism): `n - 1`, `2 * n` stay
# symbolic dimensions, computed by Python's own operators on them.
dim_expr_ops <- function(e1, e2) {
  generic <- .Generic
  if (missing(e2)) {
    if (generic == "+") return(e1)
    if (generic == "-") return(dim_expr_ops_impl("*", e1, -1L))
    cg_abort("Unary {.code {generic}} is not defined for symbolic dimensions.",
             "customgrad_type_error", call = NULL)
  }
  dim_expr_ops_impl(generic, e1, e2)
}

dim_expr_ops_impl <- function(generic, e1, e2) {
  py_name <- c("+" = "add", "-" = "sub", "*" = "mul", "/" = "truediv", "^" = "pow",
               "%%" = "mod", "%/%" = "floordiv", "==" = "eq", "!=" = "ne", "<" = "lt",
               "<=" = "le", ">" = "gt", ">=" = "ge")[[generic]]
  whole <- function(v) if (is.double(v) && length(v) == 1L && v == round(v)) as.integer(v) else v
  e1 <- whole(e1)
  e2 <- whole(e2)
  if (is_py_object(e1) && inherits(e1, tensor_classes) || is_py_object(e2) && inherits(e2, tensor_classes)) {
    fn <- py_fn("ops", ops_names[[generic]])
    return(with_py_errors(py_invoke(fn, list(to_py(e1), to_py(e2))), generic))
  }
  with_py_errors(py_mod("operator")[[py_name]](e1, e2), generic)
}

math_names <- c(
  abs = "abs", sign = "sign", sqrt = "sqrt", floor = "floor", ceiling = "ceil", trunc = "trunc",
  exp = "exp", expm1 = "expm1", log1p = "log1p", log2 = "log2", log10 = "log10",
  cos = "cos", sin = "sin", tan = "tan", acos = "arccos", asin = "arcsin", atan = "arctan",
  cosh = "cosh", sinh = "sinh", tanh = "tanh", acosh = "arccosh", asinh = "arcsinh",
  atanh = "arctanh", cumsum = "cumsum", cumprod = "cumprod", cummax = "cummax",
  cummin = "cummin", lgamma = "lgamma", digamma = "digamma"
)

tensor_math <- function(x, ...) {
  ops <- py_mod("ops")
  generic <- .Generic
  with_py_errors({
    if (generic == "log") {
      base <- list(...)$base %||% (if (...length()) ..1 else NULL)
      out <- ops$log(x)
      if (!is.null(base)) out <- ops$divide(out, log(base))
      out
    } else if (generic == "round") {
      digits <- list(...)$digits %||% (if (...length()) ..1 else 0L)
      ops$round(x, decimals = as.integer(digits))
    } else if (generic %in% c("cumsum", "cumprod", "cummax", "cummin")) {
      ops[[math_names[[generic]]]](ops$reshape(x, list(-1L)))
    } else if (generic %in% names(math_names)) {
      py_invoke(py_fn("ops", math_names[[generic]]), list(x))
    } else {
      cg_abort(c("{.fn {generic}} is not supported for tensors.",
                 i = "Supported: log, round and {.fn {names(math_names)}}."),
               "customgrad_type_error", call = NULL)
    }
  }, generic)
}

tensor_summary <- function(..., na.rm = FALSE) {
  ops <- py_mod("ops")
  generic <- .Generic
  values <- lapply(list(...), as_tensor)
  with_py_errors({
    one <- function(x) switch(generic,
      sum = ops$sum(x), prod = ops$prod(x), max = ops$max(x), min = ops$min(x),
      all = ops$all(x), any = ops$any(x),
      range = ops$stack(list(ops$min(x), ops$max(x))))
    parts <- lapply(values, one)
    combine <- switch(generic, sum = ops$add, prod = ops$multiply, max = ops$maximum,
                      min = ops$minimum, all = ops$logical_and, any = ops$logical_or,
                      range = function(a, b) ops$stack(list(ops$minimum(ops$min(a), ops$min(b)),
                                                          ops$maximum(ops$max(a), ops$max(b)))))
    Reduce(combine, parts)
  }, generic)
}

tensor_as_array <- function(x, ...) tensor_to_r_array(x)

tensor_as_double <- function(x, ...) as.double(tensor_to_r_array(x, drop_dim = TRUE))

tensor_as_integer <- function(x, ...) as.integer(tensor_to_r_array(x, drop_dim = TRUE))

tensor_as_logical <- function(x, ...) as.logical(tensor_to_r_array(x, drop_dim = TRUE))

tensor_dim <- function(x) {
  shape <- py_mod("bridge")$shape(x)
  vapply(as.list(shape), function(d) if (is.null(d)) NA_integer_ else as.integer(d), 1L)
}

tensor_print <- function(x, ...) {
  header <- tryCatch(py_mod("bridge")$describe(x), error = function(e) "tensor")
  text <- tryCatch(reticulate::py_repr(x), error = function(e) "")
  cat("<", header, ">\n", text, "\n", sep = "")
  invisible(x)
}
