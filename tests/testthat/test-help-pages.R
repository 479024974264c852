# Every help page renders whole: an unescaped % in roxygen once cut pages short (Rd treats it as
# a comment), a backslash-escaped one showed as `\%||\%`, and markdown lists ran together.

render_all <- local({
  cache <- NULL
  function() {
    if (is.null(cache)) {
      db <- tools::Rd_db("customgrad")
      cache <<- lapply(db, function(rd) {
        warnings <- character()
        text <- withCallingHandlers(
          utils::capture.output(tools::Rd2txt(rd, out = stdout(),
                                              options = list(underline_titles = FALSE))),
          warning = function(w) {
            warnings <<- c(warnings, conditionMessage(w))
            invokeRestart("muffleWarning")
          }
        )
        list(text = paste(text, collapse = "\n"), warnings = warnings,
             check = as.character(tools::checkRd(rd)))
      })
    }
    cache
  }
})

rendered_pages <- function() vapply(render_all(), function(p) p$text, "")

test_that("every help page parses and renders without a warning; keras3's ops have none here", {
  pages <- render_all()
  expect_gte(length(pages), 10)
  expect_false(any(c("op_add.Rd", "op_exp.Rd", "tuple.Rd", "as_tensor.Rd") %in% names(pages)))
  for (name in names(pages)) {
    expect_identical(pages[[name]]$warnings, character(), label = name)
    expect_identical(pages[[name]]$check, character(), label = name)
  }
})

test_that("op_custom_gradient's page shows the %||% idiom without backslashes; lists render", {
  page <- rendered_pages()[["op_custom_gradient.Rd"]]
  expect_match(page, "upstream <- upstream %||% ..1", fixed = TRUE)
  expect_no_match(page, "\\%", fixed = TRUE)
  layers <- rendered_pages()[["gradient-layers.Rd"]] # the page with a markdown list
  items <- grepl("^\\s*(\u2022|\\*) ", strsplit(layers, "\n")[[1]])
  expect_gte(sum(items), 2)
})

test_that("no page ends early: each keeps its Value and Examples sections", {
  pages <- rendered_pages()
  for (name in c("op_custom_gradient.Rd", "op_grad.Rd", "customgrad_ops.Rd", "op_jvp.Rd")) {
    expect_match(pages[[name]], "Examples:", fixed = TRUE, label = name)
    expect_match(pages[[name]], "Value:", fixed = TRUE, label = name)
  }
})

test_that("op_custom_gradient's example, keras3's `upstream %||% ..1`, runs with only customgrad attached", {
  skip_without_python()
  # a fresh R process: this one has customgrad's namespace (which imports rlang's %||%) around
  # the tests. example() runs the help page's code as a user would, after library(customgrad).
  out <- run_r(c(
    "suppressPackageStartupMessages(library(customgrad))",
    "cat('rlang attached:', 'package:rlang' %in% search(), '\\n')",
    "cat('base has %||%:', exists('%||%', envir = baseenv(), inherits = FALSE), '\\n')",
    "cat('%||% from:', environmentName(environment(get('%||%'))), '\\n')",
    "invisible(capture.output(example('op_custom_gradient', package = 'customgrad', ask = FALSE)))",
    "cat('grad at 100:', as.numeric(as.array(op_grad(log1pexp)(100))), '\\n')"
  ))
  text <- paste(out, collapse = "\n")
  expect_match(text, "rlang attached: FALSE", fixed = TRUE)
  # rlang's function, found through customgrad's export (base R has its own only from 4.4)
  expect_match(text, "%||% from: rlang", fixed = TRUE)
  if (getRversion() < "4.4.0") expect_match(text, "base has %||%: FALSE", fixed = TRUE)
  expect_match(text, "grad at 100: 1( |$)")
  expect_no_match(text, "could not find function", fixed = TRUE)
})

test_that("customgrad's op_custom_gradient page says how to open it, and that way opens it", {
  pages <- rendered_pages()
  advice <- "?customgrad::op_custom_gradient"
  expect_match(pages[["op_custom_gradient.Rd"]], advice, fixed = TRUE)
  expect_match(pages[["customgrad-package.Rd"]], advice, fixed = TRUE)
  # keras3 has a page of the same name; the advice, run as written, finds customgrad's
  help_page <- eval(parse(text = advice)[[1]])
  expect_length(as.character(help_page), 1L)
  expect_match(as.character(help_page), "customgrad[/\\\\]help[/\\\\]op_custom_gradient$")
})
