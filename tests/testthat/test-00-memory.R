# Issue 7 (R part): many eager forward+backward calls of an op_custom_gradient() function keep
# memory flat. The loop runs in two halves after a warm-up; the second half must add (almost)
# nothing: RSS (from /proc/self/statm) and R's own heap (gc() cells).
# This file runs first (its name sorts first): after any expect_snapshot() in the same R process,
# testthat's snapshot machinery itself adds ~20 R cells per later call, which reads as a leak.

rss_mib <- function() {
  pages <- as.numeric(strsplit(readLines("/proc/self/statm"), " ")[[1]][[2]])
  pages * 4096 / 2^20
}

r_cells <- function() {
  m <- gc(full = TRUE)
  sum(m[, 1])  # Ncells + Vcells in use
}

test_that("10,000 eager custom-gradient calls keep memory flat", {
  b <- backend()
  if (!file.exists("/proc/self/statm")) skip("no /proc/self/statm on this system (not Linux)")
  f <- op_custom_gradient(function(x) {
    e <- op_exp(x)
    tuple(op_log1p(e), function(dy) dy * (1 - 1 / (1 + e)))
  })
  g <- op_grad(function(x) op_sum(f(x)))
  x <- op_convert_to_tensor(c(-1, 0, 1, 2))
  expected <- 1 / (1 + exp(-c(-1, 0, 1, 2)))

  # warm-up, and a measurement of the per-call time to keep the test within about a minute
  t0 <- proc.time()[["elapsed"]]
  for (i in 1:200) g(x)
  per_call <- (proc.time()[["elapsed"]] - t0) / 200
  n <- 10000L
  if (per_call * n > 60) {
    n <- max(2000L, as.integer(floor(60 / per_call / 2) * 2))
    message(sprintf("[memory, %s] %d calls instead of 10000: %.2f ms per call would take %.0f s",
                    b, n, 1000 * per_call, per_call * 10000))
  }
  half <- n %/% 2L

  for (i in seq_len(half)) g(x)
  rss_mid <- rss_mib(); cells_mid <- r_cells()
  for (i in seq_len(half)) res <- g(x)
  rss_end <- rss_mib(); cells_end <- r_cells()

  message(sprintf("[memory, %s] %d calls: RSS %.1f MiB -> %.1f MiB over the second %d; R cells %+.0f",
                  b, n, rss_mid, rss_end, half, cells_end - cells_mid))
  expect_equal(num(res), expected, tolerance = 1e-6)
  # Bound: 16 MiB over the second half (>= 1000 calls) is < 16 KiB per call. Anything kept per
  # call (a backward graph, a Python frame with the closure, the R closure environment and its
  # tensors) costs more than that, so a per-call leak fails; allocator noise (a few MiB) passes.
  expect_lt(rss_end - rss_mid, 16)
  # R's heap: a retained R closure environment with its bindings is >= 20 cells, so fewer than
  # 10 cells per call on average rules out keeping one per call (reticulate's own caches and
  # gc() bookkeeping vary by a few thousand cells between runs: measured +13,100 over 3,139
  # calls on jax under load, -20,000 in quiet runs).
  expect_lt(cells_end - cells_mid, 10 * half)
})
