# Pre-computed vignettes. The vignettes run Python (keras and a backend), which R CMD check on
# CRAN must not start: reticulate would download and install it. As keras3's, they ship with
# their outputs computed beforehand: scripts/precompute_vignettes.R knits each
# vignettes/<name>.Rmd with a Python and writes its body, outputs and figures to
# vignettes/precomputed/<name>.md (and <name>-*.png). Each vignette's setup chunk runs the code
# where the user opted in to Python (python_available()); elsewhere it calls
# use_precomputed_vignette(), which inserts that body and ends the knitting.

# The first line of a pre-computed body: which .Rmd it came from (its md5) and how it was made.
precomputed_stamp <- function(rmd, backend) {
  sprintf("<!-- precomputed from %s (md5 %s) on the %s backend by scripts/precompute_vignettes.R; do not edit -->",
          basename(rmd), unname(tools::md5sum(rmd)), backend)
}

# The pre-computed body of vignette `rmd`, checked against the .Rmd: a body that is missing, or
# was made from another version of the .Rmd, is an error, so that a tarball never ships a
# vignette without its outputs (or with outputs of code it no longer shows).
precomputed_body <- function(rmd, call = caller_env()) {
  name <- tools::file_path_sans_ext(basename(rmd))
  path <- file.path(dirname(rmd), "precomputed", paste0(name, ".md"))
  remedy <- c(i = paste("Run {.code Rscript scripts/precompute_vignettes.R} with a Python",
                        "({.envvar NOT_CRAN}=true and {.envvar RETICULATE_PYTHON} set), or render",
                        "the vignette with that Python."))
  if (!file.exists(path)) {
    cg_abort(c("Vignette {.file {basename(rmd)}} needs its pre-computed outputs when Python is not used.",
               x = "{.path {path}} does not exist.", remedy), "vignette", call = call)
  }
  lines <- readLines(path, warn = FALSE, encoding = "UTF-8")
  stamp <- if (length(lines)) lines[[1]] else ""
  recorded <- regmatches(stamp, regexpr("(?<=md5 )[0-9a-f]{32}", stamp, perl = TRUE))
  current <- unname(tools::md5sum(rmd))
  if (!identical(recorded, current)) {
    found <- if (length(recorded)) recorded else "no stamp"
    cg_abort(c("The pre-computed outputs of vignette {.file {basename(rmd)}} are stale.",
               x = "{.path {path}} was made from md5 {.val {found}}; the .Rmd now has md5 {.val {current}}.",
               remedy), "vignette", call = call)
  }
  lines
}

# Called by a vignette's setup chunk (echo = FALSE, results = "asis") where Python is not used:
# writes the pre-computed body into the document and stops knitting the live chunks after it.
use_precomputed_vignette <- function(rmd = knitr::current_input(dir = TRUE)) {
  cat(precomputed_body(rmd), sep = "\n")
  knitr::knit_exit()
}
