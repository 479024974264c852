test_that("the keras3 documentation example runs verbatim; its gradient at 100 is exactly 1", {
  skip_without_python()
  log1pexp <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
  x <- op_convert_to_tensor(100)
  expect_identical(as.numeric(op_grad(log1pexp)(x)), 1)
  expect_identical(as.numeric(op_grad(log1pexp)(100)), 1)
  expect_equal(as.numeric(op_grad(log1pexp)(0)), 0.5)
  expect_equal(as.numeric(log1pexp(0)), log(2), tolerance = 1e-6)
  # plain autodiff of the same forward gives NaN at 100 (inf / inf)
  plain <- function(x) op_log(1 + op_exp(x))
  expect_true(is.nan(as.numeric(op_grad(plain)(x))))
})

grad_styles <- list(
  "function(upstream)" = function(e) function(upstream) upstream * (1 - 1 / (1 + e)),
  "function(..., upstream = NULL)" = function(e) function(..., upstream = NULL) {
    upstream <- upstream %||% ..1
    upstream * (1 - 1 / (1 + e))
  },
  "\\(..., upstream)" = function(e) \(..., upstream) upstream * (1 - 1 / (1 + e)),
  "function(dy)" = function(e) function(dy) dy * (1 - 1 / (1 + e)),
  "function(...)" = function(e) function(...) ..1 * (1 - 1 / (1 + e))
)

for (style in names(grad_styles)) {
  test_that(paste("grad written as", style, "works on", Sys.getenv("KERAS_BACKEND", "default")), {
    skip_without_python()
    make_grad <- grad_styles[[style]]
    f <- op_custom_gradient(function(x) {
      e <- op_exp(x)
      list(op_log(1 + e), make_grad(e))
    })
    g <- op_grad(function(x) op_sum(f(x)))(c(-1, 0, 100))
    expect_equal(num(g), c(1 / (1 + exp(1)), 0.5, 1), tolerance = 1e-6)
    expect_identical(num(g)[3], 1)
  })
}

test_that("each step's grad function is called by its own formals, in a tuple or a list", {
  skip_without_python()
  # the bridge takes tuple(tensor, R function) apart itself and keeps the signatures of recent
  # formals: grad functions of other formals from the same f, step after step, are each called
  # by their own (function(dy1, dy2) cannot take a single output's upstream gradient)
  styles <- list(
    function(x) tuple(op_sum(x * 2), function(dy) dy * op_ones(c(2)) * 3),
    function(x) tuple(op_sum(x * 2), function(..., upstream = NULL) (upstream %||% ..1) * op_ones(c(2)) * 4),
    function(x) list(op_sum(x * 2), function(upstream) upstream * op_ones(c(2)) * 5),
    function(x) tuple(op_sum(x * 2), function(dy1, dy2) dy1)
  )
  which <- 1L
  f <- op_custom_gradient(function(x) styles[[which]](x))
  for (round in 1:2) {
    for (which in 1:3) expect_equal(num(op_grad(f)(c(1, 2))), rep(which + 2, 2))
    which <- 4L
    expect_error(op_grad(f)(c(1, 2)), class = "customgrad_error_grad_fn_arity")
  }
  # a tuple the bridge hands back to R: an R number as the output (a tensor of the float dtype),
  # a Python callable as grad
  number <- op_custom_gradient(function(x) tuple(3, function(dy) op_ones(c(2)) * 7))
  expect_equal(num(number(c(1, 2))), 3)
  expect_identical(customgrad:::py_mod("keras")$backend$standardize_dtype(number(c(1, 2))$dtype),
                   config_floatx())
  expect_equal(num(op_grad(function(x) number(x) * op_sum(x))(c(1, 2))), c(10, 10))
  python_grad <- op_custom_gradient(function(x) {
    tuple(op_sum(x), reticulate::py_eval("lambda dy: dy * 6.0"))
  })
  expect_equal(num(op_grad(python_grad)(2)), 6)
})

test_that("upstream = and ..1 both carry the upstream gradient (scaled by the loss)", {
  skip_without_python()
  by_keyword <- op_custom_gradient(function(x) {
    tuple(x * 2, function(..., upstream = NULL) upstream * 2)
  })
  by_position <- op_custom_gradient(function(x) {
    tuple(x * 2, function(..., upstream = NULL) ..1 * 2)
  })
  for (f in list(by_keyword, by_position)) {
    g <- op_grad(function(x) op_sum(f(x) * as_tensor(c(3, 5))))(c(1, 1))
    expect_equal(num(g), c(6, 10))
  }
})

test_that("keras3's grad spelling gets the one upstream as ..1 and as upstream =, unchanged", {
  skip_without_python()
  # the bridge sends a single output's upstream across once when it is given both ways; grad
  # still receives it in both places, as the same tensor object, with R errors kept as they are
  received <- new.env()
  f <- op_custom_gradient(function(x) {
    tuple(x * 2, function(..., upstream = NULL) {
      received$dots <- list(...)
      received$upstream <- upstream
      if (isTRUE(received$fail)) stop("boom in keras3's spelling")
      upstream * 2
    })
  })
  g <- op_grad(function(x) op_sum(f(x) * as_tensor(c(3, 5))))(c(1, 1))
  expect_equal(num(g), c(6, 10))
  expect_length(received$dots, 1L)
  expect_null(names(received$dots))
  expect_s3_class(received$upstream, "python.builtin.object")
  expect_identical(class(received$dots[[1]]), class(received$upstream))
  expect_equal(num(received$dots[[1]]), c(3, 5))
  expect_equal(num(received$upstream), c(3, 5))
  received$fail <- TRUE
  err <- expect_error(op_grad(function(x) op_sum(f(x)))(c(1, 1)),
                      class = "customgrad_error_callback")
  expect_match(conditionMessage(err), "boom in keras3's spelling", fixed = TRUE)
})

