# R CMD check entry point; the per-backend runs are driven by tests/integration/test_r_package.py.
# The tests that need Python skip unless the user opted in (NOT_CRAN=true or RETICULATE_PYTHON;
# skip_without_python() in helper-customgrad.R): on CRAN only the tests of plain R code run.
library(testthat)
library(customgrad)
test_check("customgrad")
