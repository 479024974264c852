# R eager overhead and trace-only proof for the customgrad R package (issue 6, R part).
# Run one backend per process:  KERAS_BACKEND=torch R_LIBS=.Rlib Rscript bench/r_bench.R
# Prints a markdown table to stdout.
suppressPackageStartupMessages(library(customgrad))
backend <- config_backend()
reps <- as.integer(Sys.getenv("R_BENCH_REPS", "300"))

calls <- new.env(); calls$fwd <- 0L; calls$grad <- 0L
r_log1pexp <- op_custom_gradient(function(x) {
  calls$fwd <- calls$fwd + 1L
  e <- op_exp(x)
  tuple(op_log1p(e), function(dy) {
    calls$grad <- calls$grad + 1L
    dy * (1 - 1 / (1 + e))
  })
})
r_grad <- op_grad(function(x) op_sum(r_log1pexp(x)))

py <- reticulate::py_run_string("
import customgrad, keras
from keras import ops
@customgrad.custom_gradient
def py_log1pexp(x):
    e = ops.exp(x)
    def grad(upstream):
        return upstream * (1.0 - 1.0 / (1.0 + e))
    return ops.log1p(e), grad
py_grad = customgrad.grad(lambda x: ops.sum(py_log1pexp(x)))
", local = FALSE, convert = FALSE)
py_grad <- py$py_grad
x <- op_convert_to_tensor(seq(-2, 2, length.out = 8))
stopifnot(isTRUE(all.equal(as.numeric(as.array(r_grad(x))),
                           as.numeric(as.array(py_grad(x))), tolerance = 1e-6)))

for (i in 1:50) { r_grad(x); py_grad(x) }
# proc.time() resolution is 1 ms; use batches of 20 calls for the medians instead
batch <- 20L
nb <- max(10L, reps %/% batch)  # batches interleaved R / Python
br <- bp <- numeric(nb)
for (i in seq_len(nb)) {
  t0 <- proc.time()[["elapsed"]]; for (j in seq_len(batch)) r_grad(x); br[i] <- (proc.time()[["elapsed"]] - t0) / batch
  t0 <- proc.time()[["elapsed"]]; for (j in seq_len(batch)) py_grad(x); bp[i] <- (proc.time()[["elapsed"]] - t0) / batch
}
ms <- function(v) sprintf("%.3f (%.3f-%.3f)", 1000 * median(v), 1000 * min(v), 1000 * max(v))
ratio <- median(br) / median(bp)

# The floor of any R closure through reticulate: every tensor operation written in R is one
# R -> Python call that returns a new tensor object, and every R function Python calls is one
# Python -> R callback. One R step above makes 8 such op calls (op_exp, op_log1p, op_sum and the
# four operations of dy * (1 - 1 / (1 + e)), plus op_grad's own call) and 3 callbacks (the R loss,
# the R forward, the R grad function).
py_exp <- reticulate::import("keras.ops", convert = FALSE)$exp  # no customgrad code in between
py_callback <- reticulate::py_eval("lambda f, x: f(x)", convert = FALSE)
r_identity <- function(v) v
bo <- bc <- numeric(nb)
for (i in seq_len(nb)) {
  t0 <- proc.time()[["elapsed"]]; for (j in seq_len(batch)) py_exp(x)
  bo[i] <- (proc.time()[["elapsed"]] - t0) / batch
  t0 <- proc.time()[["elapsed"]]; for (j in seq_len(batch)) reticulate::py_call(py_callback, r_identity, x)
  bc[i] <- (proc.time()[["elapsed"]] - t0) / batch
}
floor_ms <- 8 * median(bo) + 3 * median(bc)

cat(sprintf("\n### R package, backend %s\n\n", backend))
cat("| measure | value |\n|---|---|\n")
cat(sprintf("| R grad closure, eager forward+backward, ms/call median (min-max of %d batches of %d) | %s |\n", nb, batch, ms(br)))
cat(sprintf("| Python grad closure (customgrad.custom_gradient), same | %s |\n", ms(bp)))
cat(sprintf("| ratio R / Python | %.2fx |\n", ratio))
cat(sprintf("| one keras op called from R through reticulate (`keras.ops.exp`, no customgrad code), ms | %s |\n", ms(bo)))
cat(sprintf("| one Python -> R callback (`(lambda f, x: f(x))(r_identity, x)`), ms | %s |\n", ms(bc)))
cat(sprintf("| floor of this R step: 8 op calls + 3 callbacks = %.3f ms, as a ratio to Python | %.2fx |\n",
            1000 * floor_ms, floor_ms / median(bp)))
if (backend == "torch") {
  cat(sprintf("| target: R eager <= 3x Python eager on torch | %s |\n", if (ratio <= 3) "MET" else "MISSED"))
}

if (backend %in% c("jax", "tensorflow")) {
  calls$fwd <- 0L; calls$grad <- 0L
  if (backend == "jax") {
    jax <- reticulate::import("jax")
    compiled <- jax$jit(jax$grad(reticulate::py_func(function(x) op_sum(r_log1pexp(x)))))
    label <- "jax.jit(jax.grad)"
  } else {
    tf <- reticulate::import("tensorflow")
    compiled <- tf$`function`(function(x) {
      tape <- tf$GradientTape(); tape$`__enter__`(); tape$watch(x)
      y <- op_sum(r_log1pexp(x)); tape$`__exit__`(NULL, NULL, NULL)
      tape$gradient(y, x)
    })
    label <- "tf.function(GradientTape)"
  }
  for (i in 1:5) out <- compiled(x)
  stopifnot(isTRUE(all.equal(as.numeric(as.array(out)), 1 / (1 + exp(-seq(-2, 2, length.out = 8))),
                             tolerance = 1e-5)))
  cat(sprintf("| %s, 5 calls: R forward ran | %d time(s) (1 = trace only) |\n", label, calls$fwd))
  cat(sprintf("| %s, 5 calls: R grad ran | %d time(s) (1 = trace only) |\n", label, calls$grad))
}
