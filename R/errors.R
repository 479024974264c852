# Every error the package raises goes through cg_abort(), so each has a class of the form
# customgrad_error_<what> (documented in ?customgrad_errors) and the tidyverse message grammar.

#' Errors raised by customgrad
#'
#' Every error raised by the package is a condition of class `customgrad_error` and of one more
#' specific class `customgrad_error_<what>`, so code can catch exactly what it expects, e.g.
#' `tryCatch(..., customgrad_error_grad_fn_arity = function(e) ...)`. Messages name the function
#' the user called, what it expected and what it received, in R terms (1-based positions, lists,
#' the R function names).
#'
#' \describe{
#'   \item{`customgrad_error_type`}{An argument of the wrong type, e.g. `op_custom_gradient(3)`.}
#'   \item{`customgrad_error_argument`}{An argument with a value out of its range, e.g.
#'     `op_check_gradients(order = 3)`.}
#'   \item{`customgrad_error_argnums`}{`argnums` of [op_grad()] and friends is not a set of
#'     positive whole numbers.}
#'   \item{`customgrad_error_axis`}{An `axis` that is not a valid (1-based) axis.}
#'   \item{`customgrad_error_custom_gradient`}{A function given to [op_custom_gradient()] broke
#'     its contract: it did not return `tuple(output, grad)`, or its grad function returned
#'     gradients of the wrong number, shape or kind (also raised by the Python core, whose
#'     message is translated to R terms). The errors of the next two classes have this class
#'     too.}
#'   \item{`customgrad_error_grad_fn_arity`}{The grad function's arguments do not fit the upstream
#'     rule of [op_custom_gradient()] (decided by the Python core, whose message is translated).}
#'   \item{`customgrad_error_grad_fn_result`}{The grad function returned gradients that do not
#'     fit the arguments of the function given to [op_custom_gradient()]: not one per argument,
#'     a gradient of the wrong shape, or one that is not a number (decided by the Python core,
#'     whose message is translated).}
#'   \item{`customgrad_error_gradient_check`}{[op_check_gradients()] found a wrong gradient.
#'     Field: `report`.}
#'   \item{`customgrad_error_callback`}{An R function called from Python (the forward or grad
#'     function of a custom gradient, a function given to [op_grad()]) raised an R error that is
#'     not a customgrad error. Field: `r_error` (the original condition, also the parent).}
#'   \item{`customgrad_error_python`}{Python raised an error: keras or the backend (the message
#'     then says the function "failed in Python"), or customgrad's Python core refused an
#'     argument or a result (its message, in R terms). Field: `python_message` (the message in
#'     Python's terms).}
#'   \item{`customgrad_error_install`}{[install_customgrad()] could not create the environment
#'     or install into it, or this installation ships no Python package to install.}
#'   \item{`customgrad_error_python_missing`}{No Python could start (none was found, or
#'     `RETICULATE_PYTHON` names one that does not run), the session's Python lacks the backend
#'     Keras is set to use (the message names the backends it has and the
#'     [keras3::use_backend()] line that chooses one), or it cannot import keras or
#'     customgrad's Python package; the message says which and points to
#'     [install_customgrad()]. The parent is reticulate's error.}
#'   \item{`customgrad_error_vignette`}{A vignette knitted without Python (as on a CRAN check
#'     machine) found no pre-computed outputs, or outputs made from another version of its
#'     `.Rmd`; the message says how to make them.}
#' }
#'
#' @name customgrad_errors
#' @examplesIf customgrad:::python_available()
#' err <- tryCatch(op_custom_gradient(3), customgrad_error = function(e) e)
#' class(err)
#' conditionMessage(err)
NULL

# The second line is for R/import-standalone-obj-type.R (rlang's standalone file, copied as it is):
# its header asks for rlang >= 1.1.0, but the functions it calls are all in rlang 1.0.6 (Debian's,
# which the R suite runs on), so DESCRIPTION keeps rlang unversioned.
#' @importFrom rlang %||% call2 call_name caller_arg caller_env current_call current_env frame_call
#' @importFrom rlang abort is_list is_missing is_na is_vector
NULL

