test_that("R arrays become tensors with the same values, column-major layout kept", {
  skip_without_python()
  m <- matrix(c(1.5, 2.5, 3.5, 4.5, 5.5, 6.5), nrow = 2)
  t <- as_tensor(m)
  expect_equal(tensor_dim(t), c(2L, 3L))
  expect_identical(as.array(t), m)
  # element [2, 1] of the R matrix is element [2, 1] of the tensor (1-based op_take, as keras3)
  expect_equal(as.numeric(op_take(op_take(t, 2L, axis = 1), 1L)), m[2, 1])

  a <- array(as.double(1:24), dim = c(2, 3, 4))
  ta <- as_tensor(a)
  expect_identical(as.array(ta), a)
  expect_equal(num(op_sum(ta, axis = 3)), as.vector(apply(a, c(1, 2), sum)))
  expect_equal(num(op_sum(ta, axis = c(1, 3))), as.vector(apply(a, 2, sum)))
})

test_that("R types map to keras dtypes: doubles to floatx, integers int32, logicals bool", {
  skip_without_python()
  expect_equal(dtype_of(as_tensor(c(1, 2))), config_floatx())
  expect_equal(dtype_of(as_tensor(matrix(1, 2, 2))), "float32")
  expect_equal(dtype_of(as_tensor(1:2)), "int32")
  expect_equal(dtype_of(as_tensor(TRUE)), "bool")
  ti <- as_tensor(matrix(1:6, 2))
  expect_identical(as.array(ti), matrix(1:6, 2))
  tl <- as_tensor(c(TRUE, FALSE, TRUE))
  expect_identical(as.logical(tl), c(TRUE, FALSE, TRUE))
  expect_identical(as.array(as_tensor(c(TRUE, FALSE))), array(c(TRUE, FALSE), 2L))
  s <- as_tensor(3)
  expect_equal(tensor_dim(s), integer())
  expect_identical(as.array(s), 3)
  expect_identical(as.integer(as_tensor(7L)), 7L)
  for (dt in c("float16", "bfloat16", "float64", "int64", "uint8")) {
    t <- as_tensor(c(1, 2, 3), dtype = dt)
    # jax without x64 has no 64-bit types
    narrowed <- c(float64 = "float32", int64 = "int32")
    expect_equal(dtype_of(t), if (config_backend() == "jax" && dt %in% names(narrowed)) narrowed[[dt]] else dt)
    expect_equal(as.numeric(t), c(1, 2, 3), label = dt)
  }
  expect_error(as_tensor("a"), class = "customgrad_conversion_error")
  expect_error(as_tensor(c(TRUE, NA)), class = "customgrad_conversion_error")
})

test_that("a 1e6-element double array converts in milliseconds, both ways", {
  skip_without_python()
  x <- array(round(runif(1e6) * 1000) / 8, dim = c(1000, 1000))  # exact in float32
  as_tensor(x[1:10]); as.array(as_tensor(1:3))  # warm up
  to <- system.time(for (i in 1:5) t <- as_tensor(x))[["elapsed"]] / 5
  from <- system.time(for (i in 1:5) back <- as.array(t))[["elapsed"]] / 5
  cat(sprintf("\n[conversion, %s] 1e6 doubles: R -> tensor %.1f ms, tensor -> R %.1f ms\n",
              config_backend(), to * 1000, from * 1000), file = stderr())
  expect_identical(back, x)
  expect_lt(to, 0.5)
  expect_lt(from, 0.5)
  # float64 keeps every bit where the backend supports it (jax without x64 does not)
  if (config_backend() != "jax") {
    y <- runif(1e6)
    expect_identical(as.numeric(as_tensor(y, dtype = "float64")), y)
  }
})

test_that("tensors become R values with as.array, as.numeric, as.integer, as.logical", {
  skip_without_python()
  t <- op_reshape(op_arange(0L, 5L), c(2, 3))
  expect_identical(as.array(t), matrix(c(0L, 3L, 1L, 4L, 2L, 5L), 2))
  expect_identical(as.numeric(t), c(0, 3, 1, 4, 2, 5))
  expect_identical(op_convert_to_numpy(t), as.array(t))
  expect_identical(as.logical(op_greater(t, 2)), c(FALSE, TRUE, FALSE, TRUE, FALSE, TRUE))
})
