# The R half of tests/integration/rpy2_worker.py, sourced into the R that rpy2 runs inside the
# worker's Python process (customgrad and keras3 already attached). The functions the worker
# calls answer in JSON; each case takes the inputs the Python half uses too (run_case()).

# keras3 defers some tensor methods, as.array() of a torch tensor among them, to reticulate load
# hooks that run when Python imports keras, jax, tensorflow or torch; here Python imported them
# before R started, and customgrad runs the hooks reticulate left pending when it attaches. What
# R sees of that: the modules imported with a load hook still pending (none), and a tensor of the
# backend, made in R, as an R array.
load_hooks_seen_from_r <- function() {
  x <- op_convert_to_tensor(array(c(1.5, -2, 3), dim = c(3, 1)), dtype = "float32")
  modules <- reticulate::py_eval("list(__import__('sys').modules)")
  pending <- Filter(function(m) length(getHook(paste("reticulate", m, "load", sep = "::"))),
                    modules)
  jsonlite::toJSON(list(pending = I(pending), tensor_class = class(x)[[1]],
                        as_array = as.array(x), dim = dim(as.array(x))),
                   auto_unbox = TRUE, digits = NA)
}

# The Python R's reticulate runs on: its process id, a token the worker set in its sys module,
# and the Keras backend.
python_seen_from_r <- function() {
  jsonlite::toJSON(list(pid = reticulate::import("os")$getpid(),
                        token = reticulate::import("sys")$customgrad_rpy2_token,
                        backend = config_backend()), auto_unbox = TRUE)
}

num <- function(x) as.numeric(as.array(x))
tensor <- function(x) op_convert_to_tensor(x, dtype = "float32")

log1pexp <- op_custom_gradient(function(x) {
  e <- op_exp(x)
  tuple(op_log(1 + e), function(upstream) upstream * (1 - 1 / (1 + e)))
})

# Two inputs, two outputs; the grad function (one upstream per output) is not autodiff's.
two_outputs <- op_custom_gradient(function(x, y) {
  tuple(list(x * y, x + y), function(dz1, dz2) list(dz1 * y + 2 * dz2, dz1 * x - dz2))
})

cases <- list(
  log1pexp = function(x) {
    x <- tensor(x)
    list(value = num(log1pexp(x)), grad = num(op_grad(function(x) op_sum(log1pexp(x)))(x)))
  },

  two_outputs = function(x, y) {
    x <- tensor(x)
    y <- tensor(y)
    loss <- function(x, y) {
      out <- two_outputs(x, y)
      op_sum(out[[1]]) + 3 * op_sum(out[[2]])
    }
    out <- two_outputs(x, y)
    g <- op_grad(loss, argnums = c(1, 2))(x, y)
    list(value = c(num(out[[1]]), num(out[[2]])), grad_x = num(g[[1]]), grad_y = num(g[[2]]))
  },

  reads_variable = function(x, w) {
    x <- tensor(x)
    w <- keras_variable(w, dtype = "float32", name = "w")
    seen <- character()
    f <- op_custom_gradient(function(x) {
      tuple(op_sum(x * w), function(dy, variables = NULL) {
        seen <<- vapply(variables, function(v) v$name, "")
        list(dy * w * 3, list(dy * x * 10))
      })
    })
    # the Python tests' helper, imported by R's reticulate from the same interpreter
    helpers <- reticulate::import("test_framework_variables")
    grad_w <- helpers$keras_variable_grads(function() f(x), list(w))[[1]]
    list(value = num(f(x)), grad_x = num(op_grad(f)(x)), grad_w = num(grad_w),
         variables = I(seen))
  },

  gradient_reversal = function(x, weights) {
    x <- tensor(x)
    weights <- tensor(weights)
    layer <- layer_gradient_reversal(scale = 0.5)
    list(value = num(layer(x)), grad = num(op_grad(function(x) op_sum(layer(x) * weights))(x)))
  }
)

run_case <- function(name, inputs_json) {
  inputs <- lapply(jsonlite::fromJSON(inputs_json), as.numeric)
  jsonlite::toJSON(do.call(cases[[name]], inputs), auto_unbox = TRUE, digits = NA)
}

# The crash that once made rpy2 unusable: R's garbage collector releasing Python objects.
gc_stress <- function(calls = 300L, gc_every = 50L) {
  grads <- numeric(calls)
  for (i in seq_len(calls)) {
    grads[[i]] <- num(op_grad(log1pexp)(100))
    if (i %% gc_every == 0L) gc(full = TRUE)
  }
  jsonlite::toJSON(list(calls = calls, full_gcs = calls %/% gc_every, ones = sum(grads == 1),
                        others = unique(grads[grads != 1])), auto_unbox = TRUE, digits = NA)
}

# The upstream-rule test file of the testthat suite, run here by testthat; one row per test.
upstream_rule <- function(test_file) {
  results <- testthat::test_file(test_file, reporter = testthat::ListReporter$new(),
                                 package = "customgrad", load_package = "installed")
  rows <- lapply(results, function(test) {
    bad <- Filter(function(e) !inherits(e, "expectation_success"), test$results)
    list(test = test$test, expectations = length(test$results),
         problems = I(vapply(bad, function(e) paste0(class(e)[[1]], ": ", conditionMessage(e)), "")))
  })
  jsonlite::toJSON(rows, auto_unbox = TRUE)
}
