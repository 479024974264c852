# Builds the R site (pkgdown, _pkgdown.yml) into site/r/, offline. Run by scripts/build_docs.sh.
# With --strict, a warning while building, or an example whose output shows an error (pkgdown
# renders those rather than stopping), fails the build; an article that fails always does.
strict <- "--strict" %in% commandArgs(TRUE)
options(pkgdown.internet = FALSE) # no CRAN look-up for the sidebar

# The one warning that is not the site's: keras3 declares optional Python packages (pydot,
# pandas, ipython) with py_require() that a pinned environment need not have.
not_ours <- "py_require"
seen <- character()
withCallingHandlers(
  pkgdown::build_site(".", preview = FALSE, new_process = FALSE),
  warning = function(w) {
    if (!grepl(not_ours, conditionMessage(w))) seen <<- c(seen, conditionMessage(w))
  }
)

pages <- list.files("site/r", pattern = "[.]html$", recursive = TRUE, full.names = TRUE)
failed <- Filter(function(p) any(grepl('class="r-err', readLines(p, warn = FALSE), fixed = TRUE)),
                 pages)
for (p in failed) message("an example failed on ", p)
for (w in seen) message("warning: ", w)
if (strict && (length(failed) || length(seen))) quit(status = 1)
