# Under jax.jit and tf.function the R forward and R grad closures run only while
# tracing: 5 calls of a compiled gradient run each R closure once, not 5 times.

counting_log1pexp <- function(calls) {
  op_custom_gradient(function(x) {
    calls$fwd <- calls$fwd + 1L
    e <- op_exp(x)
    tuple(op_log1p(e), function(dy) {
      calls$grad <- calls$grad + 1L
      dy * (1 - 1 / (1 + e))
    })
  })
}

test_that("R closures run only while tracing under jax.jit / tf.function", {
  b <- backend()
  if (!b %in% c("jax", "tensorflow")) {
    skip(paste("trace-only applies to compiled gradients (jax.jit, tf.function); backend is", b))
  }
  calls <- new.env(); calls$fwd <- 0L; calls$grad <- 0L
  f <- counting_log1pexp(calls)
  x <- op_convert_to_tensor(c(-2, 0, 3))
  if (b == "jax") {
    jax <- reticulate::import("jax")
    compiled <- jax$jit(jax$grad(reticulate::py_func(function(x) op_sum(f(x)))))
  } else {
    tf <- reticulate::import("tensorflow")
    compiled <- tf$`function`(function(x) {
      tape <- tf$GradientTape(); tape$`__enter__`(); tape$watch(x)
      y <- op_sum(f(x)); tape$`__exit__`(NULL, NULL, NULL)
      tape$gradient(y, x)
    })
  }
  for (i in 1:5) out <- compiled(x)
  expect_equal(num(out), 1 / (1 + exp(-c(-2, 0, 3))), tolerance = 1e-5)
  expect_equal(calls$fwd, 1L)
  expect_equal(calls$grad, 1L)
})
