# to_py(): what customgrad's own entry points hand Python for R values (the arguments of a
# differentiated function, what an R forward or grad function returns).

test_that("R numbers become tensors: doubles floatx, integers int32, logicals bool, dims kept", {
  skip_without_python()
  to_py <- customgrad:::to_py
  m <- matrix(c(1.5, 2.5, 3.5, 4.5, 5.5, 6.5), nrow = 2)
  t <- to_py(m)
  expect_equal(dim(as.array(t)), c(2L, 3L))
  expect_equal(as.array(t), m, tolerance = 1e-6, ignore_attr = TRUE)
  expect_equal(dtype_of(t), config_floatx())
  expect_equal(dtype_of(to_py(1:2)), "int32")
  expect_equal(dtype_of(to_py(c(TRUE, FALSE))), "bool")
  s <- to_py(2.5)
  expect_length(customgrad:::py_mod("bridge")$shape(s), 0L)
  expect_equal(as.numeric(as.array(s)), 2.5)
})

test_that("lists keep their structure: named lists become dicts, NULL stays None", {
  skip_without_python()
  to_py <- customgrad:::to_py
  out <- to_py(list(a = 1, b = list(2, NULL)))
  expect_s3_class(out, "python.builtin.dict")
  back <- reticulate::py_to_r(out)
  expect_equal(num(back$a), 1)
  expect_null(back$b[[2]])
  expect_identical(to_py("text"), "text")
})

test_that("arguments given to op_grad are converted by the same rule (R integers stay int32)", {
  skip_without_python()
  seen <- new.env()
  g <- op_grad(function(x, n) {
    seen$dtype <- dtype_of(n)
    op_sum(x * op_cast(n, "float32"))
  })(c(1, 2), 3L)
  expect_identical(seen$dtype, "int32")
  expect_equal(num(g), c(3, 3))
})
