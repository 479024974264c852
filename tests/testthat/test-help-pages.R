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
