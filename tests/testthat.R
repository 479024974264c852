# R CMD check entry point; the per-backend runs are driven by tests/integration/test_r_package.py.
library(testthat)
library(customgrad)
test_check("customgrad")