test_that("several inputs: gradients come back as a list, NULL means zero", {
  skip_without_python()
  f <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(dy) list(dy * y, NULL))
  })
  g <- op_grad(f, argnums = c(1, 2))(3, 4)
  expect_type(g, "list")
  expect_length(g, 2)
  expect_equal(num(g[[1]]), 4)
  expect_equal(num(g[[2]]), 0)
  expect_equal(num(op_grad(f, argnums = 2)(3, 4)), 0)
  # arguments named in R are matched to f's formals and still get their gradients
  named <- op_grad(f, argnums = c(1, 2))(y = 4, x = 3)
  expect_equal(num(named[[1]]), 4)
  expect_equal(num(op_grad(function(a, b) a * b * b, argnums = 2)(b = 2, a = 5)), 20)
})

test_that("structured inputs: a named list argument gets a named list gradient", {
  skip_without_python()
  f <- op_custom_gradient(function(p) {
    tuple(p$a * p$b, function(dy) list(a = dy * p$b, b = dy * p$a * 10))
  })
  g <- op_grad(f)(list(a = 2, b = 3))
  expect_setequal(names(g), c("a", "b"))
  expect_equal(num(g$a), 3)
  expect_equal(num(g$b), 20)
})

test_that("several outputs: one upstream per output, positionally and as upstream =", {
  skip_without_python()
  f <- op_custom_gradient(function(x) {
    tuple(tuple(x * 2, x * 3), function(dy1, dy2) dy1 * 20 + dy2 * 300)
  })
  h <- op_custom_gradient(function(x) {
    tuple(list(x * 2, x * 3), \(..., upstream) upstream[[1]] * 20 + ..2 * 300)
  })
  k <- op_custom_gradient(function(x) {
    tuple(list(x * 2, x * 3), function(upstream) upstream[[1]] * 20 + upstream[[2]] * 300)
  })
  loss <- function(fn) function(x) { out <- fn(x); op_sum(out[[1]]) + op_sum(out[[2]]) }
  expect_equal(num(op_grad(loss(f))(1)), 320)
  expect_equal(num(op_grad(loss(h))(1)), 320)
  expect_equal(num(op_grad(loss(k))(1)), 320)
})

test_that("custom gradients compose: gradient of a gradient", {
  skip_without_python()
  cube <- op_custom_gradient(function(x) tuple(x^3, function(dy) dy * 3 * x^2))
  expect_equal(num(op_grad(op_grad(cube))(2)), 12)
})

test_that("the custom gradient is used by the backend's own autodiff", {
  b <- backend()
  f <- op_custom_gradient(function(x) tuple(op_sin(x), function(dy) dy * 7))
  if (b == "tensorflow") {
    tf <- reticulate::import("tensorflow")
    x <- tf$Variable(1)
    with(tf$GradientTape() %as% tape, {
      y <- f(x)
    })
    expect_equal(num(tape$gradient(y, x)), 7)
    # and inside a tf.function graph (the R forward and grad run while tracing)
    step <- tf$`function`(function(x) {
      with(tf$GradientTape() %as% tape, { tape$watch(x); y <- f(x) })
      tape$gradient(y, x)
    })
    expect_equal(num(step(as_tensor(c(1, 2)))), c(7, 7))
  } else if (b == "torch") {
    torch <- reticulate::import("torch")
    x <- torch$tensor(1, requires_grad = TRUE)
    f(x)$backward()
    expect_equal(num(x$grad), 7)
  } else {
    jax <- reticulate::import("jax")
    expect_equal(num(jax$grad(function(x) f(x))(as_tensor(1))), 7)
    expect_equal(num(jax$jit(jax$grad(function(x) f(x)))(as_tensor(1))), 7)
  }
})

test_that("a forward reading a keras.Variable passes variables = to the grad function", {
  skip_without_python()
  keras <- customgrad:::py_mod("keras")
  w <- keras$Variable(2)
  f <- op_custom_gradient(function(x) {
    tuple(x * w, function(dy, variables = NULL) list(dy * w, list(dy * x * 10)))
  })
  g <- op_grad(function(x) f(x))(3)
  expect_equal(num(g), 2)
  bad <- op_custom_gradient(function(x) tuple(x * w, function(dy) dy * w))
  expect_error(op_grad(function(x) bad(x))(3), class = "customgrad_error_custom_gradient")
})

test_that("contract violations are classed errors naming what was expected and received", {
  skip_without_python()
  expect_error(op_custom_gradient(3), class = "customgrad_error_type")
  expect_error(op_custom_gradient(3), "Received the number 3", fixed = TRUE)
  not_pair <- op_custom_gradient(function(x) x * 2)
  err <- expect_error(not_pair(1), class = "customgrad_error_custom_gradient")
  expect_match(conditionMessage(err), "tuple(output, grad)", fixed = TRUE)
  no_fn <- op_custom_gradient(function(x) tuple(x, 3))
  expect_error(no_fn(1), class = "customgrad_error_custom_gradient")
  # a gradient of the wrong shape: Python's CustomGradientError surfaces with its message
  wrong <- op_custom_gradient(function(x) tuple(op_sum(x), function(dy) op_ones(c(3))))
  err <- expect_error(op_grad(wrong)(c(1, 2)), class = "customgrad_error_custom_gradient")
  expect_s3_class(err, "customgrad_error_python")
  expect_match(conditionMessage(err), "returned a gradient of shape(3)", fixed = TRUE)
  # an R error inside the grad function keeps its class and message
  failing <- op_custom_gradient(function(x) tuple(x, function(dy) stop("boom in grad")))
  expect_error(op_grad(failing)(1), "boom in grad")
})
