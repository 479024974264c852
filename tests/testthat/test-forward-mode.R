# Forward mode from the grad function: op_jvp and op_hvp on every backend.

log1pexp_fwd <- function() {
  op_custom_gradient(function(x) {
    e <- op_exp(x)
    # sigmoid(x): stable also for the second derivative (1 - 1 / (1 + e) is NaN's at 100)
    tuple(op_log(1 + e), function(dy) dy * op_sigmoid(x))
  }, forward_mode = TRUE)
}

test_that("op_hvp of a custom-gradient function is the derivative of its grad function", {
  skip_without_python()
  log1pexp <- log1pexp_fwd()
  x <- as_tensor(c(0, 2, 100))
  hv <- op_hvp(function(x) op_sum(log1pexp(x)), x, as_tensor(c(1, 1, 1)))
  s <- 1 / (1 + exp(-c(0, 2, 100)))
  expect_equal(num(hv[[1]]), s * (1 - s), tolerance = 1e-5)
})

test_that("op_jvp of a custom-gradient function uses its grad function (1 at x = 100)", {
  skip_without_python()
  log1pexp <- log1pexp_fwd()
  x <- as_tensor(c(0, 100))
  res <- op_jvp(log1pexp, list(x), list(as_tensor(c(1, 1))))
  expect_equal(num(res[[2]]), c(0.5, 1), tolerance = 1e-6)
})