# `class` is the <what> of customgrad_error_<what> ("type", "grad_fn_arity", ...).
# The backtrace ends at `call` where it is a frame (the function the user called), unless `...`
# gives one: cg_abort(), cli and rlang are no frames of the user's.
cg_abort <- function(message, class = NULL, ..., call = caller_env(),
                     .envir = parent.frame()) {
  classes <- if (is.null(class)) NULL else paste0("customgrad_error_", class)
  if (is.environment(call) && !"trace" %in% ...names()) {
    cli::cli_abort(message, class = c(classes, "customgrad_error"), ..., call = call,
                   .envir = .envir, trace = rlang::trace_back(bottom = call))
  } else {
    cli::cli_abort(message, class = c(classes, "customgrad_error"), ..., call = call,
                   .envir = .envir)
  }
}

# Signals `cnd` again (an error customgrad made deeper, in an R callback Python called, or where
# Python was first needed) as rlang signals its errors, its backtrace ending at `bottom`, the frame
# of the function the user called: stop() would print the calls down to reticulate's plumbing.
resignal <- function(cnd, bottom) {
  if (!is.null(bottom)) cnd$trace <- rlang::trace_back(bottom = bottom)
  rlang::cnd_signal(cnd)
}

# How messages describe a value: rlang's obj_type_friendly() (R/import-standalone-obj-type.R),
# except for tensors, where rlang's would name the backend's class ("a <torch.Tensor> object",
# "a <jaxlib._jax.ArrayImpl> object", ...): a tensor is described by its shape and dtype, the same
# on every backend.
obj_type_tensor <- function(x) {
  if (!inherits(x, tensor_classes)) return(obj_type_friendly(x))
  shape <- unlist(py_mod("bridge")$shape(x))
  sprintf("a tensor of shape(%s) and dtype %s", paste(shape, collapse = ", "),
          py_mod("keras")$backend$standardize_dtype(x$dtype))
}

# Errors raised inside R callbacks (called from Python) are kept here so that the R caller
# re-signals the original classed condition rather than Python's wrapper of it.
callback_error <- function(e) {
  .cg$callback_error <- e
  stop(e)
}

in_callback <- function(expr) {
  withCallingHandlers(expr, error = function(e) {
    if (is.null(.cg$callback_error)) .cg$callback_error <- e
  })
}

# Evaluates a Python call; customgrad errors from callbacks are re-signalled as they were, other R
# errors from callbacks become `customgrad_error_callback` (original kept in `r_error`), Python
# errors become `customgrad_error_python` conditions carrying Python's message in R terms.
# `call` is the user-facing function's frame (`current_env()`) or, for the functions customgrad
# returns (called after their maker has returned), the maker's call (`current_call()`); messages
# name its function. `call` has no default on purpose: a `caller_env()` promise made by every op
# call kept R memory alive per call under jax once a model had been trained.
with_py_errors <- function(expr, call) {
  if (!is.null(.cg$callback_error)) .cg$callback_error <- NULL
  # the frame of the function the user called: backtraces end there
  bottom <- if (is.environment(call)) call else parent.frame()
  # A calling handler rather than tryCatch(): this wraps every op call, and it costs less.
  # py_error() always signals an error of its own, so the handler never returns.
  withCallingHandlers(expr, error = function(e) py_error(e, call, bottom))
}

# `bottom`: the frame where the backtrace of the error ends. Frames below it are customgrad's and
# reticulate's plumbing (about ten of them, printed with every error outside an interactive
# session), not the user's code; Python's side stays in `python_message` and
# reticulate::py_last_error().
py_error <- function(e, call, bottom = NULL) {
  fn <- call_fn_name(call)
  inner <- .cg$callback_error
  .cg$callback_error <- NULL
  if (!is.null(inner)) {
    if (inherits(inner, "customgrad_error")) resignal(inner, bottom)
    # an R error raised by the user's f or grad function: keep its message, give it a class
    inner_msg <- conditionMessage(inner)
    cg_abort(
      c("An R function called by {.fn {fn}} raised an error.", x = "{inner_msg}"),
      "callback", call = call, parent = NA, r_error = inner, trace = user_trace(bottom)
    )
  }
  if (inherits(e, "customgrad_error_python_missing")) {
    # raised where Python was first needed, deep inside: name the function the user called
    e$call <- if (is.environment(call)) frame_call(call) else call
    resignal(e, bottom)
  }
  if (inherits(e, "customgrad_error")) resignal(e, bottom)
  raw <- python_message(e)
  # the Python core's contract errors keep a specific class in R too; reticulate classes the
  # condition by the Python exception's type
  specific <- if (inherits(e, "customgrad.GradFnArityError")) {
    c("grad_fn_arity", "custom_gradient")
  } else if (inherits(e, "customgrad.GradFnResultError")) {
    c("grad_fn_result", "custom_gradient")
  } else if (inherits(e, "customgrad.CustomGradientError")) {
    "custom_gradient"
  }
  # the condition is the Python exception; GradFnArityError and GradFnResultError carry the
  # name of the user's function as `function_name` (NULL where Python did not know it)
  user_fn <- if (!is.null(specific)) e$function_name
  cg_abort(
    py_error_lines(raw, fn, specific, user_fn), c(specific, "python"), call = call,
    python_message = raw, parent = NULL, trace = user_trace(bottom)
  )
}

