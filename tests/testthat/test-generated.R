test_that("R/ops-generated.R is what tools/generate_ops.py generates (no diff)", {
  skip_without_python()
  # R CMD check runs the tests of the built package, which leaves tools/ out; the check of
  # tests/integration/test_r_check.py names the source tree in CUSTOMGRAD_SOURCE
  root <- Sys.getenv("CUSTOMGRAD_SOURCE", normalizePath(test_path("..", ".."), mustWork = FALSE))
  script <- file.path(root, "tools", "generate_ops.py")
  committed <- file.path(root, "R", "ops-generated.R")
  skip_if_not(file.exists(script) && file.exists(committed),
              "tools/generate_ops.py is not in this copy (built package); run from the source tree")
  out <- tempfile(fileext = ".R")
  status <- system2(customgrad:::find_python(), c(shQuote(script), shQuote(out)),
                    stdout = TRUE, stderr = TRUE)
  expect_null(attr(status, "status"))
  expect_identical(readLines(out), readLines(committed))
  expect_match(readLines(committed, n = 1), "do not edit")
})
