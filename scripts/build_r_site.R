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

# The site works from disk with no network (pkgdown/templates/head.html loads nothing from a CDN):
# what its head names under offline/ comes from packages installed here, copied in, not downloaded
# (pkgdown/assets/offline/offline.js, copied by pkgdown, stands in for the rest).
offline <- file.path("site", "r", "offline")
dir.create(offline, showWarnings = FALSE, recursive = TRUE)
# Font Awesome Free (CSS: MIT; fonts: SIL OFL 1.1), as the R package fontawesome ships it
fontawesome <- system.file("fontawesome", package = "fontawesome", mustWork = TRUE)
dir.create(file.path(offline, "fontawesome"), showWarnings = FALSE)
file.copy(file.path(fontawesome, c("css", "webfonts")), file.path(offline, "fontawesome"),
          recursive = TRUE, overwrite = TRUE)
# bootstrap-toc 0.4.1 (MIT), pkgdown's own copy (for its Bootstrap 3 template)
file.copy(system.file("BS3", "assets", "bootstrap-toc.js", package = "pkgdown", mustWork = TRUE),
          file.path(offline, "bootstrap-toc.js"), overwrite = TRUE)
# the search index as a script: a page read from disk cannot fetch() search.json
index <- readLines(file.path("site", "r", "search.json"), warn = FALSE, encoding = "UTF-8")
writeLines(paste0("window.customgradSearchIndex = ", paste(index, collapse = "\n"), ";"),
           file.path(offline, "search-index.js"), useBytes = TRUE)

pages <- list.files("site/r", pattern = "[.]html$", recursive = TRUE, full.names = TRUE)
failed <- Filter(function(p) any(grepl('class="r-err', readLines(p, warn = FALSE), fixed = TRUE)),
                 pages)
for (p in failed) message("an example failed on ", p)
for (w in seen) message("warning: ", w)
if (strict && (length(failed) || length(seen))) quit(status = 1)
