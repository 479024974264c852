# A model built in R with the customgrad layers trains with fit(). Kept apart from test-layers.R
# so that it runs after test-memory.R: keras' training state (jax's caches after fit()) makes that
# test's count of R heap cells vary by tens of thousands, the size of the leak it looks for.

test_that("a gradient-reversal model built in R trains with fit()", {
  skip_without_python()
  keras <- customgrad:::py_mod("keras")
  keras$utils$set_random_seed(1L)
  n <- 64L
  x <- matrix(seq(-1, 1, length.out = n * 2), n, 2)
  y <- x[, 1] - x[, 2]
  inputs <- keras$Input(shape = list(2L))
  features <- keras$layers$Dense(4L, name = "features")(inputs)
  reversed <- features |> layer_gradient_reversal(scale = 1)
  output <- keras$layers$Dense(1L)(reversed)
  model <- keras$Model(inputs, output)
  model$compile(optimizer = keras$optimizers$SGD(0.01), loss = "mse")
  history <- model$fit(op_convert_to_tensor(x), op_convert_to_tensor(matrix(y)), epochs = 2L,
                       batch_size = 16L, verbose = 0L)
  loss <- unlist(history$history$loss)
  expect_length(loss, 2L)
  expect_true(all(is.finite(loss)))
  # the layer sits in the model and is the customgrad class
  classes <- vapply(model$layers, function(l) class(l)[[1]], "")
  expect_true("customgrad.layers.GradientReversal" %in% classes)
})
