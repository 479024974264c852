# Error messages in R terms, pinned by snapshots (tests/testthat/_snaps/errors.md). The messages
# snapshotted here are the same on every backend; numbers that depend on floating point are masked.

mask_numbers <- function(lines) gsub("[0-9]+\\.[0-9]+(e-?[0-9]+)?", "<num>", lines)
mask_machine <- function(lines) {
  lines <- sub("'[^']*python[^']*' has the backends? .*$", "<the Python> has <its backends>.", lines)
  mask_numbers(lines)
}

test_that("argument errors name the function, what it expected and what it received", {
  skip_without_python()
  expect_snapshot(error = TRUE, {
    op_custom_gradient(3)
    op_grad("not a function")
    op_grad(function(x) x, argnums = 0)
    op_check_gradients(function(x) x, 1, order = 3)
  })
})

test_that("errors report the function the user called as their call", {
  skip_without_python()
  call_of <- function(expr) rlang::call_name(tryCatch(expr, customgrad_error = identity)$call)
  expect_identical(call_of(op_grad("not a function")), "op_grad")
  expect_identical(call_of(op_grad(function(x) x, argnums = 0)), "op_grad")
  expect_identical(call_of(op_safe_norm(c(1, 2), axis = 0)), "op_safe_norm")
  expect_identical(call_of(layer_scale_gradient(scale = "big")), "layer_scale_gradient")
  # the functions customgrad returns report the call that made them
  expect_identical(call_of(op_grad(function(x) x * 2)(c(1, 2))), "op_grad")
})

test_that("errors have the classes ?customgrad_errors documents", {
  skip_without_python()
  expect_error(op_custom_gradient(3), class = "customgrad_error_type")
  expect_error(op_grad(function(x) x, argnums = 0), class = "customgrad_error_argnums")
  expect_error(op_check_gradients(function(x) x, 1, order = 3), class = "customgrad_error_argument")
  expect_error(customgrad:::python_missing_error(), class = "customgrad_error_python_missing")
  documented <- tools::Rd_db("customgrad")[["customgrad_errors.Rd"]]
  text <- paste(as.character(documented), collapse = "")
  for (cls in c("type", "argument", "argnums", "axis", "custom_gradient", "grad_fn_arity",
                "grad_fn_result", "gradient_check", "callback", "install", "python",
                "python_missing")) {
    expect_match(text, paste0("\\code{customgrad_error_", cls, "}"), fixed = TRUE,
                 label = paste("?customgrad_errors documents", cls))
  }
})

test_that("the no-Python error points to install_customgrad()", {
  mask_python <- function(lines) gsub("'[^']*'", "'<python>'", lines)
  expect_snapshot(error = TRUE, customgrad:::python_missing_error(call = NULL),
                  transform = mask_python)
})

test_that("custom-gradient contract errors name the user's function", {
  skip_without_python()
  bare <- op_custom_gradient(function(x) x * 2)
  no_grad <- op_custom_gradient(function(x) tuple(x, 42))
  two_for_one <- op_custom_gradient(function(x) tuple(x * 2, function(dy1, dy2) dy1))
  expect_snapshot(error = TRUE, {
    bare(1)
    no_grad(1)
  })
  err <- expect_error(op_grad(two_for_one)(1), class = "customgrad_error_grad_fn_arity")
  expect_match(conditionMessage(err), "function(dy1, dy2)", fixed = TRUE)
})

