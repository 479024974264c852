generated_ops <- function() {
  ns <- asNamespace("customgrad")
  exports <- getNamespaceExports("customgrad")
  sort(grep("^op_", exports, value = TRUE))
}

test_that("every function of keras.ops (and keras.ops.image) has an exported op_ function", {
  skip_without_python()
  ops <- customgrad:::py_mod("ops")
  image <- customgrad:::py_mod("image")
  inspect <- reticulate::import("inspect")
  is_fn <- function(mod, n) {
    obj <- reticulate::py_get_attr(mod, n)
    !startsWith(n, "_") && !inspect$ismodule(obj) && !inspect$isclass(obj) &&
      reticulate::py_has_attr(obj, "__call__")
  }
  py_names <- Filter(function(n) is_fn(ops, n), reticulate::py_list_attributes(ops))
  img_names <- Filter(function(n) is_fn(image, n), reticulate::py_list_attributes(image))
  # keras3 names keras.ops.image.crop_images / pad_images op_image_crop / op_image_pad
  img_names <- sub("^(crop|pad)_images$", "\\1", img_names)
  expected <- c(paste0("op_", py_names), paste0("op_image_", img_names))
  missing <- setdiff(expected, generated_ops())
  expect_identical(missing, character())
  for (name in expected) {
    fn <- get(name, envir = asNamespace("customgrad"))
    expect_true(is.function(fn), label = name)
  }
  expect_gt(length(expected), 300)
})

test_that("axes are 1-based, negative axes count from the end, 0 is an error", {
  skip_without_python()
  m <- matrix(as.double(1:6), 2, 3)
  expect_equal(num(op_sum(m, axis = 1)), colSums(m))
  expect_equal(num(op_sum(m, axis = 2)), rowSums(m))
  expect_equal(num(op_sum(m, axis = -1)), rowSums(m))
  expect_equal(num(op_mean(m, axis = c(1, 2))), mean(m))
  err <- expect_error(op_sum(m, axis = 0), class = "customgrad_error_axis")
  expect_match(deparse(conditionCall(err))[[1]], "^op_sum\\(")
  expect_error(op_sum(m, axis = 1.5), class = "customgrad_axis_error")
  expect_equal(tensor_dim(op_expand_dims(m, axis = 1)), c(1L, 2L, 3L))
  expect_equal(tensor_dim(op_expand_dims(m, axis = -1)), c(2L, 3L, 1L))
  expect_equal(tensor_dim(op_stack(list(m, m), axis = 1)), c(2L, 2L, 3L))
  expect_equal(tensor_dim(op_concatenate(list(m, m), axis = 2)), c(2L, 6L))
  expect_equal(tensor_dim(op_transpose(array(0, c(2, 3, 4)), axes = c(3, 1, 2))), c(4L, 2L, 3L))
  expect_equal(tensor_dim(op_moveaxis(array(0, c(2, 3, 4)), 1, 3)), c(3L, 4L, 2L))
  expect_equal(num(op_argmax(c(1, 5, 2))), 2)  # positions are 1-based, as in keras3
  expect_equal(num(op_argmax(c(1, 5, 2), zero_indexed = TRUE)), 1)
})

test_that("shapes are integer vectors; R doubles become floatx tensors", {
  skip_without_python()
  z <- op_zeros(c(2, 3))
  expect_equal(tensor_dim(z), c(2L, 3L))
  expect_equal(dtype_of(z), config_floatx())
  expect_equal(tensor_dim(op_reshape(1:6, c(3, 2))), c(3L, 2L))
  expect_equal(tensor_dim(op_reshape(1:6, c(3, NA))), c(3L, 2L))
  expect_equal(tensor_dim(op_full(c(2, 2), 7)), c(2L, 2L))
  expect_equal(dtype_of(op_exp(c(1, 2))), config_floatx())
  expect_equal(dtype_of(op_convert_to_tensor(1)), config_floatx())
  expect_equal(dtype_of(op_add(1, 2)), config_floatx())
})

