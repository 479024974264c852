# The one upstream rule, from the case table pytest reads too (tests/upstream_rule.json): every
# case runs through op_custom_gradient(), and the test checks what the R grad function received
# (positionally and as upstream =) and the gradient that came out.

rule_table <- function() {
  path <- test_path("..", "upstream_rule.json")
  if (!file.exists(path)) {
    # R CMD check runs the tests from <pkg>.Rcheck/tests; the table sits beside testthat/
    path <- test_path("..", "..", "tests", "upstream_rule.json")
  }
  cases <- jsonlite::fromJSON(path, simplifyVector = FALSE)$cases
  # rows whose signature or output R has no twin of (the table's "about" names them)
  Filter(function(case) !isTRUE(case$python_only), cases)
}

# The grad functions of the table, in R. Each records what it received and returns the sum of
# first upstream leaf times 10 (a gradient the test can tell apart from autodiff's).
record <- new.env()
received <- function(positional, upstream = NULL) {
  record$positional <- positional
  record$upstream <- upstream
  first <- if (length(positional)) positional[[1]] else upstream
  while (is.list(first)) first <- first[[1]]
  if (is.null(first)) NULL else first * 10
}
grad_fns <- list(
  one = function(dy) received(list(dy)),
  two = function(dy1, dy2) received(list(dy1, dy2)),
  three = function(a, b, c) received(list(a, b, c)),
  varargs = function(...) received(list(...)),
  upstream_only = function(upstream) received(list(), upstream),
  varargs_upstream = function(..., upstream) received(list(...), upstream),
  none = function() received(list())
)

# Outputs: single = x * 2; pair = list(x * 2, x * 3); tuple1 = tuple(x * 2); nested =
# list(x * 2, list(x * 3, x * 4)). The loss weights the leaves 1, 100 and 10000, so each upstream
# has a known value: 1 for the first leaf, 100 for the second, 10000 for the third.
make_output <- function(kind, x) {
  switch(kind, single = x * 2, pair = list(x * 2, x * 3), tuple1 = tuple(x * 2),
         nested = list(x * 2, list(x * 3, x * 4)))
}
loss_of <- function(kind, out) {
  switch(kind,
    single = op_sum(out),
    pair = op_sum(out[[1]]) + 100 * op_sum(out[[2]]),
    tuple1 = op_sum(out[[1]]),
    nested = op_sum(out[[1]]) + 100 * op_sum(out[[2]][[1]]) + 10000 * op_sum(out[[2]][[2]])
  )
}
# The upstream leaves in output order, as numbers.
upstream_values <- function(kind) {
  switch(kind, single = 1, pair = c(1, 100), tuple1 = 1, nested = c(1, 100, 10000))
}
# The leaves of a (nested) list, depth first, as R lists them.
leaves <- function(x) if (is.list(x)) do.call(c, lapply(x, leaves)) else list(x)

deparse_formals <- function(fn) {
  paste0("function(", paste(names(formals(fn)), collapse = ", "), ")")
}
is_tensor_like <- function(x) inherits(x, "python.builtin.object")

for (case in rule_table()) {
  label <- sprintf("upstream rule: function %s with a %s output -> %s%s", case$grad_fn,
                   case$output, case$positional, if (isTRUE(case$upstream)) " + upstream =" else "")
  test_that(paste(label, "on", Sys.getenv("KERAS_BACKEND", "default")), {
    skip_without_python()
    rm(list = ls(record), envir = record)
    grad_fn <- grad_fns[[case$grad_fn]]
    f <- op_custom_gradient(function(x) tuple(make_output(case$output, x), grad_fn))
    run <- function() op_grad(function(x) loss_of(case$output, f(x)))(c(1, 2))
    ups <- upstream_values(case$output)

    if (case$positional == "error") {
      err <- expect_error(run(), class = "customgrad_error_grad_fn_arity")
      msg <- conditionMessage(err)
      expect_match(msg, "grad function of `f()`", fixed = TRUE)
      expect_match(msg, deparse_formals(grad_fn), fixed = TRUE)
      n <- length(ups)
      expect_match(msg, sprintf("(%d upstream gradient", n), fixed = TRUE)
      return(invisible())
    }

    g <- run()
    pos <- record$positional
    if (case$positional == "per_leaf") {
      expect_length(pos, length(ups))
      for (i in seq_along(ups)) {
        expect_true(is_tensor_like(pos[[i]]))
        expect_equal(num(pos[[i]]), c(ups[[i]], ups[[i]]))
      }
    } else if (case$positional == "whole") {
      expect_length(pos, 1L)
      whole <- pos[[1]]
      expect_type(whole, "list")
      expect_length(whole, length(make_output(case$output, 0)))
      whole <- leaves(whole)
      expect_length(whole, length(ups))
      for (i in seq_along(ups)) expect_equal(num(whole[[i]]), c(ups[[i]], ups[[i]]))
    } else {
      expect_length(pos, 0L)
    }

    if (isTRUE(case$upstream)) {
      up <- record$upstream
      expect_false(is.null(up))
      if (length(ups) == 1L && case$output == "single") {
        expect_true(is_tensor_like(up))
        expect_equal(num(up), c(1, 1))
      } else {
        expect_type(up, "list")
        up <- leaves(up)
        expect_length(up, length(ups))
        for (i in seq_along(ups)) expect_equal(num(up[[i]]), c(ups[[i]], ups[[i]]))
      }
    } else {
      expect_null(record$upstream)
    }
    # the gradient is the grad function's: 10 x the first upstream it received
    expect_equal(num(g), c(10, 10) * ups[[1]])
  })
}

test_that("the table covers every grad function style and every output kind", {
  cases <- rule_table()
  expect_setequal(vapply(cases, `[[`, "", "grad_fn"), names(grad_fns))
  expect_setequal(vapply(cases, `[[`, "", "output"), c("single", "pair", "tuple1", "nested"))
  expect_setequal(vapply(cases, `[[`, "", "positional"), c("per_leaf", "whole", "none", "error"))
})