test_that("Python's errors reach R in R terms: op_ names, lists, 1-based leaves", {
  skip_without_python()
  extra <- op_custom_gradient(function(x) tuple(x, function(dy) list(dy, dy)))
  res <- op_vjp(function(x) list(x * 3, x), c(1, 2))
  wrong <- op_custom_gradient(function(x, y) tuple(x^3 * y, function(dy) list(dy * 2 * x^2, dy * x^3)))
  # The Python core's own words (e.g. how it names the backend's array type) are not pinned
  # here: they belong to the Python package. What R adds is checked: R names, lists, 1-based.
  err <- expect_error(op_grad(function(x) x * 2)(c(1, 2)), class = "customgrad_error_python")
  # customgrad's own check, not a failure of Keras or the backend: its message is the first line
  expect_match(conditionMessage(err), "^op_grad\\(\\): `f` must return")
  expect_no_match(conditionMessage(err), "failed in Python", fixed = TRUE)
  expect_match(err$python_message, "customgrad.grad", fixed = TRUE)
  err <- expect_error(op_grad(function(x) op_sum(extra(x)))(1),
                      class = "customgrad_error_grad_fn_result")
  expect_s3_class(err, "customgrad_error_custom_gradient")
  expect_match(conditionMessage(err), "The grad function of `f()`", fixed = TRUE)
  expect_no_match(conditionMessage(err), "grad_fn|f\\.grad")
  expect_snapshot(error = TRUE, transform = mask_numbers, {
    op_check_gradients(wrong, c(0.5, 1.5), c(2, 3))
  })
  err <- expect_error(op_check_gradients(wrong, c(0.5, 1.5), c(2, 3)),
                      class = "customgrad_error_gradient_check")
  expect_match(conditionMessage(err), "args[[1]]", fixed = TRUE)
  expect_no_match(conditionMessage(err), "args[0]", fixed = TRUE)
  expect_true(all(startsWith(err$report$checks$where, "args[[")))
  err <- expect_error(res[[2]](list(1, 2, 3)), class = "customgrad_error_python")
  msg <- conditionMessage(err)
  expect_no_match(msg, "customgrad.vjp|tuple|python_function")
  expect_match(err$python_message, "customgrad.vjp", fixed = TRUE)
})

test_that("an R error inside a grad function keeps its message and the original condition", {
  skip_without_python()
  failing <- op_custom_gradient(function(x) tuple(x, function(dy) stop("boom in grad")))
  expect_snapshot(error = TRUE, op_grad(failing)(1))
  err <- expect_error(op_grad(failing)(1), class = "customgrad_error_callback")
  expect_identical(conditionMessage(err$r_error), "boom in grad")
})

test_that("a grad function that does not fit: the first line says so, in R's words", {
  skip_without_python()
  two_for_one <- op_custom_gradient(function(x) tuple(x * 2, function(dy1, dy2) dy1))
  extra <- op_custom_gradient(function(x) tuple(x, function(dy) list(dy, dy)))
  short <- op_custom_gradient(function(x) tuple(op_sum(x), function(dy) op_ones(c(3))))
  # the shapes and dtypes in these messages are the same on every backend; how the Python core
  # names the backend's array type ("a torch tensor", "a jax array") is not pinned here
  same_words <- function(lines) {
    gsub("an? (numpy array|jax array|tensorflow tensor|torch tensor|keras tensor) of shape",
         "a tensor of shape", lines)
  }
  expect_snapshot(error = TRUE, transform = same_words, {
    op_grad(two_for_one)(1)
    op_grad(function(x) op_sum(extra(x)))(1)
    op_grad(short)(c(1, 2))
  })
  err <- expect_error(op_grad(two_for_one)(1), class = "customgrad_error_grad_fn_arity")
  msg <- conditionMessage(err)
  expect_no_match(msg, "failed in Python|\\*args|keyword|grad_fn|positional parameter")
  expect_match(msg, "`...`, or only `upstream =`.", fixed = TRUE)
  # Python's own words stay in the condition
  expect_match(err$python_message, "*args, or only the keyword `upstream`", fixed = TRUE)
  # gradients that do not fit: a class of their own, told by the Python exception's class
  fits <- "returned gradients that do not fit the arguments of"
  err <- expect_error(op_grad(short)(c(1, 2)), class = "customgrad_error_grad_fn_result")
  expect_s3_class(err, "customgrad_error_custom_gradient")
  expect_match(conditionMessage(err), paste("^The grad function of `f\\(\\)`", fits, "`f\\(\\)`"))
  err <- expect_error(op_grad(function(x) op_sum(extra(x)))(1),
                      class = "customgrad_error_grad_fn_result")
  expect_match(conditionMessage(err), "must return one gradient per positional argument",
               fixed = TRUE)
  # the headline names the user's function, which Python passes along with the error
  widen <- function(x) tuple(op_sum(x), function(dy) op_ones(c(3)))
  widen <- op_custom_gradient(widen)
  err <- expect_error(op_grad(widen)(c(1, 2)), class = "customgrad_error_grad_fn_result")
  expect_match(conditionMessage(err), paste("^The grad function of `widen\\(\\)`", fits,
                                            "`widen\\(\\)`"))
  not_a_number <- op_custom_gradient(function(x) tuple(op_sum(x), function(dy) "oops"))
  err <- expect_error(op_grad(not_a_number)(c(1, 2)), class = "customgrad_error_grad_fn_result")
  expect_match(conditionMessage(err), "as the gradient for args[[1]]", fixed = TRUE)
})

