# The R constructors of customgrad.layers: keras3's layer convention (no object -> the layer; a
# Sequential model -> the model with the layer added; a tensor -> the layer applied), the
# gradients they define (training with fit() is in test-training.R).

grad_through <- function(layer, x, w = c(1, 2, 3)) {
  op_grad(function(x) op_sum(layer(x) * as_tensor(w)))(x)
}

test_that("each layer is the identity forward and changes only the gradient", {
  skip_without_python()
  x <- op_convert_to_tensor(c(0.1, -0.2, 0.3))
  expect_equal(num(layer_gradient_reversal(x)), c(0.1, -0.2, 0.3), tolerance = 1e-6)
  expect_equal(num(grad_through(layer_gradient_reversal(scale = 0.5), x)), c(-0.5, -1, -1.5))
  expect_equal(num(grad_through(layer_gradient_reversal(), x)), c(-1, -2, -3))
  expect_equal(num(grad_through(layer_scale_gradient(scale = 3), x)), c(3, 6, 9))
  expect_equal(num(grad_through(layer_clip_gradient(min_value = -1, max_value = 1.5), x)),
               c(1, 1.5, 1.5))
  # max_norm: the gradient (1, 2, 3) scaled to norm 1
  expect_equal(num(grad_through(layer_clip_gradient(max_norm = 1), x)), c(1, 2, 3) / sqrt(14),
               tolerance = 1e-6)
})

test_that("the straight-through quantizer rounds forward and passes the gradient through", {
  skip_without_python()
  q <- layer_straight_through_quantizer(levels = 3, min_value = -1, max_value = 1)
  x <- op_convert_to_tensor(c(-0.9, -0.2, 0.4, 0.8))
  expect_equal(num(q(x)), c(-1, 0, 0, 1))
  expect_equal(num(grad_through(q, x, w = c(1, 2, 3, 4))), c(1, 2, 3, 4))
  expect_identical(q$levels, 3L)
})

test_that("keras3's convention: layer, model |> layer_*(), tensor |> layer_*()", {
  skip_without_python()
  keras <- customgrad:::py_mod("keras")
  layer <- layer_gradient_reversal(scale = 2, name = "rev")
  expect_true(inherits(layer, "keras.src.layers.layer.Layer"))
  expect_identical(layer$name, "rev")
  expect_equal(layer$scale, 2)

  model <- keras$Sequential(list(keras$Input(shape = list(3L))))
  same <- model |> layer_scale_gradient(scale = 0.5) |> layer_clip_gradient(max_norm = 1)
  expect_length(model$layers, 2L)
  expect_identical(reticulate::py_id(same), reticulate::py_id(model))
  expect_identical(class(model$layers[[1]])[[1]], "customgrad.layers.ScaleGradient")

  inputs <- keras$Input(shape = list(3L))
  out <- inputs |> layer_straight_through_quantizer(levels = 4L)
  expect_true(inherits(out, "keras.src.backend.common.keras_tensor.KerasTensor"))
  expect_identical(unlist(out$shape), 3L)
})

test_that("bad layer arguments are classed errors naming the argument", {
  skip_without_python()
  expect_snapshot(error = TRUE, {
    layer_clip_gradient()
    layer_clip_gradient(min_value = -1)
    layer_straight_through_quantizer(levels = 1.5)
    layer_scale_gradient(scale = "big")
  })
  expect_error(layer_clip_gradient(max_norm = -1), class = "customgrad_error_python")
  err <- tryCatch(layer_clip_gradient(max_norm = -1), error = identity)
  expect_match(conditionMessage(err), "layer_clip_gradient()", fixed = TRUE)
  expect_no_match(conditionMessage(err), "customgrad.layers", fixed = TRUE)
})
