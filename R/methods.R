# The few tensor methods customgrad adds to what keras3 (and the tensorflow R package) register.
# keras3 gives torch and jax tensors arithmetic, comparisons, `[`, as.array() and print(), but on
# torch not as.numeric(), and on both no dim(), Math (exp(), log(), ...) or Summary (sum(), ...):
# there those calls fail with "cannot coerce type 'environment'" (on tensorflow, tanh() and a
# few others fail alike). customgrad registers a method
# only where none is registered when it loads, so it never replaces one of keras3's.

# class -> the generics customgrad provides for it when nothing else does
tensor_method_table <- list(
  "torch._C.TensorBase" = c("as.double", "as.integer", "as.logical", "dim", "Math", "Summary"),
  # (keras3 registers as.double() and as.integer() for jax arrays itself)
  "jaxlib._jax.ArrayImpl" = c("as.logical", "dim", "Math", "Summary"),
  "jax._src.core.Tracer" = c("Math", "Summary"),
  # the tensorflow R package has exp(), log(), sum(), ... but not tanh(), cumsum(), ...: its own
  # methods still come first, the group method only catches the rest
  "tensorflow.tensor" = c("Math", "Summary"),
  "keras.src.backend.common.variables.Variable" = c("as.logical", "dim", "Math", "Summary")
)

# Tensors of any backend (and keras Variables): what py_invoke() returns without converting.
tensor_classes <- c("torch._C.TensorBase", "jaxlib._jax.ArrayImpl", "jax._src.core.Tracer",
                    "tensorflow.python.types.core.Tensor", "tensorflow.tensor",
                    "keras.src.backend.common.variables.Variable",
                    "keras.src.backend.common.keras_tensor.KerasTensor")

tensor_as_double <- function(x, ...) as.double(tensor_values(x))
tensor_as_integer <- function(x, ...) as.integer(tensor_values(x))
tensor_as_logical <- function(x, ...) as.logical(tensor_values(x))
tensor_dim <- function(x) {
  shape <- unlist(py_mod("bridge")$shape(x))
  if (length(shape)) as.integer(shape) else NULL
}

tensor_methods <- function() list(
  as.double = tensor_as_double, as.integer = tensor_as_integer, as.logical = tensor_as_logical,
  dim = tensor_dim, Math = tensor_math, Summary = tensor_summary
)

register_tensor_methods <- function() {
  methods <- tensor_methods()
  for (cls in names(tensor_method_table)) {
    for (generic in tensor_method_table[[cls]]) {
      if (is.null(utils::getS3method(generic, cls, optional = TRUE))) {
        registerS3method(generic, cls, methods[[generic]], envir = asNamespace("customgrad"))
      }
    }
  }
}

# The values of a tensor as an R vector (reticulate converts the numpy array).
tensor_values <- function(x) {
  as.vector(reticulate::py_to_r(py_mod("keras")$ops$convert_to_numpy(x)))
}

math_ops <- c(abs = "abs", sign = "sign", sqrt = "sqrt", floor = "floor", ceiling = "ceil",
              trunc = "trunc", exp = "exp", expm1 = "expm1", log1p = "log1p", cos = "cos",
              sin = "sin", tan = "tan", cosh = "cosh", sinh = "sinh", tanh = "tanh",
              acos = "arccos", asin = "arcsin", atan = "arctan", acosh = "arccosh",
              asinh = "arcsinh", atanh = "arctanh", log2 = "log2", log10 = "log10",
              cumsum = "cumsum", cumprod = "cumprod")

tensor_math <- function(x, ...) {
  ops <- py_mod("keras")$ops
  generic <- .Generic
  if (generic == "log") {
    base <- list(...)$base
    out <- ops$log(x)
    return(if (is.null(base)) out else out / log(base))
  }
  if (generic == "round") {
    digits <- list(...)$digits %||% 0
    return(ops$round(x, decimals = as.integer(digits)))
  }
  op <- math_ops[generic]
  if (is.na(op)) {
    # dispatched from a primitive, the method has no frame of the user's call: name the generic
    cg_abort(c("{.fn {generic}} is not supported for tensors.",
               i = "Use the matching {.code op_*()} function of keras3."),
             "type", call = call2(generic))
  }
  ops[[op]](x)
}

tensor_summary <- function(..., na.rm = FALSE) {
  ops <- py_mod("keras")$ops
  generic <- .Generic
  # dispatched from a primitive, the method has no frame of the user's call: name the generic
  call <- call2(generic)
  one <- function(x) switch(generic,
    sum = ops$sum(x), prod = ops$prod(x), max = ops$max(x), min = ops$min(x),
    all = ops$all(x), any = ops$any(x),
    cg_abort("{.fn {generic}} is not supported for tensors.", "type", call = call))
  values <- lapply(list(...), one)
  if (length(values) == 1L) return(values[[1]])
  Reduce(function(a, b) switch(generic, sum = a + b, prod = a * b,
                               max = ops$maximum(a, b), min = ops$minimum(a, b),
                               all = ops$logical_and(a, b), any = ops$logical_or(a, b)), values)
}