test_that("the headline of a Python error follows its class, not its words", {
  result <- c("grad_fn_result", "custom_gradient")
  raw <- "customgrad.GradFnResultError: customgrad.custom_gradient: reworded: no verb here"
  lines <- customgrad:::py_error_lines(raw, "op_grad", result, user_fn = "mine")
  expect_identical(unname(lines[[1]]), paste(
    "The grad function of {.fn mine} returned gradients that do not fit the arguments of",
    "{.fn mine}."
  ))
  expect_identical(unname(lines[[2]]), "Reworded: no verb here")
  # without the name (Python did not know it), the name op_custom_gradient() gives a function
  lines <- customgrad:::py_error_lines(raw, "op_grad", result)
  expect_match(lines[[1]], "^The grad function of \\{.fn f\\}")
  # words that once chose the headline do not, without the class
  raw <- paste("customgrad.CustomGradientError: customgrad.custom_gradient: grad_fn `f.grad`",
               "of `f` returned x")
  lines <- customgrad:::py_error_lines(raw, "op_grad", "custom_gradient")
  expect_identical(unname(lines[[1]]),
                   "A function given to {.fn op_custom_gradient} broke its contract.")
})

test_that("only errors of Keras or the backend say \"failed in Python\"", {
  lines <- customgrad:::py_error_lines(
    "ValueError: Incompatible shapes for broadcasting: (2,) and (3,)", "op_grad")
  expect_identical(unname(lines[[1]]), "{.fn op_grad} failed in Python.")
  expect_identical(unname(lines[[2]]), "Incompatible shapes for broadcasting: (2,) and (3,)")
  lines <- customgrad:::py_error_lines(
    "TypeError: customgrad.vjp: the cotangents must have the structure of the outputs", "op_vjp")
  expect_identical(lines, "op_vjp(): the cotangents must have the structure of the outputs")
  # keyword and *args in R's words; braces stay text for cli
  expect_identical(
    customgrad:::r_terms("grad_fn may take *args, upstream= or variables=None {x}"),
    "The grad function may take `...`, `upstream =` or `variables = NULL` {x}")
  expect_identical(customgrad:::cli_escape("a {b}"), "a {{b}}")
})

test_that("the backtrace of a grad function's mistake ends at the user's call", {
  skip_without_python()
  # as a script run with Rscript shows it: the error ends the script (status 1)
  out <- suppressWarnings(run_r(c(
    "suppressPackageStartupMessages(library(customgrad))",
    "options(cli.unicode = FALSE, cli.num_colors = 1, width = 80)",
    "two_for_one <- op_custom_gradient(function(x) tuple(x * 2, function(dy1, dy2) dy1))",
    "op_grad(two_for_one)(1)"
  ), env = paste0("KERAS_BACKEND=", config_backend())))
  text <- paste(out, collapse = "\n")
  expect_match(text, "Error in `op_grad()`:\n! The grad function of `f()` cannot take", fixed = TRUE)
  # the whole trace: one frame, the user's call; none of customgrad's or reticulate's plumbing
  trace <- out[(grep("^Backtrace:", out) + 2):length(out)]
  expect_identical(trimws(trace), c("1. \\-op_grad(two_for_one)(1)", "Execution halted"))
  # from the error to the end (the backend may log lines of its own before it)
  expect_lte(length(out) - grep("^Error in", out)[[1]] + 1L, 12L)
})

