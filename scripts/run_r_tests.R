# Runs the R package's testthat suite on the backend named by KERAS_BACKEND, writing testthat's
# JUnit XML to the file named by the first argument (read by tests/integration/test_r_package.py
# and summed into the closing line by scripts/summarize_junit.py).
#   KERAS_BACKEND=torch NOT_CRAN=true R_LIBS=.Rlib Rscript scripts/run_r_tests.R r-torch.xml
out <- commandArgs(trailingOnly = TRUE)[[1]]
suppressPackageStartupMessages({library(testthat); library(customgrad)})
t0 <- Sys.time()
reporter <- MultiReporter$new(list(SummaryReporter$new(), JunitReporter$new(file = out)))
res <- test_dir("tests/testthat", package = "customgrad", load_package = "installed",
                reporter = reporter, stop_on_failure = FALSE, stop_on_warning = FALSE)
cat(sprintf("\n[R tests, %s] %d tests in %.1f s\n", config_backend(), length(res),
            as.numeric(difftime(Sys.time(), t0, units = "secs"))))
