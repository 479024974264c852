# Every help page renders whole: an unescaped % in roxygen once cut pages short (Rd treats it as
# a comment), and markdown lists ran together into one paragraph.

# Renders every page once: its text and the warnings rendering and checkRd() gave.
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

test_that("every help page parses and renders without a warning", {
  pages <- render_all()
  expect_gt(length(pages), 300)
  for (name in names(pages)) {
    expect_identical(pages[[name]]$warnings, character(), label = name)
    expect_identical(pages[[name]]$check, character(), label = name)
  }
})

test_that("the %||% idiom and the lists of op_custom_gradient's page survive rendering", {
  pages <- rendered_pages()
  page <- pages[["op_custom_gradient.Rd"]]
  expect_match(page, "upstream <- upstream %||% ..1", fixed = TRUE)
  # the ways to write a grad function are list items, one a line, not a run-on paragraph
  items <- grepl("^\\s*(\u2022|\\*) ", strsplit(page, "\n")[[1]])
  expect_gte(sum(items), 2)
  expect_match(pages[["null-default.Rd"]], "upstream %||% ..1", fixed = TRUE)
  expect_match(pages[["tensor-subset.Rd"]], "x %*% t(x)", fixed = TRUE)
  # a generated page keeps its lists: keras.ops.dot's five cases, one item each
  dot <- strsplit(pages[["op_dot.Rd"]], "\n")[[1]]
  expect_gte(sum(grepl("^\\s*(\u2022|\\*) If ", dot)), 5)
})

test_that("no page ends early: each keeps its Value and Examples sections", {
  pages <- rendered_pages()
  with_examples <- c("op_custom_gradient.Rd", "op_subset.Rd", "tensor-subset.Rd", "as_tensor.Rd")
  for (name in with_examples) {
    expect_match(pages[[name]], "Examples:", fixed = TRUE, label = name)
    expect_match(pages[[name]], "Value:", fixed = TRUE, label = name)
  }
})
