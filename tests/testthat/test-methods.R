# The tensor methods customgrad adds where keras3 registers none (?customgrad, "Tensor methods
# customgrad adds"), and the proof that it replaces none of keras3's.

test_that("as.numeric(), as.integer(), as.logical() and dim() work on every backend's tensors", {
  skip_without_python()
  x <- as_tensor(matrix(c(1, 2, 3, 4, 5, 6), 2))
  expect_identical(sort(as.numeric(x)), c(1, 2, 3, 4, 5, 6))
  expect_identical(sort(as.integer(x)), 1:6)
  expect_identical(sum(as.logical(x > 3)), 3L)
  expect_identical(dim(x), c(2L, 3L))
  v <- keras$Variable(c(1, 2))
  expect_identical(as.numeric(v), c(1, 2))
  expect_identical(dim(v), 2L)
})

test_that("Math and Summary groups on tensors", {
  skip_without_python()
  v <- c(0.5, 1, 2)
  x <- as_tensor(v)
  expect_equal(num(exp(x)), exp(v), tolerance = 1e-6)
  expect_equal(num(log(x)), log(v), tolerance = 1e-6)
  expect_equal(num(log(x, base = 2)), log2(v), tolerance = 1e-6)
  expect_equal(num(sqrt(x)), sqrt(v), tolerance = 1e-6)
  expect_equal(num(tanh(x)), tanh(v), tolerance = 1e-6)
  expect_equal(num(floor(x)), floor(v))
  expect_equal(num(cumsum(x)), cumsum(v))
  expect_equal(num(sum(x)), sum(v))
  expect_equal(num(max(x)), 2)
  expect_equal(num(prod(x)), prod(v))
  # inside op_grad (jax tracers, torch tensors under autograd) too
  expect_equal(num(op_grad(function(x) sum(exp(x)))(v)), exp(v), tolerance = 1e-5)
})

test_that("customgrad registered no method over one of keras3's", {
  skip_without_python()
  for (cls in names(customgrad:::tensor_method_table)) {
    for (generic in customgrad:::tensor_method_table[[cls]]) {
      method <- utils::getS3method(generic, cls, optional = TRUE)
      if (is.null(method)) next
      # a method of this class is either keras3's/tensorflow's, or customgrad's own
      owner <- environmentName(environment(method))
      expect_true(owner %in% c("customgrad", "keras3", "tensorflow"), label = paste(generic, cls))
      if (owner == "customgrad") {
        expect_false(generic %in% keras3_registered(cls), label = paste(generic, cls))
      }
    }
  }
})