test_that("every kind of customgrad error ends at the user's call under Rscript", {
  skip_without_python()
  # Each script ends with one error, as a user's script run with Rscript would; its backtrace
  # must be one frame, the user's call: none of customgrad's (cg_abort), cli's, rlang's or
  # reticulate's plumbing, and no "Calls:" line of R's listing py_call_impl.
  fake_torch <- tempfile("fake-torch")
  dir.create(file.path(fake_torch, "torch"), recursive = TRUE)
  on.exit(unlink(fake_torch, recursive = TRUE), add = TRUE)
  writeLines("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')",
             file.path(fake_torch, "torch", "__init__.py"))
  cases <- list(
    "forward function" = list(
      "f <- op_custom_gradient(function(x) x * 2)", "f(1)", "`f()`", character()),
    "gradient check" = list(
      "h <- op_custom_gradient(function(x) tuple(sin(x), function(dy) dy * 3))",
      "op_check_gradients(h, c(1, 2))", "`op_check_gradients()`", character()),
    "argument" = list("NULL", "op_check_gradients(function(x) x, 1, order = 3)",
                      "`op_check_gradients()`", character()),
    "missing backend" = list(
      "NULL", "op_grad(function(x) x)", "`op_grad()`",
      c("KERAS_BACKEND=torch", paste0("PYTHONPATH=", fake_torch)))
  )
  for (name in names(cases)) {
    case <- cases[[name]]
    env <- if (length(case[[4]])) case[[4]] else paste0("KERAS_BACKEND=", config_backend())
    out <- suppressWarnings(run_r(c(
      "suppressPackageStartupMessages(library(customgrad))",
      "options(cli.unicode = FALSE, cli.num_colors = 1, width = 200)",
      case[[1]], case[[2]]
    ), env = env))
    expect_true(any(grepl(paste0("Error in ", case[[3]]), out, fixed = TRUE)),
                label = paste(name, ":", paste(out, collapse = "\n")))
    expect_false(any(grepl("^Calls:", out)), label = paste(name, ": a Calls: line"))
    at <- grep("^Backtrace:", out)
    expect_length(at, 1L)
    trace <- trimws(out[(at[[1]] + 2):length(out)])
    # rlang names the function's package: `customgrad::op_check_gradients()`, `customgrad
    # (local) f()` for the function op_custom_gradient() made
    frame <- sub("^1\\. \\\\-customgrad(::| \\(local\\) )", "1. \\\\-", trace[[1]])
    expect_identical(c(frame, trace[-1]), c(paste0("1. \\-", case[[2]]), "Execution halted"),
                     label = paste(name, ":", paste(out, collapse = "\n")))
    # and what the user reads, from the error line to the end, pinned per error class (the
    # backend may log lines of its own before the error); the Python's path and its backends
    # are the machine's (a wide console keeps the path from moving line breaks)
    expect_snapshot(writeLines(c(paste("#", name), out[grep("^Error in", out)[[1]]:length(out)])),
                    transform = mask_machine)
  }
})

test_that("shapes in messages read as keras3 prints them", {
  expect_identical(
    customgrad:::r_terms("a gradient of shape (3,) for args[0], which has shape (2, 4); shape ()"),
    "a gradient of shape(3) for args[[1]], which has shape(2, 4); shape()")
})

test_that("the note on a shortened Python traceback stays out of R's messages", {
  raw <- paste("customgrad.GradFnResultError: customgrad.custom_gradient: bad\n(customgrad",
               "removed its own frames from this traceback; CUSTOMGRAD_TRACEBACK_FILTERING=off",
               "keeps them)")
  e <- structure(class = c("python.builtin.Exception", "error", "condition"),
                 list(message = raw, call = NULL))
  expect_identical(customgrad:::python_message(e),
                   "customgrad.GradFnResultError: customgrad.custom_gradient: bad")
})
