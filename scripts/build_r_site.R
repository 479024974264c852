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
copied <- file.copy(file.path(fontawesome, c("css", "webfonts")), file.path(offline, "fontawesome"),
                    recursive = TRUE, overwrite = TRUE)
stopifnot(all(copied))
# bootstrap-toc 0.4.1 (MIT), pkgdown's own copy (for its Bootstrap 3 template)
stopifnot(file.copy(system.file("BS3", "assets", "bootstrap-toc.js", package = "pkgdown",
                                mustWork = TRUE),
                    file.path(offline, "bootstrap-toc.js"), overwrite = TRUE))
# pkgdown makes a page of every Markdown file at the root; the Python changelog and architecture
# pages belong to the Python site, so the R site's search leaves them out
search_json <- file.path("site", "r", "search.json")
entries <- jsonlite::read_json(search_json)
python_pages <- c("/CHANGELOG.html", "/ARCHITECTURE.html")
entries <- Filter(function(e) !any(unlist(e$path) %in% python_pages), entries)
# the search lists matches in the index's order (offline/offline.js): a user's pages first (the
# Install article, the other articles, the home page, the reference, the news), maintainers'
# (Contributing, Releasing) last
page_rank <- function(entry) {
  path <- c(unlist(entry$path), "")[[1]]
  if (startsWith(path, "/articles/install")) return(0)
  if (startsWith(path, "/articles/")) return(1)
  if (path == "/index.html") return(2)
  if (startsWith(path, "/reference/")) return(3)
  if (startsWith(path, "/news/")) return(4)
  5
}
entries <- entries[order(vapply(entries, page_rank, numeric(1)), method = "radix")]
index <- jsonlite::toJSON(entries, auto_unbox = TRUE, null = "null")
writeLines(index, search_json, useBytes = TRUE)
# the search index as a script: a page read from disk cannot fetch() search.json
writeLines(paste0("window.customgradSearchIndex = ", index, ";"),
           file.path(offline, "search-index.js"), useBytes = TRUE)

pages <- list.files("site/r", pattern = "[.]html$", recursive = TRUE, full.names = TRUE)

# A page of the Python site named as code (`docs/convention.md`, in the help pages or the
# articles) becomes a link to that page, as scripts/mkdocs_hooks.py does on the Python site.
link_python_pages <- function(page) {
  html <- readLines(page, warn = FALSE, encoding = "UTF-8")
  depth <- lengths(regmatches(page, gregexpr("/", page))) - 1L  # 1 for site/r/index.html
  to_python <- paste0(strrep("../", depth), "python/")
  pattern <- "<code>docs/([A-Za-z0-9_-]+)[.]md</code>"
  found <- unique(unlist(regmatches(html, gregexpr(pattern, html))))
  for (code in found) {
    name <- sub(pattern, "\\1", code)
    if (!file.exists(file.path("docs", paste0(name, ".md")))) next
    html <- gsub(code, sprintf('<a href="%s%s.html">%s</a>', to_python, name, code), html,
                 fixed = TRUE)
  }
  if (length(found)) writeLines(html, page, useBytes = TRUE)
}
invisible(lapply(pages, link_python_pages))
failed <- Filter(function(p) any(grepl('class="r-err', readLines(p, warn = FALSE), fixed = TRUE)),
                 pages)
for (p in failed) message("an example failed on ", p)
for (w in seen) message("warning: ", w)
if (strict && (length(failed) || length(seen))) quit(status = 1)
