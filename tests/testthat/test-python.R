# Loading customgrad starts no Python, sets no environment variable and declares its Python
# package to reticulate (py_require()), as keras3 does for keras.

test_that("loading customgrad neither starts Python nor sets RETICULATE_PYTHON", {
  out <- run_r(c(
    "Sys.unsetenv('RETICULATE_PYTHON')",
    "suppressPackageStartupMessages(library(customgrad))",
    "cat('started:', reticulate::py_available(initialize = FALSE), '\\n')",
    "cat('set:', nzchar(Sys.getenv('RETICULATE_PYTHON')), '\\n')",
    "req <- reticulate::py_require()$packages",
    "cat('declared:', any(grepl('customgrad @ file://', req, fixed = TRUE)), '\\n')",
    "hooks <- getHook('reticulate.onPyInit')",
    "cat('on init:', any(vapply(hooks, identical, NA, customgrad:::run_pending_load_hooks)), '\\n')"
  ))
  text <- paste(out, collapse = "\n")
  expect_match(text, "started: FALSE", fixed = TRUE)
  expect_match(text, "set: FALSE", fixed = TRUE)
  expect_match(text, "declared: TRUE", fixed = TRUE)
  # for a Python that starts before R (rpy2): the hooks reticulate left pending run when it attaches
  expect_match(text, "on init: TRUE", fixed = TRUE)
})

test_that("config_backend() (keras3's) names the backend chosen by KERAS_BACKEND", {
  b <- backend()
  expected <- Sys.getenv("KERAS_BACKEND")
  if (nzchar(expected)) expect_identical(b, expected) else expect_true(b %in% c("jax", "tensorflow", "torch"))
  expect_identical(config_floatx(), "float32")
})

# The errors when Python cannot serve customgrad, from fresh R processes (this one's Python is
# running): the error names the function the user called, the cause and install_customgrad().
no_python_script <- c(
  "suppressPackageStartupMessages(library(customgrad))",
  "options(cli.unicode = FALSE, cli.num_colors = 1, width = 80)",
  "f <- op_custom_gradient(function(x) tuple(x^2, function(dy) dy * 2 * x))",
  "show <- function(expr) {",
  "  e <- tryCatch(expr, error = identity)",
  "  cat('class:', class(e)[[1]], '\\n')",
  "  print(e, backtrace = FALSE)",
  "}"
)

test_that("with no Python that can start, errors say so and point to install_customgrad()", {
  out <- run_r(c(no_python_script, "show(f(1))", "show(op_log1pexp(1))", "show(op_grad(sum)(1))"),
               env = "RETICULATE_PYTHON=/nonexistent/bin/python")
  expect_snapshot(cat(out, sep = "\n"))
  # what the snapshot pins, stated: never "failed in Python", always the way out
  text <- paste(out, collapse = "\n")
  expect_identical(sum(grepl("^class: customgrad_error_python_missing", out)), 3L)
  expect_no_match(text, "failed in Python", fixed = TRUE)
  expect_match(text, "Error in `f()`", fixed = TRUE)
  expect_match(text, "Error in `op_log1pexp()`", fixed = TRUE)
  expect_match(text, "customgrad::install_customgrad()", fixed = TRUE)
})

test_that("a Python without keras is named, with the way out", {
  skip_without_python()
  # a bare virtual environment: no pip, no packages (reticulate starts it without numpy)
  venv <- tempfile("cg-venv-")
  on.exit(unlink(venv, recursive = TRUE), add = TRUE)
  status <- system2(reticulate::py_exe(), c("-m", "venv", "--without-pip", shQuote(venv)))
  expect_identical(status, 0L)
  python <- file.path(venv, "bin", "python")
  out <- run_r(c(no_python_script, "show(f(1))"), env = paste0("RETICULATE_PYTHON=", python))
  # the path's length moves cli's line breaks: lines are checked, not snapshotted
  text <- paste(out, collapse = " ")
  expect_identical(out[[1]], "class: customgrad_error_python_missing ")
  expect_match(text, "Error in `f()`:", fixed = TRUE)
  expect_match(gsub("\\s+", " ", text),
               paste0("x The Python in use ('", python, "') cannot import keras."), fixed = TRUE)
  expect_match(text, "customgrad::install_customgrad()", fixed = TRUE)
  expect_no_match(text, "failed in Python", fixed = TRUE)
})

test_that("a running Python that lacks a package customgrad imports is named with the package", {
  skip_without_python()
  err <- tryCatch(customgrad:::py_mod("customgrad_absent_module"), error = identity)
  expect_s3_class(err, "customgrad_error_python_missing")
  expect_match(conditionMessage(err),
               sprintf("The Python in use ('%s') cannot import customgrad_absent_module.",
                       reticulate::py_config()$python), fixed = TRUE)
  expect_match(conditionMessage(err), "customgrad::install_customgrad()", fixed = TRUE)
  # reticulate's own error is kept as the parent
  expect_match(conditionMessage(err$parent), "No module named 'customgrad_absent_module'",
               fixed = TRUE)
})