# The backtrace down to `bottom` (the function the user called), or NULL for rlang's own.
user_trace <- function(bottom) if (is.null(bottom)) NULL else rlang::trace_back(bottom = bottom)

# The message of a Python error, in R terms. Its first line says what went wrong, by the
# specific class of the error (`specific`): the grad function did not fit the upstream gradients
# ("grad_fn_arity") or returned gradients that do not fit ("grad_fn_result"), a function given to
# op_custom_gradient() broke its contract ("custom_gradient"), or customgrad's own check refused
# an argument (none: its message is then the line); "failed in Python" only for errors of Keras
# or the backend. `user_fn`: the name of the user's function, for the first two (default "f",
# the name op_custom_gradient() gives a function it cannot name).
py_error_lines <- function(raw, fn, specific = NULL, user_fn = NULL) {
  msg <- r_terms(raw)
  own <- grepl("^([A-Za-z_.]*(Error|Exception): )?customgrad[.:]", raw)
  if (!own) return(c(sprintf("{.fn %s} failed in Python.", fn), x = cli_escape(msg)))
  # customgrad's check of an argument: its message, which opens with the R function's name
  if (is.null(specific)) return(cli_escape(msg))
  detail <- capitalize(sub("^op_custom_gradient\\(\\): ", "", msg))
  headline <- if ("grad_fn_arity" %in% specific) {
    "The grad function of {.fn %s} cannot take the upstream gradients it is given."
  } else if ("grad_fn_result" %in% specific) {
    "The grad function of {.fn %s} returned gradients that do not fit the arguments of {.fn %s}."
  } else {
    "A function given to {.fn op_custom_gradient} broke its contract."
  }
  c(gsub("%s", cli_escape(user_fn %||% "f"), headline, fixed = TRUE), x = cli_escape(detail))
}

# Text shown as it is in a cli message (Python's messages can hold braces).
cli_escape <- function(text) gsub("}", "}}", gsub("{", "{{", text, fixed = TRUE), fixed = TRUE)

capitalize <- function(text) paste0(toupper(substring(text, 1, 1)), substring(text, 2))

# The name of the function `call` (a frame or a call) stands for: the function the user called.
call_fn_name <- function(call) {
  if (is.environment(call)) call <- frame_call(call)
  call_name(call) %||% "f"
}

python_message <- function(e) {
  msg <- conditionMessage(e)
  msg <- sub("\n*Detailed traceback:.*$", "", msg)
  msg <- sub("\\s*-+\\s*For simplicity, JAX has removed.*$", "", msg)
  msg <- sub("\n*Run `reticulate::py_last_error\\(\\)` for details.*$", "", msg)
  # the note customgrad's Python adds to a traceback it shortened: no traceback is shown here
  msg <- sub("\\s*\\(customgrad removed its own frames from this traceback;[^)]*\\)", "", msg)
  trimws(msg)
}

