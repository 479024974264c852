# Says whether an R library holds the R packages customgrad needs from CRAN, reticulate (>= 1.41)
# and keras3, and whether keras3 loads from it. Only that library counts, with R's own libraries
# beside it: a keras3 in the user's library is not seen by a session started with R_LIBS=<library>
# alone. scripts/setup.sh runs it on the project's library:
#
#   Rscript scripts/r_stack.R .Rlib
#
# It prints one line: each package's version and path, and where it came from (the repository
# recorded in <library>/.r-stack-repository by setup), e.g.
#   reticulate 1.46.0 (/work/main/.Rlib/reticulate), keras3 1.5.1 (/work/main/.Rlib/keras3) in .Rlib, from file:///work/shared/cran
# or what is missing, and exits with status 0 when both are there and keras3 loads, else 1.

r_stack_report <- function(lib) {
  if (!dir.exists(lib)) stop("r_stack.R: expected an R library directory, received ", lib)
  lib <- normalizePath(lib)
  .libPaths(lib)  # lib, then R's site and system libraries; the user's library is dropped
  found <- character()
  problems <- character()
  for (pkg in c("reticulate", "keras3")) {
    path <- find.package(pkg, lib.loc = lib, quiet = TRUE)
    if (length(path) == 0) {
      elsewhere <- find.package(pkg, lib.loc = all_libraries(), quiet = TRUE)
      problems <- c(problems, sprintf("%s is not in %s%s", pkg, lib, if (length(elsewhere)) {
        sprintf(" (%s %s is in %s, which R_LIBS=%s alone does not see)", pkg,
                utils::packageVersion(pkg, lib.loc = dirname(elsewhere[[1]])),
                elsewhere[[1]], lib)
      } else ""))
      next
    }
    version <- utils::packageVersion(pkg, lib.loc = lib)
    if (pkg == "reticulate" && version < "1.41") {
      problems <- c(problems, sprintf("reticulate in %s is %s; customgrad needs >= 1.41", lib, version))
    }
    found <- c(found, sprintf("%s %s (%s)", pkg, version, path))
  }
  if (length(problems) == 0) {
    loaded <- tryCatch(loadNamespace("keras3"), error = function(e) e)
    if (inherits(loaded, "error")) {
      problems <- sprintf("keras3 in %s does not load: %s", lib, conditionMessage(loaded))
    }
  }
  if (length(problems)) return(list(ok = FALSE, text = paste(problems, collapse = "; ")))
  record <- file.path(lib, ".r-stack-repository")
  origin <- if (file.exists(record)) {
    paste("from", readLines(record, n = 1, warn = FALSE))
  } else {
    "origin not recorded (no .r-stack-repository: not installed by scripts/setup.sh)"
  }
  list(ok = TRUE, text = sprintf("%s in %s, %s", paste(found, collapse = ", "), lib, origin))
}

# every library this session could see before .libPaths(lib): to say where a missing package is
all_libraries <- function() {
  user <- strsplit(Sys.getenv(c("R_LIBS", "R_LIBS_USER")), .Platform$path.sep, fixed = TRUE)
  unique(c(unlist(user), .Library.site, .Library))
}

args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 1) stop("usage: Rscript scripts/r_stack.R <R library>")
report <- r_stack_report(args[[1]])
cat(report$text, "\n", sep = "")
quit(status = if (report$ok) 0 else 1)
