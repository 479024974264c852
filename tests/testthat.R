# R CMD check entry point; the per-backend runs are driven by tests/integration/test_r_package.py.
# The tests that need Python skip unless the user opted in (NOT_CRAN=true or RETICULATE_PYTHON;
# skip_without_python() in helper-customgrad.R): on CRAN only the tests of plain R code run.
# With CUSTOMGRAD_TESTTHAT_JUNIT naming a file, testthat's JUnit XML is written there as well:
# tests/integration/test_r_check.py's run under R CMD check is one backend's testthat run.
library(testthat)
library(customgrad)
junit <- Sys.getenv("CUSTOMGRAD_TESTTHAT_JUNIT")
if (nzchar(junit)) {
  test_check("customgrad", reporter = MultiReporter$new(list(
    CheckReporter$new(), JunitReporter$new(file = junit))))
} else {
  test_check("customgrad")
}
