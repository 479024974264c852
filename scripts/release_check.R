# The checks a CRAN release needs that R CMD check does not make (RELEASING.md runs it):
#   R_LIBS=.Rlib Rscript scripts/release_check.R [package root, default .]
# - the maintainer (the "cre" in Authors@R) is a person with an address that receives CRAN's
#   confirmation mail, not the placeholder at example.org this repository carries until a person
#   fills it in;
# - NEWS.md's first heading is this version, released: "# customgrad <Version>";
# - every vignette's pre-computed outputs (vignettes/precomputed) were made from its current .Rmd
#   (R CMD build would stop on a stale one; this says so before building).
# Prints every problem and exits with status 1 if there is one.

# Addresses that cannot receive mail: the domains RFC 2606 reserves for examples and tests.
placeholder_address <- function(email) {
  domain <- tolower(sub("^.*@", "", email))
  grepl("(^|\\.)example\\.(org|com|net)$|\\.(example|test|invalid|localhost)$|^localhost$", domain)
}

check_maintainer <- function(desc) {
  authors <- eval(parse(text = desc[["Authors@R"]]))
  maintainer <- Filter(function(p) "cre" %in% p$role, authors)
  if (length(maintainer) != 1L) {
    return(sprintf("DESCRIPTION: Authors@R must have one maintainer (role \"cre\"); it has %d",
                   length(maintainer)))
  }
  m <- maintainer[[1]]
  if (is.null(m$email) || placeholder_address(m$email)) {
    return(sprintf(paste(
      "DESCRIPTION: the maintainer is the placeholder %s; CRAN mails the maintainer to confirm",
      "the submission: replace the \"cre\" person in Authors@R with the person who submits",
      "(RELEASING.md, CRAN)"), format(m, include = c("given", "family", "email"))))
  }
  character()
}

check_news <- function(root, version) {
  news <- file.path(root, "NEWS.md")
  if (!file.exists(news)) return("NEWS.md: missing")
  first <- grep("^# ", readLines(news, warn = FALSE), value = TRUE)[1]
  wanted <- paste("# customgrad", version)
  if (!identical(first, wanted)) {
    return(sprintf("NEWS.md: the first heading must be \"%s\" for this release; it is \"%s\"",
                   wanted, first))
  }
  character()
}

check_vignettes <- function(root) {
  problems <- character()
  for (rmd in Sys.glob(file.path(root, "vignettes", "*.Rmd"))) {
    found <- tryCatch({
      customgrad:::precomputed_body(rmd)
      NULL
    }, customgrad_error_vignette = function(e) conditionMessage(e))
    if (!is.null(found)) problems <- c(problems, paste0("vignettes/", basename(rmd), ": ", found))
  }
  problems
}

main <- function(root) {
  desc <- read.dcf(file.path(root, "DESCRIPTION"))[1, ]
  problems <- c(check_maintainer(desc), check_news(root, desc[["Version"]]), check_vignettes(root))
  if (length(problems)) {
    cat("release_check.R: not ready for CRAN:\n", paste0("- ", problems, "\n"), sep = "")
    quit(status = 1)
  }
  cat("release_check.R: customgrad", desc[["Version"]], "is ready for CRAN\n")
}

args <- commandArgs(trailingOnly = TRUE)
main(if (length(args)) args[[1]] else ".")
