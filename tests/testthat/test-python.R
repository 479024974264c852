test_that("loading the package does not start Python, but points reticulate at the project's Python", {
  skip_without_python()
  rscript <- file.path(R.home("bin"), "Rscript")
  code <- paste(
    "suppressPackageStartupMessages(library(customgrad))",
    "started <- reticulate::py_available(initialize = FALSE)",
    "keras <- reticulate::import('keras')",
    "cat('started-at-load:', started, '\\n')",
    "cat('python:', reticulate::py_config()$python, '\\n')",
    sep = "; "
  )
  out <- system2(rscript, c("-e", shQuote(code)), stdout = TRUE, stderr = TRUE,
                 env = paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)))
  expect_true(any(grepl("started-at-load: FALSE", out, fixed = TRUE)), label = paste(out, collapse = "\n"))
  expect_true(any(grepl(customgrad:::find_python(), out, fixed = TRUE)), label = paste(out, collapse = "\n"))
})

test_that("config_backend() names the backend chosen by KERAS_BACKEND", {
  b <- backend()
  expected <- Sys.getenv("KERAS_BACKEND")
  if (nzchar(expected)) expect_identical(b, expected) else expect_true(b %in% c("jax", "tensorflow", "torch"))
  expect_identical(config_floatx(), "float32")
})
