# keras3's documented op examples (its reference pages, run on tensorflow), reproduced value by
# value on the active backend. The expected values are the ones keras3 prints; where keras3 shows
# float64 (an R array, kept by keras), jax without x64 mode computes in float32 -- a documented
# backend difference (README).

values <- function(x) as.array(x)

# keras3 prints tensors row-major; R arrays of the same shape compare directly.
expect_values <- function(x, expected, tolerance = 1e-6) {
  got <- values(x)
  if (is.null(dim(expected)) && length(dim(got)) <= 1L) got <- as.vector(got)
  expect_equal(got, expected, tolerance = tolerance, ignore_attr = is.null(dim(expected)))
}

# float64 where keras3 shows it; jax keeps float32 (x64 disabled).
float64_kept <- function() if (config_backend() == "jax") "float32" else "float64"

test_that("every op_* name keras3 exports exists here", {
  names <- readLines(test_path("fixtures", "keras3-op-names.txt"))
  names <- names[!startsWith(names, "#") & nzchar(names)]
  expect_gt(length(names), 280)
  missing <- names[!vapply(names, exists, TRUE, envir = asNamespace("customgrad"), inherits = FALSE)]
  expect_identical(missing, character())
  exported <- getNamespaceExports("customgrad")
  expect_identical(setdiff(names, exported), character())
})

test_that("op_arange is 1-based and includes the end (keras3's examples)", {
  skip_without_python()
  x <- op_arange(3L)
  expect_values(x, c(1, 2, 3))
  expect_equal(dtype_of(x), "int32")
  x <- op_arange(3)
  expect_values(x, c(1, 2, 3))
  expect_equal(dtype_of(x), "float32")
  x <- op_arange(3, dtype = "int32")
  expect_values(x, c(1, 2, 3))
  expect_equal(dtype_of(x), "int32")
  expect_values(op_arange(3L, 7L), c(3, 4, 5, 6, 7))
  expect_values(op_arange(3L, 7L, 2L), c(3, 5, 7))
  expect_values(op_arange(1L, 4L, include_end = FALSE), c(1, 2, 3))
})

test_that("argmax, argmin, argsort give 1-based positions (keras3's examples)", {
  skip_without_python()
  x <- op_array(rbind(c(11, 12, 10), c(12, 11, 10)))
  expect_values(op_argmax(x), 2)
  expect_values(op_argmax(x, axis = 1), c(2, 1, 1))
  expect_values(op_argmax(x, axis = 2), c(2, 1))
  expect_values(op_argmax(x, axis = 2, zero_indexed = TRUE), c(1, 0))
  x <- op_arange(6L) |> op_reshape(c(2, 3)) |> op_add(10)
  expect_values(x, rbind(c(11, 12, 13), c(14, 15, 16)))
  expect_values(op_argmin(x), 1)
  expect_values(op_argmin(x, axis = 1), c(1, 1, 1))
  expect_values(op_argmin(x, axis = 2), c(1, 1))
  x <- op_array(c(3, 1, 2)) + .1
  expect_values(op_argsort(x), c(2, 3, 1))
  expect_values(x[op_argsort(x)] == op_sort(x), c(TRUE, TRUE, TRUE))
  x <- op_array(rbind(c(0, 3), c(3, 2), c(4, 5))) + .1
  i <- op_argsort(x, axis = 1)
  expect_values(i, rbind(c(1, 2), c(2, 1), c(3, 3)))
  i <- op_argsort(x, axis = 2)
  expect_values(i, rbind(c(1, 2), c(2, 1), c(1, 2)))
  # kth = 1: the smallest element comes first (the rest in any order)
  p <- as.array(op_argpartition(c(3, 1, 2), 1))
  expect_equal(p[[1]], 2L)
  expect_setequal(p, 1:3)
})

test_that("op_top_k, op_searchsorted, op_digitize give 1-based indices (keras3's examples)", {
  skip_without_python()
  x <- op_array(c(5, 2, 7, 1, 9, 3), "int32")
  top <- op_top_k(x, k = 3)
  expect_named(top, c("values", "indices"))
  expect_values(top$values, c(9, 7, 5))
  expect_values(top$indices, c(5, 3, 1))
  expect_values(op_top_k(x, k = 3, zero_indexed = TRUE)$indices, c(4, 2, 0))

  sorted <- op_array(c(-1, 0, 2, 4))
  queries <- c(-2, 0, 3, 7)
  expect_values(op_searchsorted(sorted, queries), c(1, 2, 4, 5))
  expect_values(op_searchsorted(sorted, queries, side = "right", zero_indexed = TRUE),
                c(0, 2, 3, 4))

  x <- op_array(c(-1, 0, 1, 3, 3.5, 4.5, 1.6, 8))
  bins <- array(c(0, 3, 4.5, 7))
  expect_values(op_digitize(x, bins), c(1, 2, 2, 3, 3, 4, 2, 5))
  # keras3 coerces bins given as a double vector too
  expect_values(op_digitize(x, c(0, 3, 4.5, 7)), c(1, 2, 2, 3, 3, 4, 2, 5))
})

