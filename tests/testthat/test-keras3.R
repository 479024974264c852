# customgrad inside keras3: the attach order changes nothing, and keras3 models trained with
# fit() use customgrad's gradients.

# keras3's documented torch spelling (`\(..., upstream)`), jax's (`function(dy)`) and a
# variable read by f, each evaluated after the two packages are attached in `order`.
load_order_script <- function(order) c(
  sprintf("library(%s); library(%s)", order[[1]], order[[2]]),
  "cat('mask-check\\n')",
  "log1pexp <- op_custom_gradient(\\(x) {",
  "  e <- op_exp(x)",
  "  tuple(op_log(1 + e), \\(..., upstream) upstream * (1 - 1 / (1 + e)))",
  "})",
  "triple <- op_custom_gradient(function(x) list(x * 2, function(dy) dy * 3))",
  "g1 <- as.array(op_grad(log1pexp)(100))",
  "g2 <- as.array(op_grad(\\(x) op_sum(triple(x)))(op_convert_to_tensor(c(1, 2))))",
  "cat(sprintf('values: %s\\n', paste(c(g1, g2), collapse = ' ')))",
  "cat('op_custom_gradient from:', environmentName(environment(op_custom_gradient)), '\\n')"
)

test_that("library(keras3); library(customgrad) in either order: one mask, same values", {
  skip_without_python()
  outputs <- lapply(list(c("keras3", "customgrad"), c("customgrad", "keras3")), function(order) {
    out <- run_r(load_order_script(order))
    text <- paste(out, collapse = "\n")
    expect_no_match(text, "Registered S3 method", fixed = TRUE)
    expect_no_match(text, "Error", fixed = TRUE)
    # what attaching printed: at most the one documented mask
    startup <- paste(out[seq_len(which(out == "mask-check")[1])], collapse = "\n")
    masked <- regmatches(startup, gregexpr("masked from [^:]+:\n\n[^\n]*", startup))[[1]]
    expect_true(length(masked) <= 1L, label = startup)
    if (length(masked)) expect_match(masked, "package:keras3':\n\n    op_custom_gradient$")
    expect_match(text, "op_custom_gradient from: customgrad", fixed = TRUE)
    sub("^values: ", "", grep("^values: ", out, value = TRUE))
  })
  expect_identical(outputs[[1]], outputs[[2]])
  expect_identical(outputs[[1]], "1 3 3")
})

log1pexp_layer_class <- function() {
  log1pexp <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    tuple(op_log(1 + e), \(upstream) upstream * (1 - 1 / (1 + e)))
  })
  Layer("Log1pexpDense",
    initialize = function(custom = TRUE, ...) {
      super$initialize(...)
      self$custom <- custom
    },
    build = function(input_shape) {
      self$w <- self$add_weight(shape = shape(1), initializer = initializer_constant(100))
    },
    call = function(x) {
      z <- x * self$w
      if (self$custom) log1pexp(z) else op_log(1 + op_exp(z))
    }
  )
}

train_one_step <- function(model, x = matrix(1)) {
  model |> compile(optimizer = optimizer_sgd(learning_rate = 0.1),
                   loss = function(y_true, y_pred) op_mean(y_pred))
  model |> fit(x, matrix(0), epochs = 1, batch_size = 1, verbose = 0)
  as.numeric(as.array(model$weights[[1]]))  # each model here has one weight
}

test_that("a keras3 Layer() with customgrad's log1pexp trains with fit(): w = 100 steps to 99.9", {
  skip_without_python()
  Log1pexpDense <- log1pexp_layer_class()
  custom <- keras_model_sequential(input_shape = 1)
  custom$add(Log1pexpDense(custom = TRUE))
  expect_equal(train_one_step(custom), 99.9, tolerance = 1e-5)
  # the same layer with plain autodiff: inf / inf at w * x = 100, so the weight becomes NaN
  plain <- keras_model_sequential(input_shape = 1)
  plain$add(Log1pexpDense(custom = FALSE))
  expect_true(is.nan(train_one_step(plain)))
})

test_that("layer_gradient_reversal() in keras_model_sequential() flips the sign of a weight update", {
  skip_without_python()
  dense <- function(object) layer_dense(object, units = 1, use_bias = FALSE,
                                        kernel_initializer = initializer_constant(1))
  plain <- keras_model_sequential(input_shape = 1) |> dense()
  w_plain <- train_one_step(plain)
  reversed <- keras_model_sequential(input_shape = 1) |> dense() |> layer_gradient_reversal()
  w_reversed <- train_one_step(reversed)
  expect_equal(w_plain, 0.9, tolerance = 1e-6)   # d loss / d w = 1: the weight goes down
  expect_equal(w_reversed, 1.1, tolerance = 1e-6)  # reversed: it goes up by as much
})