test_that("load hooks pending for a module Python already imported run once, then are dropped", {
  skip_without_python()
  # as when Python started before R (rpy2): a hook for a module imported before reticulate attached
  name <- "reticulate::sys::load"
  ran <- 0L
  setHook(name, function() ran <<- ran + 1L)
  on.exit(setHook(name, NULL, "replace"), add = TRUE)
  customgrad:::run_pending_load_hooks()
  expect_identical(ran, 1L)
  expect_length(getHook(name), 0)
  customgrad:::run_pending_load_hooks()
  expect_identical(ran, 1L)
  # a failing hook is reported, as reticulate reports one, and the others still run
  setHook(name, function() stop("broken hook"))
  setHook(name, function() ran <<- ran + 1L)
  expect_warning(customgrad:::run_pending_load_hooks(), '"sys"',
                 class = "customgrad_warning_load_hook")
  expect_identical(ran, 2L)
})

test_that("the no-Python error's other way fits RETICULATE_PYTHON: set, unset, Python running", {
  show_lines <- function(lines) {
    customgrad:::cg_abort(lines, "python_missing", call = NULL)
  }
  uv_failed <- simpleError("uv could not download Python 3.11: no network\nmore detail")
  expect_snapshot(error = TRUE, {
    # RETICULATE_PYTHON set to a Python that does not run
    show_lines(customgrad:::python_missing_lines(FALSE, "/opt/py/bin/python", NULL, "customgrad"))
    # unset, and reticulate's py_require() could not build an environment: say why
    show_lines(customgrad:::python_missing_lines(FALSE, "", NULL, "customgrad", uv_failed))
    # unset, a Python chosen with use_virtualenv() that lacks keras
    show_lines(customgrad:::python_missing_lines(TRUE, "", "/envs/r-keras/bin/python", "keras"))
  })
  unset <- customgrad:::python_missing_lines(FALSE, "", NULL, "customgrad", uv_failed)
  expect_false(any(grepl("leave|unset, so that", unset)))
  expect_true(any(grepl("uv could not download Python 3.11: no network", unset, fixed = TRUE)))
})

test_that("a Python without Keras's backend: the error names it, the backends there and the fix", {
  expect_snapshot(error = TRUE, {
    customgrad:::cg_abort(customgrad:::backend_missing_lines(
      "tensorflow", "/envs/r-customgrad/bin/python", "jax"), "python_missing", call = NULL)
    customgrad:::cg_abort(customgrad:::backend_missing_lines(
      "torch", "/envs/r-customgrad/bin/python", character()), "python_missing", call = NULL)
  })
})

test_that("install_customgrad()'s one-backend environment: the error's fix line makes it work", {
  skip_without_python()
  skip_on_os("windows")
  # a copy of this session's Python environment with only its backend: the other two are left out
  # (symbolic links to everything else), and KERAS_BACKEND names one of them, as keras3 sets
  # "tensorflow" when it loads in an environment with only jax
  have <- config_backend()
  absent <- setdiff(c("jax", "tensorflow", "torch"), have)
  left_out <- c(jax = "^jax", tensorflow = "^(tensorflow|tf_keras)", torch = "^(torch|functorch)")
  site <- reticulate::py_eval("__import__('sysconfig').get_paths()['purelib']")
  venv <- tempfile("cg-one-backend-")
  on.exit(unlink(venv, recursive = TRUE), add = TRUE)
  expect_identical(system2(reticulate::py_exe(), c("-m", "venv", "--without-pip", shQuote(venv))), 0L)
  python <- file.path(venv, "bin", "python")
  target <- system2(python, c("-c", shQuote("import sysconfig; print(sysconfig.get_paths()['purelib'])")),
                    stdout = TRUE)
  entries <- list.files(site)
  entries <- entries[!grepl(paste(left_out[absent], collapse = "|"), entries)]
  expect_true(all(file.symlink(file.path(site, entries), file.path(target, entries))))
  env <- c(paste0("RETICULATE_PYTHON=", python), paste0("KERAS_BACKEND=", absent[[1]]))
  out <- run_r(c(no_python_script, "show(f(1))"), env = env)
  text <- gsub("\\s+", " ", paste(out, collapse = " "))
  # the line the message gives, run as it says: in a new session, before Python starts
  fix <- regmatches(text, regexpr('keras3::use_backend\\("[a-z]+"\\)', text))
  expect_identical(fix, sprintf('keras3::use_backend("%s")', have))
  fixed <- run_r(c(no_python_script[[1]], fix,
                   "f <- op_custom_gradient(function(x) tuple(x^2, function(dy) dy * 2 * x))",
                   "cat('after the fix:', as.numeric(as.array(f(3))), '\\n')"), env = env)
  # (reticulate may warn first that the packages keras3 declares look missing)
  expect_true("class: customgrad_error_python_missing " %in% out)
  expect_match(text, sprintf("! Keras is set to use the backend %s, which the Python in use does not have.",
                             absent[[1]]), fixed = TRUE)
  expect_match(text, sprintf("x '%s' has the backend %s.", python, have), fixed = TRUE)
  expect_match(text, "Restart R and run", fixed = TRUE)
  expect_match(paste(fixed, collapse = "\n"), "after the fix: 9", fixed = TRUE)
})
