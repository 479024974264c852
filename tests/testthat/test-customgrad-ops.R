test_that("customgrad.ops wrappers give the defined gradients", {
  backend()
  expect_equal(num(op_grad(op_log1pexp)(100)), 1)
  expect_equal(num(op_log1pexp(0)), log(2), tolerance = 1e-6)
  g <- op_grad(function(x) op_sum(op_reverse_gradient(x) * 3))(c(1, 2))
  expect_equal(num(g), c(-3, -3))
  g <- op_grad(function(x) op_sum(op_scale_gradient(x, 0.5) * 3))(c(1, 2))
  expect_equal(num(g), c(1.5, 1.5))
  g <- op_grad(function(x) op_sum(op_clip_gradient(x, -1, 1) * as_tensor(c(5, -0.5))))(c(1, 2))
  expect_equal(num(g), c(1, -0.5))
})

test_that("clip_gradient_norm rescales the gradient to max_norm and keeps the forward", {
  backend()
  x <- c(1, 2)
  expect_equal(num(op_clip_gradient_norm(x, 1)), x)
  # upstream (3, 4) has norm 5: rescaled to norm 1 -> (0.6, 0.8); a small upstream passes as is
  g <- op_grad(function(x) op_sum(op_clip_gradient_norm(x, 1) * as_tensor(c(3, 4))))(x)
  expect_equal(num(g), c(0.6, 0.8), tolerance = 1e-6)
  g <- op_grad(function(x) op_sum(op_clip_gradient_norm(x, 10) * as_tensor(c(3, 4))))(x)
  expect_equal(num(g), c(3, 4), tolerance = 1e-6)
})

test_that("clip_gradient_norm across replicas is the local norm where no engine runs", {
  backend()
  x <- c(0, 0)
  g <- op_grad(function(x) op_sum(op_clip_gradient_norm(x, 1, across_replicas = TRUE) *
                                    as_tensor(c(3, 4))))(x)
  expect_equal(num(g), c(0.6, 0.8), tolerance = 1e-6)
  expect_error(op_clip_gradient_norm(x, 1, across_replicas = "yes"),
               "across_replicas must be True or False")
})

test_that("straight-through estimators: fn forward, identity backward", {
  backend()
  x <- c(-1.6, 0.4, 2.5)
  expect_equal(num(op_round_ste(x)), c(-2, 0, 2))
  expect_equal(num(op_sign_ste(x)), c(-1, 1, 1))
  g <- op_grad(function(x) op_sum(op_round_ste(x) * as_tensor(c(1, 2, 3))))(x)
  expect_equal(num(g), c(1, 2, 3))
  g <- op_grad(function(x) op_sum(op_sign_ste(x) * 2))(x)
  expect_equal(num(g), c(2, 2, 2))
  floor_ste <- op_straight_through(op_floor)
  expect_equal(num(floor_ste(c(1.7, -0.2))), c(1, -1))
  g <- op_grad(function(x) op_sum(floor_ste(x) * 3))(c(1.7, -0.2))
  expect_equal(num(g), c(3, 3))
  expect_error(op_straight_through(3), class = "customgrad_error_type")
})

test_that("safe_sqrt and safe_norm have finite gradients at 0", {
  backend()
  expect_equal(num(op_grad(op_safe_sqrt)(0)), 0)
  expect_equal(num(op_grad(op_safe_sqrt)(4)), 0.25)
  expect_equal(num(op_grad(\(x) op_safe_norm(x))(c(0, 0, 0))), c(0, 0, 0))
  expect_equal(num(op_grad(\(x) op_safe_norm(x))(c(3, 4))), c(0.6, 0.8), tolerance = 1e-6)
  m <- rbind(c(3, 4), c(0, 0))
  expect_equal(num(op_safe_norm(m, axis = 2)), c(5, 0), tolerance = 1e-6)
  g <- op_grad(\(x) op_sum(op_safe_norm(x, axis = 2)))(m)
  expect_equal(as.array(g), rbind(c(0.6, 0.8), c(0, 0)), tolerance = 1e-6, ignore_attr = TRUE)
  expect_error(op_safe_norm(m, axis = 0), class = "customgrad_error_axis")
})

test_that("safe_logsumexp: no NaN gradient at -Inf; plain op_logsumexp stays the keras op", {
  backend()
  g <- op_grad(\(x) op_safe_logsumexp(x))(c(-Inf, -Inf))
  expect_equal(num(g), c(0, 0))
  g <- op_grad(\(x) op_safe_logsumexp(x))(c(-Inf, 0, 0))
  expect_equal(num(g), c(0, 0.5, 0.5), tolerance = 1e-6)
  m <- rbind(c(0, log(3)), c(-Inf, -Inf))
  expect_equal(num(op_safe_logsumexp(m, axis = 2)), c(log(4), -Inf), tolerance = 1e-6)
  expect_equal(num(op_logsumexp(as_tensor(c(0, log(3))))), log(4), tolerance = 1e-6)
})

test_that("efficient swish matches op_swish in value and gradient", {
  backend()
  x <- c(-30, -1, 0, 2.5, 30)
  expect_equal(num(op_efficient_swish(x)), num(op_silu(x)), tolerance = 1e-6)
  g_custom <- op_grad(\(x) op_sum(op_efficient_swish(x)))(x)
  g_plain <- op_grad(\(x) op_sum(op_silu(x)))(x)
  expect_equal(num(g_custom), num(g_plain), tolerance = 1e-5)
  expect_equal(num(op_grad(\(x) op_sum(op_efficient_swish(x)))(0)), 0.5)
})