test_that("a representative set of ops computes what R computes", {
  skip_without_python()
  a <- matrix(c(1, 2, 3, 4), 2)
  b <- matrix(c(5, 6, 7, 8), 2)
  expect_equal(as.array(op_matmul(a, b)), a %*% b)
  expect_equal(as.array(op_add(a, b)), a + b)
  expect_equal(as.array(op_multiply(a, 2)), a * 2)
  expect_equal(as.array(op_exp(a)), exp(a), tolerance = 1e-6)
  expect_equal(as.array(op_log1p(a)), log1p(a), tolerance = 1e-6)
  expect_equal(as.array(op_sqrt(a)), sqrt(a), tolerance = 1e-6)
  expect_equal(as.array(op_maximum(a, 2.5)), pmax(a, 2.5))
  expect_equal(as.array(op_where(a > 2, a, 0)), ifelse(a > 2, a, 0))
  expect_equal(as.array(op_einsum("ij,jk->ik", a, b)), a %*% b)
  expect_equal(as.array(op_tensordot(a, b, axes = 1)), a %*% b)
  expect_equal(num(op_cumsum(c(1, 2, 3))), c(1, 3, 6))
  expect_equal(num(op_norm(c(3, 4))), 5)
  expect_equal(num(op_relu(c(-1, 2))), c(0, 2))
  expect_equal(num(op_sigmoid(0)), 0.5)
  expect_equal(num(op_softmax(c(0, 0))), c(0.5, 0.5))
  expect_equal(num(op_logsumexp(c(0, 0))), log(2), tolerance = 1e-6)
  parts <- op_split(c(1, 2, 3, 4), 2)
  expect_length(parts, 2)
  expect_equal(num(parts[[2]]), c(3, 4))
  grids <- op_meshgrid(c(1, 2), c(3, 4, 5), indexing = "ij")
  expect_equal(tensor_dim(grids[[1]]), c(2L, 3L))
  expect_equal(num(op_cond(TRUE, function() 1, function() 2)), 1)
  expect_equal(num(op_map(c(1, 2, 3), function(x) x * 2)), c(2, 4, 6))  # data first, as keras3
  expect_equal(num(op_fori_loop(0L, 3L, function(i, x) x + 1, 0)), 3)
  expect_equal(tensor_dim(op_image_resize(array(0, c(1, 4, 4, 3)), size = c(2, 2))), c(1L, 2L, 2L, 3L))
  expect_equal(tensor_dim(op_one_hot(c(1L, 3L), 3)), c(2L, 3L))
  # (a b) -> b a of 0:5 is the 3 x 2 tensor [[0, 3], [1, 4], [2, 5]]
  expect_equal(as.array(op_rearrange(op_arange(0L, 5L), "(a b) -> b a", a = 2)),
               matrix(c(0L, 1L, 2L, 3L, 4L, 5L), 3, 2))
  expect_equal(num(op_take(c(10, 20, 30), c(1, 3))), c(10, 30))  # indices are 1-based (keras3)
  expect_equal(num(op_take(c(10, 20, 30), c(0, 2), zero_indexed = TRUE)), c(10, 30))
  expect_equal(num(op_take_along_axis(c(10, 20, 30), c(3, 2), axis = 1)), c(30, 20))
  expect_equal(num(op_segment_sum(c(1, 2, 3), c(1, 1, 2), num_segments = 2)), c(3, 3))
  top <- op_top_k(c(1, 9, 5), k = 2)
  expect_equal(num(top[[1]]), c(9, 5))
  expect_equal(num(top$indices), c(2, 3))
})

test_that("Python errors from ops surface with their message", {
  skip_without_python()
  err <- expect_error(op_matmul(matrix(1, 2, 3), matrix(1, 2, 3)), class = "customgrad_error_python")
  expect_match(conditionMessage(err), "op_matmul")
  expect_true(nzchar(err$python_message))
})