test_that("indices given to ops are 1-based (keras3's examples)", {
  skip_without_python()
  x <- op_array(c(2, 4, 3, 1), "int32")
  eye4 <- rbind(c(0, 1, 0, 0), c(0, 0, 0, 1), c(0, 0, 1, 0), c(1, 0, 0, 0))
  expect_values(op_one_hot(x, num_classes = 4), eye4)
  expect_values(op_one_hot(x - 1L, num_classes = 4, zero_indexed = TRUE), eye4)
  expect_values(op_one_hot(c(2, 4, 3, 1), num_classes = 4), eye4)
  expect_values(op_one_hot(factor(c("b", "d", "c", "a")), num_classes = 4), eye4)

  s <- op_scatter(indices = rbind(1), values = 1, shape = c(5))
  expect_values(s, c(1, 0, 0, 0, 0))
  expect_equal(dtype_of(s), float64_kept())
  s <- op_scatter(indices = rbind(1, 3), values = 1:2, shape = c(5))
  expect_values(s, c(1, 0, 2, 0, 0))
  expect_equal(dtype_of(s), "int32")
  indices <- rbind(c(1, 2), c(2, 2))
  expect_values(op_scatter(indices, op_array(c(1, 1)), shape = c(2, 2)), rbind(c(0, 1), c(0, 1)))

  data <- op_array(c(1, 2, 10, 20, 100, 200))
  segment_ids <- op_array(c(1, 1, 2, 2, 3, 3), "int32")
  expect_values(op_segment_sum(data, segment_ids, 3), c(3, 30, 300))
  data <- op_convert_to_tensor(c(1, 2, 10, 20, 100, 200))
  expect_values(op_segment_max(data, segment_ids, 3), c(2, 20, 200))

  # keras3 takes the flat indices 1-based and gives the coordinates as Python does
  coords <- op_unravel_index(c(1, 5), array(c(3, 3)))
  expect_length(coords, 2)
  expect_values(coords[[1]], c(0, 1))
  expect_values(coords[[2]], c(0, 1))

  m <- op_reshape(op_arange(12L), c(3, 4))
  expect_values(op_take(m, c(1, 3), axis = 1), rbind(c(1, 2, 3, 4), c(9, 10, 11, 12)))
  expect_values(op_take(m, -1, axis = 2), c(4, 8, 12))
  expect_values(op_take_along_axis(m, rbind(c(4, 1)), axis = 2), rbind(c(4, 1), c(8, 5), c(12, 9)))
  expect_values(op_slice(m, c(2, 2), c(2, 2)), rbind(c(6, 7), c(10, 11)))
  expect_values(op_slice_update(m, c(1, 1), rbind(c(0L, 0L))),
                rbind(c(0, 0, 3, 4), c(5, 6, 7, 8), c(9, 10, 11, 12)))
  expect_values(op_scatter_update(op_zeros(c(3)), rbind(2), 5), c(0, 5, 0))
  parts <- op_split(op_arange(6L), c(3, 5))  # 1-based starts of the 2nd and 3rd pieces
  expect_length(parts, 3)
  expect_values(parts[[1]], c(1, 2))
  expect_values(parts[[2]], c(3, 4))
  expect_values(parts[[3]], c(5, 6))
  expect_values(op_nonzero(rbind(c(0, 1), c(1, 0))), rbind(c(1, 2), c(2, 1)))
})

test_that("op_switch takes a 1-based branch index (keras3's example)", {
  skip_without_python()
  add_fn <- function(x, y) x + y + 100
  subtract_fn <- function(x, y) x - y - 100
  x <- op_array(2)
  y <- op_array(0.5)
  branches <- list(add_fn, subtract_fn)
  expect_values(op_switch(0, branches, x, y), 102.5)
  expect_values(op_switch(1, branches, x, y), 102.5)
  expect_values(op_switch(2, branches, x, y), -98.5)
  expect_values(op_switch(3, branches, x, y), -98.5)
})

