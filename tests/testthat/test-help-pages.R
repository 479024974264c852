# Every help page renders whole: an unescaped % in roxygen once cut pages short (Rd treats it as
# a comment), and markdown lists ran together into one paragraph.

rendered_pages <- function() {
  db <- tools::Rd_db("customgrad")
  vapply(db, function(rd) {
    paste(utils::capture.output(tools::Rd2txt(rd, out = stdout(),
                                              options = list(underline_titles = FALSE))),
          collapse = "\n")
  }, "")
}

test_that("every help page parses and renders without a warning", {
  db <- tools::Rd_db("customgrad")
  expect_gt(length(db), 300)
  for (name in names(db)) {
    warnings <- character()
    withCallingHandlers(
      utils::capture.output(tools::Rd2txt(db[[name]], out = stdout())),
      warning = function(w) {
        warnings <<- c(warnings, conditionMessage(w))
        invokeRestart("muffleWarning")
      }
    )
    expect_identical(warnings, character(), label = name)
    expect_identical(length(tools::checkRd(db[[name]])), 0L, label = name)
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
