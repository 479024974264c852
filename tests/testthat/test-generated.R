# The generated sources are current: regenerated into a temporary copy, they are what is
# committed. R CMD check runs the tests of the built package, which leaves tools/ out; the check
# of tests/integration/test_r_check.py names the source tree in CUSTOMGRAD_SOURCE.

source_root <- function() {
  Sys.getenv("CUSTOMGRAD_SOURCE", normalizePath(test_path("..", ".."), mustWork = FALSE))
}

test_that("the op wrappers are what tools/generate_ops.py generates from its table (no diff)", {
  skip_without_python()
  root <- source_root()
  script <- file.path(root, "tools", "generate_ops.py")
  generated <- c("R/ops-generated.R", "R/ops-generated-customgrad.R")
  skip_if_not(file.exists(script) && all(file.exists(file.path(root, generated))),
              "tools/generate_ops.py is not in this copy (built package); run from the source tree")
  out <- tempfile("generated-")
  status <- system2(customgrad:::find_python(), c(shQuote(script), "--out", shQuote(out)),
                    stdout = TRUE, stderr = TRUE)
  expect_null(attr(status, "status"), label = paste(status, collapse = "\n"))
  for (file in generated) {
    expect_identical(readLines(file.path(out, file)), readLines(file.path(root, file)),
                     label = file)
    expect_match(readLines(file.path(root, file), n = 1), "do not edit", label = file)
  }
})

test_that("NAMESPACE and man/ are what roxygen2 makes of the sources (no diff)", {
  skip_if_not_installed("roxygen2")
  root <- source_root()
  skip_if_not(dir.exists(file.path(root, "man")) && file.exists(file.path(root, "DESCRIPTION")),
              "not a source tree")
  copy <- file.path(tempfile("roxygen-"), "customgrad")
  dir.create(copy, recursive = TRUE)
  file.copy(file.path(root, c("DESCRIPTION", "NAMESPACE", "R", "man")), copy, recursive = TRUE)
  # in a fresh R process: roxygen2 loads the package's code, which must not meet this session's
  rscript <- file.path(R.home("bin"), "Rscript")
  code <- sprintf("roxygen2::roxygenise(%s, roclets = c('rd', 'namespace'))", deparse(copy))
  status <- system2(rscript, c("--vanilla", "-e", shQuote(code)), stdout = TRUE, stderr = TRUE)
  expect_null(attr(status, "status"), label = paste(status, collapse = "\n"))
  expect_identical(readLines(file.path(copy, "NAMESPACE")),
                   readLines(file.path(root, "NAMESPACE")), label = "NAMESPACE")
  made <- sort(list.files(file.path(copy, "man")))
  expect_identical(made, sort(list.files(file.path(root, "man"))), label = "the files in man/")
  for (rd in intersect(made, list.files(file.path(root, "man")))) {
    expect_identical(readLines(file.path(copy, "man", rd)), readLines(file.path(root, "man", rd)),
                     label = file.path("man", rd))
  }
})