test_that("op_map and op_vectorized_map take the data first (keras3's examples)", {
  skip_without_python()
  xs <- op_arange(10)
  expect_values(op_map(xs, function(x) x^2), (1:10)^2)
  ys <- op_map(xs, function(x) list(y1 = x^2, y2 = x * 10))
  expect_values(ys$y1, (1:10)^2)
  expect_values(ys$y2, (1:10) * 10)
  x <- op_arange(12L) |> op_reshape(c(3, 4))
  expect_values(x, rbind(1:4, 5:8, 9:12))
  expect_values(x |> op_vectorized_map(\(row) row + 10), rbind(11:14, 15:18, 19:22))
  expect_values(list(x, x, x) |> op_vectorized_map(\(rows) Reduce(`+`, rows)),
                rbind(c(3, 6, 9, 12), c(15, 18, 21, 24), c(27, 30, 33, 36)))
})

test_that("window lengths, axes and complex arrays convert as keras3 (keras3's examples)", {
  skip_without_python()
  expect_values(op_bartlett(5), c(0, 0.5, 1, 0.5, 0))
  expect_values(op_hamming(5), c(0.08000001, 0.54, 1, 0.54, 0.08000001))
  expect_values(op_hanning(5), c(0, 0.5, 1, 0.5, 0))
  expect_values(op_kaiser(5, beta = 14),
                c(7.7268669e-06, 1.6493215e-01, 1, 1.6493215e-01, 7.7268669e-06), tolerance = 1e-5)
  m <- 1:4 |> op_reshape(c(2, 2))
  expect_values(m, rbind(c(1, 2), c(3, 4)))
  expect_values(op_rot90(m), rbind(c(2, 4), c(1, 3)))
  m <- 1:8 |> op_reshape(c(2, 2, 2))
  r <- op_rot90(m, k = 1, axes = c(2, 3))
  expect_values(r[1, , ], rbind(c(2, 4), c(1, 3)))
  expect_values(r[2, , ], rbind(c(6, 8), c(5, 7)))
  x <- op_convert_to_tensor(matrix(c(1 + 3i, 2 - 5i, 4 - 3i, 3 + 2i), nrow = 2))
  expect_values(op_angle(x), rbind(c(1.2490457, -0.6435011), c(-1.19029, 0.5880026)))
  x <- op_array(c(1, 2, 2, 3), dtype = "uint8")
  expect_values(op_bincount(x), c(0, 1, 2, 1))
  expect_values(op_bincount(x, weights = x / 2), c(0, 0.5, 2, 1.5))
  expect_values(op_bincount(x, minlength = 6), c(0, 1, 2, 1, 0, 0))
  expect_values(op_multi_hot(op_convert_to_tensor(c(0, 4)), num_classes = 5), c(1, 0, 0, 0, 1))
  x <- op_arange(6L)
  expect_values(op_select(list(x < 3, x > 3), list(x, x^2), 42), c(1, 2, 42, 16, 25, 36))
  expect_values(op_bitwise_and(c(12, 10), c(10, 6)), c(8, 2))
})

test_that("R doubles convert as keras3: arrays and op_convert_to_tensor vectors keep float64", {
  skip_without_python()
  y <- op_convert_to_tensor(array(c(1, 2, 3)))
  expect_values(y, c(1, 2, 3))
  expect_equal(dtype_of(y), float64_kept())
  i <- op_convert_to_tensor(c(1, 3, 2, 0), "int32")
  expect_values(i, c(1, 3, 2, 0))
  expect_equal(dtype_of(i), "int32")
  expect_equal(dtype_of(op_array(c(1, 2, 3))), "float32")
  expect_equal(dtype_of(op_array(c(1, 2, 3), dtype = "int32")), "int32")
  x1 <- op_convert_to_tensor(c(1, 4))
  x2 <- op_convert_to_tensor(c(5, 6))
  expect_values(op_add(x1, x2), c(6, 10))
  expect_equal(dtype_of(x1 + x2), float64_kept())
  x1 <- op_convert_to_tensor(array(c(5, 5, 4, 6), dim = c(2, 2)))
  expect_values(op_add(x1, x2), rbind(c(10, 10), c(10, 12)))
  x <- op_ones(c(3))
  expect_equal(dtype_of(x + x), "float32")
  # an R scalar is a weakly typed Python number; an R vector a floatx tensor
  expect_equal(dtype_of(op_add(x, 1)), "float32")
  expect_equal(dtype_of(op_exp(c(1, 2))), "float32")
  expect_equal(dtype_of(op_exp(array(c(1, 2)))), float64_kept())
  x <- op_convert_to_tensor(rbind(c(1, 2, 3), c(4, 5, 6)))
  expect_values(op_normalize(x), rbind(c(0.26726124, 0.53452248, 0.80178373),
                                       c(0.45584231, 0.56980288, 0.68376346)))
  x <- op_convert_to_tensor(rbind(c(1, 3, 5), c(1, 5, 2)))
  expect_values(op_max(x), 5)
  expect_values(op_max(x, axis = 1), c(1, 5, 5))
  expect_values(op_max(x, axis = 1, keepdims = TRUE), rbind(c(1, 5, 5)))
  x <- op_array(rbind(c(1, 3, 6, 10), c(0, 5, 6, 8)))
  expect_values(op_diff(x), rbind(c(2, 3, 4), c(5, 1, 2)))
  expect_values(op_diff(x, axis = 1), rbind(c(-1, 2, 0, -2)))
})

