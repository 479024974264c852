# Loading customgrad starts no Python, sets no environment variable and declares its Python
# package to reticulate (py_require()), as keras3 does for keras.

test_that("loading customgrad neither starts Python nor sets RETICULATE_PYTHON", {
  out <- run_r(c(
    "Sys.unsetenv('RETICULATE_PYTHON')",
    "suppressPackageStartupMessages(library(customgrad))",
    "cat('started:', reticulate::py_available(initialize = FALSE), '\\n')",
    "cat('set:', nzchar(Sys.getenv('RETICULATE_PYTHON')), '\\n')",
    "req <- reticulate::py_require()$packages",
    "cat('declared:', any(grepl('customgrad @ file://', req, fixed = TRUE)), '\\n')"
  ))
  text <- paste(out, collapse = "\n")
  expect_match(text, "started: FALSE", fixed = TRUE)
  expect_match(text, "set: FALSE", fixed = TRUE)
  expect_match(text, "declared: TRUE", fixed = TRUE)
})

test_that("config_backend() (keras3's) names the backend chosen by KERAS_BACKEND", {
  b <- backend()
  expected <- Sys.getenv("KERAS_BACKEND")
  if (nzchar(expected)) expect_identical(b, expected) else expect_true(b %in% c("jax", "tensorflow", "torch"))
  expect_identical(config_floatx(), "float32")
})
