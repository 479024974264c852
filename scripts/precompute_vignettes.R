# Knits the R vignettes with a Python and records their bodies, outputs and figures in
# vignettes/precomputed/ (<name>.md, <name>-*.png). A vignette knitted where Python is not used
# (R CMD check on CRAN, R CMD build without a Python) shows these instead of running its code,
# and stops with an error if they are missing or were made from another version of its .Rmd
# (R/vignettes.R). Run it from the repository root after changing a vignette or the package,
# with the package installed (scripts/setup.sh, or R CMD INSTALL .) and a Python opted in:
#
#   NOT_CRAN=true RETICULATE_PYTHON=$PWD/.venv/bin/python KERAS_BACKEND=jax R_LIBS=.Rlib \
#     Rscript scripts/precompute_vignettes.R [getting-started ...]
#
# With no names it knits every vignettes/*.Rmd. Commit what it writes.

precompute <- function(rmd, out_dir) {
  name <- tools::file_path_sans_ext(basename(rmd))
  work <- tempfile(paste0("precompute-", name, "-"))
  dir.create(work)
  on.exit(unlink(work, recursive = TRUE), add = TRUE)
  file.copy(rmd, work)
  # knitr writes figures relative to the working directory
  owd <- setwd(work)
  on.exit(setwd(owd), add = TRUE, after = FALSE)
  t0 <- Sys.time()
  knitr::opts_chunk$set(fig.path = paste0("precomputed/", name, "-"), dev = "png", dpi = 96)
  md <- knitr::knit(file.path(work, basename(rmd)), output = file.path(work, paste0(name, ".md")),
                    envir = new.env(), quiet = TRUE)
  lines <- readLines(md, encoding = "UTF-8")
  # the body: what follows the YAML header (the vignette's own header stays in its .Rmd)
  fences <- which(lines == "---")
  if (length(fences) < 2 || fences[[1]] != 1) {
    stop("precompute(): expected ", basename(rmd), " to start with a YAML header between two ",
         "'---' lines; found its first line ", encodeString(lines[[1]], quote = '"'))
  }
  body <- lines[-seq_len(fences[[2]])]
  body <- body[cumsum(nzchar(body)) > 0]  # no leading blank lines
  if (any(grepl("^#> Error", body))) {
    stop("precompute(): knitting ", basename(rmd), " printed an error:\n",
         paste(grep("^#> Error", body, value = TRUE), collapse = "\n"))
  }

  old <- list.files(out_dir, paste0("^", name, "(\\.md|-.*\\.png)$"), full.names = TRUE)
  unlink(old)
  figures <- list.files(file.path(work, "precomputed"), full.names = TRUE)
  file.copy(figures, out_dir)
  stamp <- customgrad:::precomputed_stamp(rmd, keras3::config_backend())
  writeLines(c(stamp, "", body), file.path(out_dir, paste0(name, ".md")), useBytes = TRUE)
  cat(sprintf("%s: %d lines, %d figure(s), %.1f s\n", name, length(body), length(figures),
              as.numeric(difftime(Sys.time(), t0, units = "secs"))))
}

main <- function(names) {
  if (!file.exists("DESCRIPTION") || !dir.exists("vignettes")) {
    stop("precompute_vignettes.R: run it from the repository root; the working directory is ",
         getwd())
  }
  suppressPackageStartupMessages(library(customgrad))
  if (!customgrad:::python_available()) {
    stop("precompute_vignettes.R needs a Python with keras and customgrad, opted in: set ",
         "NOT_CRAN=true and RETICULATE_PYTHON (e.g. .venv/bin/python); NOT_CRAN is '",
         Sys.getenv("NOT_CRAN"), "', RETICULATE_PYTHON is '", Sys.getenv("RETICULATE_PYTHON"), "'")
  }
  rmds <- if (length(names)) file.path("vignettes", paste0(names, ".Rmd")) else
    Sys.glob("vignettes/*.Rmd")
  missing <- rmds[!file.exists(rmds)]
  if (length(missing)) stop("precompute_vignettes.R: no such vignette: ", toString(missing))
  out_dir <- file.path("vignettes", "precomputed")
  dir.create(out_dir, showWarnings = FALSE)
  out_dir <- normalizePath(out_dir, mustWork = TRUE)
  for (rmd in normalizePath(rmds, mustWork = TRUE)) precompute(rmd, out_dir)
}

main(commandArgs(trailingOnly = TRUE))