test_that("op_subset and [ index tensors as keras3 documents", {
  skip_without_python()
  x <- op_arange(5L) + 10L
  expect_values(x, c(11, 12, 13, 14, 15))
  expect_values(op_subset(x, 1), 11)
  expect_equal(dim(x[1]), integer())
  expect_values(x[1], 11)
  expect_values(x[1:2], c(11, 12))
  expect_values(x[c(1, 3)], c(11, 13))
  expect_values(x[-1], 15)
  expect_values(x[-2], 14)
  expect_values(x[c(-1, -2)], c(15, 14))
  expect_values(x[c(-2, -1)], c(14, 15))
  expect_values(x[c(1, -1)], c(11, 15))
  expect_values(x[1:3], c(11, 12, 13))
  expect_values(x[NA:3], c(11, 12, 13))
  expect_values(x[1:5], c(11, 12, 13, 14, 15))
  expect_values(x[1:-1], c(11, 12, 13, 14, 15))
  expect_values(x[NA:NA], c(11, 12, 13, 14, 15))
  expect_values(x[], c(11, 12, 13, 14, 15))
  expect_values(x[1:-2], c(11, 12, 13, 14))
  expect_values(x[NA:-2], c(11, 12, 13, 14))
  expect_values(x[2:NA], c(12, 13, 14, 15))

  xr <- array(1:12, c(3, 4))
  x <- op_convert_to_tensor(xr)
  expect_values(x[1, ], c(1, 4, 7, 10))
  expect_values(x[1], c(1, 4, 7, 10))
  expect_values(x[-1], c(3, 6, 9, 12))
  expect_values(x[, 2], c(4, 5, 6))
  expect_values(x[, 2:2], array(c(4, 5, 6), c(3, 1)))
  mask <- x >= 6
  expect_values(x[mask], c(7, 10, 8, 11, 6, 9, 12))
  expect_true(all(aperm(xr)[aperm(as.array(mask))] == as.array(x[mask])))
  indices <- rbind(c(1, 1), c(2, 2), c(3, 3))
  expect_values(x[indices], c(1, 5, 9))
  expect_identical(xr[indices], c(1L, 5L, 9L))
  expect_values(x[c(1, 3), c(2, 4)], xr[c(1, 3), c(2, 4)])  # several vectors: outer product, as R

  x <- op_arange(4 * 4 * 3) |> op_reshape(c(4, 4, 3))
  expect_equal(dim(x[NULL, , , ]), c(1L, 4L, 4L, 3L))
  expect_equal(dim(x[NULL]), c(1L, 4L, 4L, 3L))
  x <- x[NULL]
  red <- rbind(c(1, 4, 7, 10), c(13, 16, 19, 22), c(25, 28, 31, 34), c(37, 40, 43, 46))
  expect_values(x[, , , 1], array(red, c(1, 4, 4)))
  expect_values(x[.., 1], array(red, c(1, 4, 4)))
  expect_values(x[.., 2], array(red + 1, c(1, 4, 4)))
  expect_values(x[.., 3], array(red + 2, c(1, 4, 4)))
  expect_equal(dim(x[]), c(1L, 4L, 4L, 3L))
  expect_equal(dim(x[..]), c(1L, 4L, 4L, 3L))
  expect_equal(dim(x[1, ..]), c(4L, 4L, 3L))
  expect_equal(dim(x[1, .., 1, 1]), 4L)
  expect_equal(dim(x[1, 1, 1, .., 1]), integer())

  expect_error(x[0], class = "customgrad_error_index")
})