# Python's words for what the R user wrote: the R function names, 1-based argument positions,
# lists for tuples.
r_terms <- function(msg) {
  msg <- sub("^[A-Za-z_.]*(Error|Exception): ", "", msg)
  names <- c("customgrad.value_and_grad" = "op_value_and_grad()",
             "customgrad.check_gradients" = "op_check_gradients()",
             "customgrad.custom_gradient" = "op_custom_gradient()",
             "customgrad.grad" = "op_grad()", "customgrad.vjp" = "op_vjp()")
  for (py in names(names)) msg <- gsub(paste0(py, "(\\(\\))?"), names[[py]], msg)
  msg <- gsub_fn(msg, "customgrad\\.layers\\.[A-Za-z]+", function(m) {
    paste0("layer_", snake_case(sub("customgrad.layers.", "", m, fixed = TRUE)), "()")
  })
  # the R grad function, which the bridge names "<f>.grad"
  msg <- gsub("(\\bthe )?grad_fn `([A-Za-z0-9._]+)\\.grad` of `\\2`", "the grad function of `\\2()`",
              msg)
  msg <- gsub("a callable grad_fn", "a function (the grad function)", msg, fixed = TRUE)
  msg <- gsub("(^|\\. )grad_fn\\b", "\\1The grad function", msg)
  msg <- gsub("\\bgrad_fn\\b", "the grad function", msg)
  # how an R function takes its arguments: `...` for *args, `upstream =` for the keyword
  msg <- gsub("*args", "`...`", msg, fixed = TRUE)
  msg <- gsub("the keyword `upstream`", "`upstream =`", msg, fixed = TRUE)
  msg <- gsub("positional parameter", "argument", msg, fixed = TRUE)
  msg <- gsub("keyword argument", "named argument", msg, fixed = TRUE)
  msg <- gsub("`?\\b(upstream|variables)=None\\b`?", "`\\1 = NULL`", msg)
  msg <- gsub("`?\\b(upstream|variables)=`?", "`\\1 =`", msg)
  msg <- gsub("flat sequence", "flat list", msg, fixed = TRUE)
  msg <- gsub("keras\\.ops\\.([a-z0-9_]+)", "op_\\1()", msg)
  msg <- gsub("keras.ops", "keras3's op_*() functions", msg, fixed = TRUE)
  msg <- gsub_fn(msg, "\\bargs(\\[[^]]*\\])+( \\(output element [0-9]+\\))?", r_path)
  # shapes as keras3 prints them: `shape(2, 3)`, `shape(2)`, `shape()` (Python's tuples: (2,))
  msg <- gsub("\\bshape \\(([0-9, ]*?),?\\)", "shape(\\1)", msg, perl = TRUE)
  msg <- gsub("\\btuples\\b", "lists", msg)
  msg <- gsub("\\btuple\\b", "list", msg)
  msg <- gsub("\\bNone\\b", "NULL", msg)
  msg <- gsub("pair (output, the grad function)", "`tuple(output, grad)`", msg, fixed = TRUE)
  msg <- gsub("pair (grad_xs, grad_vars)", "`list(grad_xs, grad_vars)`", msg, fixed = TRUE)
  # reticulate's name for an R function handed to Python: the user's `f`
  msg <- gsub("`?python_function`?", "`f`", msg)
  msg
}

# A Python path to a leaf of the arguments, 0-based, in R's 1-based terms:
# args[0] -> args[[1]], args[0]['a'] -> args[[1]]$a, args[1][2, 0] -> args[[2]][3, 1],
# "(output element 0)" -> "(output element 1)".
r_path <- function(path) {
  shift <- function(text) {
    ints <- as.integer(regmatches(text, gregexpr("[0-9]+", text))[[1]]) + 1L
    paste(ints, collapse = ", ")
  }
  path <- gsub_fn(path, "\\[[0-9]+\\]", function(m) paste0("[[", shift(m), "]]"))
  path <- gsub_fn(path, "\\[[0-9]+(, [0-9]+)+\\]", function(m) paste0("[", shift(m), "]"))
  path <- gsub("\\[['\"]([A-Za-z.][A-Za-z0-9._]*)['\"]\\]", "$\\1", path)
  gsub_fn(path, "output element [0-9]+", function(m) paste("output element", shift(m)))
}

# gsub() whose replacement is computed by `fn` from each match.
gsub_fn <- function(x, pattern, fn) {
  m <- gregexpr(pattern, x, perl = TRUE)
  regmatches(x, m) <- lapply(regmatches(x, m), function(found) vapply(found, fn, character(1)))
  x
}
