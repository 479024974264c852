# The R layer of customgrad, timed side by side in one run (one backend per process):
#   KERAS_BACKEND=torch R_LIBS=.Rlib RETICULATE_PYTHON=.venv/bin/python Rscript bench/r_bench.R
# Prints a markdown table to stdout:
# * customgrad's op_custom_gradient() against keras3's, the same keras3 ops and the same grad
#   spelling, eager forward + backward on a tiny input (target <= 1.10x), where keras3's works;
# * the same R step against the same function written in Python (customgrad.custom_gradient);
# * under jax.jit / tf.function the R forward and grad closures run only while tracing.
suppressPackageStartupMessages({library(keras3); library(customgrad)})
backend <- config_backend()
reps <- as.integer(Sys.getenv("R_BENCH_REPS", "600"))
`%||%` <- function(x, y) if (is.null(x)) y else x

# keras3's documented, backend-agnostic log1pexp, given to either decorator
log1pexp_forward <- function(calls = NULL) function(x) {
  if (!is.null(calls)) calls$fwd <- calls$fwd + 1L
  e <- op_exp(x)
  grad <- function(..., upstream = NULL) {
    if (!is.null(calls)) calls$grad <- calls$grad + 1L
    upstream <- upstream %||% ..1
    op_multiply(upstream, 1 - 1 / op_add(1, e))
  }
  tuple(op_log(1 + e), grad)
}
ours <- customgrad::op_custom_gradient(log1pexp_forward())
theirs <- keras3::op_custom_gradient(log1pexp_forward())
ours_grad <- op_grad(function(x) op_sum(ours(x)))
theirs_grad <- op_grad(function(x) op_sum(theirs(x)))

py <- reticulate::py_run_string("
import customgrad
from keras import ops
@customgrad.custom_gradient
def py_log1pexp(x):
    e = ops.exp(x)
    def grad(upstream):
        return upstream * (1.0 - 1.0 / (1.0 + e))
    return ops.log(1.0 + e), grad
py_grad = customgrad.grad(lambda x: ops.sum(py_log1pexp(x)))
", local = FALSE, convert = FALSE)
py_grad <- py$py_grad

x <- op_convert_to_tensor(seq(-2, 2, length.out = 8), dtype = "float32")
expected <- 1 / (1 + exp(-seq(-2, 2, length.out = 8)))
same <- function(g) isTRUE(all.equal(as.numeric(as.array(g)), expected, tolerance = 1e-5))
stopifnot(same(ours_grad(x)), same(py_grad(x)))
keras3_works <- tryCatch(same(theirs_grad(x)), error = function(e) FALSE)

timed <- list(customgrad = function() ours_grad(x), python = function() py_grad(x))
if (keras3_works) timed$keras3 <- function() theirs_grad(x)

# Rounds of `batch` calls of each, interleaved, timed with Sys.time(); ratios are taken within
# each round, then their median reported with the min-max.
for (f in timed) for (i in 1:50) f()
batch <- 20L
rounds <- max(15L, reps %/% batch)
secs <- matrix(0, rounds, length(timed), dimnames = list(NULL, names(timed)))
for (i in seq_len(rounds)) {
  for (k in names(timed)) {
    f <- timed[[k]]
    t0 <- Sys.time()
    for (j in seq_len(batch)) f()
    secs[i, k] <- as.numeric(Sys.time() - t0, units = "secs") / batch
  }
}
ms <- function(v) sprintf("%.3f (%.3f-%.3f)", 1000 * median(v), 1000 * min(v), 1000 * max(v))
paired <- function(a, b) {
  q <- secs[, a] / secs[, b]
  sprintf("%.2fx (%.2f-%.2f)", median(q), min(q), max(q))
}

cat(sprintf("\n### R package, backend %s\n\n", backend))
cat("| measure | value |\n|---|---|\n")
cat(sprintf("| customgrad's op_custom_gradient(), eager forward+backward, ms/call median (min-max of %d rounds of %d calls) | %s |\n",
            rounds, batch, ms(secs[, "customgrad"])))
if (keras3_works) {
  cat(sprintf("| keras3's op_custom_gradient(), same ops and grad spelling, same | %s |\n",
              ms(secs[, "keras3"])))
  ratio <- median(secs[, "customgrad"] / secs[, "keras3"])
  cat(sprintf("| ratio customgrad / keras3 (median of per-round ratios, min-max) | %s |\n",
              paired("customgrad", "keras3")))
  cat(sprintf("| target: customgrad <= 1.10x keras3 | %s |\n",
              if (ratio <= 1.10) "MET" else sprintf("MISSED (%.2fx)", ratio)))
} else {
  cat("| keras3's op_custom_gradient() | fails or gives a wrong gradient on this backend: no ratio |\n")
}
cat(sprintf("| the same function in Python (customgrad.custom_gradient), same | %s |\n",
            ms(secs[, "python"])))
cat(sprintf("| ratio R / Python | %s |\n", paired("customgrad", "python")))

if (backend %in% c("jax", "tensorflow")) {
  calls <- new.env(); calls$fwd <- 0L; calls$grad <- 0L
  counted <- customgrad::op_custom_gradient(log1pexp_forward(calls))
  if (backend == "jax") {
    jax <- reticulate::import("jax")
    compiled <- jax$jit(jax$grad(reticulate::py_func(function(x) op_sum(counted(x)))))
    label <- "jax.jit(jax.grad)"
  } else {
    tf <- reticulate::import("tensorflow")
    compiled <- tf$`function`(function(x) {
      tape <- tf$GradientTape(); tape$`__enter__`(); tape$watch(x)
      y <- op_sum(counted(x)); tape$`__exit__`(NULL, NULL, NULL)
      tape$gradient(y, x)
    })
    label <- "tf.function(GradientTape)"
  }
  for (i in 1:5) out <- compiled(x)
  stopifnot(same(out))
  cat(sprintf("| %s, 5 calls: R forward ran | %d time(s) (1 = trace only) |\n", label, calls$fwd))
  cat(sprintf("| %s, 5 calls: R grad ran | %d time(s) (1 = trace only) |\n", label, calls$grad))
}
