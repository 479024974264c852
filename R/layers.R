# R constructors for the Keras layers of the Python package (customgrad.layers), with the
# conventions of keras3's layer_*() functions.

#' Layers that change the gradient
#'
#' Keras layers that are the identity in the forward pass (the quantizer rounds) and change only
#' the gradient flowing back through them:
#' * `layer_gradient_reversal()` multiplies it by `-scale` (the gradient reversal layer of
#'   domain-adversarial training);
#' * `layer_scale_gradient()` multiplies it by `scale`;
#' * `layer_clip_gradient()` clips it element-wise to `[min_value, max_value]` and/or to an L2
#'   norm of at most `max_norm`;
#' * `layer_straight_through_quantizer()` rounds its input to `levels` evenly spaced values in
#'   `[min_value, max_value]` and passes the gradient straight through (identity).
#'
#' They follow keras3's layer constructors: with `object` missing they return the layer; given a
#' `keras.Sequential` model they add the layer to it and return the model; given a tensor (a
#' `keras.Input()` or a tensor of values) they return the layer applied to it. The layers are the
#' Python package's `customgrad.layers` classes, so models using them save and load as `.keras`
#' files and train with `fit()` on every backend.
#'
#' @param object Missing (return the layer), a `keras.Sequential` model (add the layer) or a
#'   tensor (apply the layer).
#' @param scale The factor (a number; the reversal multiplies by `-scale`).
#' @param min_value,max_value Bounds: of the gradient (`layer_clip_gradient()`, both or
#'   neither) or of the quantized values.
#' @param max_norm The largest L2 norm the gradient may have, or `NULL`.
#' @param across_replicas `TRUE` to clip by the norm of the whole batch under a data-parallel
#'   engine (see [op_clip_gradient_norm()]).
#' @param levels The number of quantization levels, a whole number >= 2.
#' @param ... Further arguments of the Keras layer, e.g. `name`, `dtype`.
#' @return A layer, the model with the layer added, or the output tensor (see `object`).
#' @examplesIf customgrad:::python_available()
#' x <- op_convert_to_tensor(c(1, 2, 3))
#' layer_gradient_reversal(x)  # the identity forward
#' reverse <- layer_gradient_reversal(scale = 0.5)
#' op_grad(function(x) op_sum(reverse(x)))(x)  # -0.5 each
#'
#' keras <- reticulate::import("keras")
#' model <- keras$Sequential(list(keras$Input(shape = list(2L))))
#' model <- model |> layer_clip_gradient(max_norm = 1)
#' length(model$layers)
#' @name gradient-layers
NULL

#' @rdname gradient-layers
#' @export
layer_gradient_reversal <- function(object, scale = 1, ...) {
  compose_layer(object, "GradientReversal", list(scale = as_layer_number(scale), ...))
}

#' @rdname gradient-layers
#' @export
layer_scale_gradient <- function(object, scale = 1, ...) {
  compose_layer(object, "ScaleGradient", list(scale = as_layer_number(scale), ...))
}

#' @rdname gradient-layers
#' @export
layer_clip_gradient <- function(object, min_value = NULL, max_value = NULL, max_norm = NULL,
                                across_replicas = FALSE, ...) {
  if (is.null(min_value) && is.null(max_value) && is.null(max_norm)) {
    cg_abort(c("{.arg min_value} and {.arg max_value}, {.arg max_norm}, or all three must be given.",
               x = "All three are {.code NULL}."), "argument")
  }
  if (is.null(min_value) != is.null(max_value)) {
    cg_abort(c("{.arg min_value} and {.arg max_value} must be given together.",
               x = "Only {.arg {if (is.null(min_value)) 'max_value' else 'min_value'}} was given."),
             "argument")
  }
  args <- list(min_value = as_layer_number(min_value),
               max_value = as_layer_number(max_value),
               max_norm = as_layer_number(max_norm), across_replicas = across_replicas, ...)
  compose_layer(object, "ClipGradient", args)
}

#' @rdname gradient-layers
#' @export
layer_straight_through_quantizer <- function(object, levels = 16L, min_value = -1,
                                             max_value = 1, ...) {
  if (!is.numeric(levels) || length(levels) != 1L || is.na(levels) ||
      levels != round(levels) || levels < 2) {
    cg_abort(c("{.arg levels} must be a whole number >= 2.",
               x = "Received {obj_type_friendly(levels)}."),
             "argument")
  }
  args <- list(levels = as.integer(levels), min_value = as_layer_number(min_value),
               max_value = as_layer_number(max_value), ...)
  compose_layer(object, "StraightThroughQuantizer", args)
}

as_layer_number <- function(x, arg = caller_arg(x), call = caller_env()) {
  if (is.null(x)) return(NULL)
  if (!is.numeric(x) || length(x) != 1L || is.na(x)) {
    cg_abort(c("{.arg {arg}} must be a single number.", x = "Received {obj_type_friendly(x)}."),
             "type", call = call)
  }
  as.numeric(x)
}

# keras3's convention for layer constructors: no object -> the layer; a Sequential model -> the
# model with the layer added; anything else -> the layer called on it. keras3's own
# compose_layer() (unexported) implements it; this one follows it, building the layer from
# customgrad's Python classes and translating Python errors.
compose_layer <- function(object, class_name, args, call = caller_env()) {
  layer <- with_py_errors(py_invoke(py_mod("customgrad")$layers[[class_name]], args), call)
  if (missing(object) || is.null(object)) return(layer)
  keras <- py_mod("keras")
  if (is_py_object(object) && py_mod("builtins")$isinstance(object, keras$Sequential)) {
    with_py_errors(object$add(layer), call)
    return(object)
  }
  with_py_errors(py_invoke(layer, list(to_py(object))), call)
}

snake_case <- function(x) tolower(gsub("([a-z])([A-Z])", "\\1_\\2", x))