test_that("op_subset<- and [<- return the modified tensor (a variable is assigned in place)", {
  skip_without_python()
  x <- op_convert_to_tensor(matrix(1, nrow = 2, ncol = 3))
  op_subset(x, 1) <- 9
  expect_values(x, rbind(c(9, 9, 9), c(1, 1, 1)))
  x[1, 1] <- 33
  expect_values(x, rbind(c(33, 9, 9), c(1, 1, 1)))
  x <- op_subset_set(x, 2, -1, value = 0)
  expect_values(x, rbind(c(33, 9, 9), c(1, 1, 0)))
  v <- customgrad:::py_mod("keras")$Variable(op_convert_to_tensor(matrix(1, nrow = 2, ncol = 3)))
  v[2, ] <- c(4, 5, 6)
  expect_values(v, rbind(c(1, 1, 1), c(4, 5, 6)))
  # differentiable: the gradient flows to the kept elements only
  g <- op_grad(function(a) {
    a[1] <- 0
    op_sum(a * a)
  })(c(1, 2, 3))
  expect_values(g, c(0, 4, 6))
})

test_that("t() and %*% on tensors, op_pmax and op_pmin", {
  skip_without_python()
  x <- op_convert_to_tensor(array(1:6, c(2, 3)))
  expect_values(t(x), t(array(1:6, c(2, 3))))
  expect_values(x %*% t(x), array(1:6, c(2, 3)) %*% t(array(1:6, c(2, 3))))
  expect_identical(matrix(1:4, 2) %*% matrix(1:4, 2), base::`%*%`(matrix(1:4, 2), matrix(1:4, 2)))
  expect_values(op_pmax(c(1, 5, 3), c(4, 2, 6)), c(4, 5, 6))
  expect_values(op_pmin(c(1, 5, 3), 2), c(1, 2, 2))
})

test_that("op_image_crop and op_image_pad take keras3's names and whole doubles", {
  skip_without_python()
  images <- op_reshape(op_arange(1, 27, dtype = "float32"), c(3, 3, 3))
  # keras3's example: top 0, left 0, bottom 2, right 2 of a 3 x 3 image leave its first pixel
  cropped <- op_image_crop(images, 0, 0, 2, 2)
  expect_equal(dim(cropped), c(1L, 1L, 3L))
  expect_values(cropped[1, 1, ], c(1, 2, 3))
  cropped <- op_image_crop(images, 1, 1, target_height = 2, target_width = 2)
  expect_values(cropped[, , 1], as.array(images[2:3, 2:3, 1]))
  padded <- op_image_pad(op_ones(c(15, 25, 3)), 2, 3, target_height = 20, target_width = 30)
  expect_equal(dim(padded), c(20L, 30L, 3L))
  padded <- op_image_pad(op_ones(c(2, 15, 25, 3)), 2, 3, target_height = 20, target_width = 30)
  expect_equal(dim(padded), c(2L, 20L, 30L, 3L))
})

test_that("arithmetic on keras.Input() tensors builds a functional model", {
  skip_without_python()
  keras <- customgrad:::py_mod("keras")
  kt <- keras$Input(shape = list(3L))
  out <- kt + kt * 2 - 1
  expect_s3_class(out, "keras.src.backend.common.keras_tensor.KerasTensor")
  expect_equal(dim(out), c(NA, 3L))
  model <- keras$Model(kt, op_sum(out, axis = 2))
  expect_values(model(op_convert_to_tensor(array(c(1, 2), c(2, 3)))), c(6, 15), tolerance = 1e-5)
})

test_that("arithmetic on jax's symbolic dimensions stays symbolic", {
  skip_without_python()
  if (config_backend() != "jax") skip("jax's symbolic dimensions (DimExpr) exist on the jax backend only")
  export <- reticulate::import("jax.export")
  n <- export$symbolic_shape("n")[[1]]
  expect_s3_class(n - 1, "jax._src.export.shape_poly._DimExpr")
  expect_equal(reticulate::py_str(n - 1), "n - 1")
  expect_equal(reticulate::py_str(2 * n + 1), "2*n + 1")
})

test_that("axes and indices out of range are R errors in 1-based terms", {
  skip_without_python()
  x <- op_ones(c(2, 3))
  err <- expect_error(op_sum(x, axis = 5), class = "customgrad_error_axis")
  expect_match(conditionMessage(err), "between -2 and 2")
  expect_match(conditionMessage(err), "you supplied 5")
  expect_identical(deparse(conditionCall(err)), "op_sum(x, axis = 5)")
  expect_error(op_sum(x, axis = -3), class = "customgrad_error_axis")
  expect_error(op_expand_dims(x, axis = 5), class = "customgrad_error_axis")
  expect_equal(dim(op_expand_dims(x, axis = 3)), c(2L, 3L, 1L))
  err <- expect_error(op_take(c(1, 2), 0), class = "customgrad_error_index")
  expect_identical(deparse(conditionCall(err)), "op_take(c(1, 2), 0)")
  expect_error(op_take(c(1, 2), 1.5), class = "customgrad_error_index")
})
