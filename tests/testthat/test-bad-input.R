# A table of bad inputs for op_custom_gradient() / op_grad(), run on every
# backend. Each row either raises a classed customgrad_error whose message matches `msg`, or
# returns a numerically checked result.

sq_grad <- function(fwd_out, g) op_custom_gradient(function(x) tuple(fwd_out(x), g))

bad_input_cases <- list(
  list(name = "f is not a function",
       run = function() op_custom_gradient(3),
       msg = "must be a function.*Received the number 3"),
  list(name = "f returns a bare value",
       run = function() op_custom_gradient(function(x) x * 2)(1),
       msg = "must return .*tuple\\(output, grad\\).*returned"),
  list(name = "f returns a 3-element list",
       run = function() op_custom_gradient(function(x) list(x, function(dy) dy, 1))(1),
       msg = "must return .*tuple\\(output, grad\\).*returned"),
  list(name = "grad is not a function",
       run = function() op_custom_gradient(function(x) tuple(x, 42))(1),
       msg = "must be the grad function"),
  list(name = "grad raises an R error",
       run = function() op_grad(sq_grad(function(x) x * x, function(dy) stop("boom in grad 7")))(1),
       msg = "boom in grad 7"),
  list(name = "too many gradients",
       run = function() op_grad(function(x) op_sum(sq_grad(function(x) x * x, function(dy) list(dy, dy, dy))(x)))(c(1, 2)),
       msg = "(expected|gradient).*(1|one)"),
  list(name = "too few gradients",
       run = function() {
         f <- op_custom_gradient(function(x, y) tuple(x * y, function(dy) list(dy)))
         op_grad(function(x, y) op_sum(f(x, y)))(c(1, 2), c(3, 4))
       },
       msg = "(expected|gradient).*2"),
  list(name = "wrong gradient shape (no broadcasting)",
       run = function() op_grad(function(x) op_sum(sq_grad(function(x) x * x, function(dy) op_ones(c(3L)))(x)))(c(1, 2)),
       msg = "shape")
)

test_that("bad inputs raise classed customgrad_error conditions with useful messages", {
  backend()
  for (case in bad_input_cases) {
    err <- tryCatch({ case$run(); NULL }, error = function(e) e)
    expect_false(is.null(err), label = paste(case$name, "raised no error"))
    if (is.null(err)) next
    expect_true(inherits(err, "customgrad_error"),
                label = paste(case$name, "gave class", paste(class(err), collapse = "/")))
    expect_match(conditionMessage(err), case$msg, ignore.case = TRUE,
                 label = paste0(case$name, ": ", conditionMessage(err)))
  }
})

test_that("wrong-dtype gradients are cast and correct; NaN gradients pass through", {
  backend()
  f <- op_custom_gradient(function(x) tuple(x * x, function(dy) op_cast(dy * 2 * x, "float16")))
  g <- op_grad(function(x) op_sum(f(x)))(c(1, 3))
  expect_equal(dtype_of(g), "float32")
  expect_equal(num(g), c(2, 6))

  nan_f <- op_custom_gradient(function(x) tuple(x * 1, function(dy) dy * NaN))
  g <- op_grad(function(x) op_sum(nan_f(x)))(c(1, 2))
  expect_true(all(is.nan(num(g))))
})

log1pexp_cg <- op_custom_gradient(function(x) {
  e <- op_exp(x)
  tuple(op_log1p(e), function(dy) dy * (1 - 1 / (1 + e)))
})

test_that("NaN/Inf inputs, zero-length, 0-d and large float16 inputs", {
  backend()
  g <- num(op_grad(function(x) op_sum(log1pexp_cg(x)))(c(NaN, Inf, -Inf, 0)))
  expect_true(is.nan(g[1]))
  expect_equal(g[2:4], c(1, 0, 0.5))

  g0 <- op_grad(function(x) op_sum(log1pexp_cg(x)))(numeric(0))
  expect_equal(length(num(g0)), 0L)

  x0 <- op_convert_to_tensor(2)
  expect_equal(length(dim(x0)), 0L)
  g1 <- op_grad(log1pexp_cg)(x0)
  expect_equal(length(dim(g1)), 0L)
  expect_equal(num(g1), 1 / (1 + exp(-2)), tolerance = 1e-6)

  xh <- op_cast(op_linspace(-4, 4, 100000L), "float16")
  gh <- op_grad(function(x) op_sum(op_cast(log1pexp_cg(x), "float32")))(xh)
  expect_equal(dtype_of(gh), "float16")
  xr <- num(xh)
  expect_equal(num(gh), 1 / (1 + exp(-xr)), tolerance = 2e-3)
})
