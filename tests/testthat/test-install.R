# install_customgrad(): the plan it runs (dry run: the network install is not part of the test
# suite), the Python package shipped inside the R package, and discovery of the environment.

test_that("the R package ships its Python side: a wheel of the same version and the pins", {
  dist <- customgrad:::shipped_python()
  expect_true(file.exists(dist$wheel))
  version <- sub("^customgrad-([^-]+)-.*$", "\\1", basename(dist$wheel))
  expect_identical(version, as.character(utils::packageVersion("customgrad")))
  files <- utils::unzip(dist$wheel, list = TRUE)$Name
  expect_true(all(c("customgrad/__init__.py", "customgrad/layers.py", "customgrad/_core.py") %in% files))
})

test_that("install_customgrad() plans a virtualenv with keras, the backend and the shipped wheel", {
  dist <- customgrad:::shipped_python()
  pins <- readLines(dist$requirements)
  keras_pin <- grep("^keras==", pins, value = TRUE)
  expect_length(keras_pin, 1L)
  expected <- list(jax = c("jax==", "jaxlib=="), tensorflow = "tensorflow-cpu==", torch = "torch==")
  for (backend in names(expected)) {
    root <- file.path(tempdir(), "envs")
    plan <- install_customgrad(backend, envname = file.path(root, "cg"), python = "python3",
                               dry_run = TRUE)
    expect_identical(plan$path, file.path(root, "cg"))
    expect_identical(plan$python, file.path(root, "cg", "bin", "python"))
    expect_true(keras_pin %in% plan$packages)
    for (prefix in expected[[backend]]) {
      pin <- grep(paste0("^", prefix), pins, value = TRUE)
      expect_length(pin, 1L)
      expect_true(pin %in% plan$packages, label = paste(backend, "installs", pin))
    }
    other <- setdiff(c("jax==", "tensorflow-cpu==", "torch=="), expected[[backend]])
    for (prefix in other) expect_false(any(startsWith(plan$packages, prefix)))
    expect_true(dist$wheel %in% plan$packages)
    expect_identical(plan$commands[[1]], c("python3", "-m", "venv", file.path(root, "cg")))
    expect_identical(plan$commands[[2]][1:4], c(plan$python, "-m", "pip", "install"))
    # the wheel reinstalled by itself: a rebuilt wheel of an unchanged version replaces the old
    expect_identical(plan$commands[[3]][1:4], c(plan$python, "-m", "pip", "install"))
    expect_true(all(c("--force-reinstall", "--no-deps", dist$wheel) %in% plan$commands[[3]]))
    expect_false(any(startsWith(plan$commands[[3]], "keras==")))
    expect_false(dir.exists(file.path(root, "cg")))  # a dry run creates nothing
  }
  plan <- install_customgrad("jax", dry_run = TRUE)
  expect_identical(plan$path, file.path(path.expand(reticulate::virtualenv_root()), "r-customgrad"))
  plan <- install_customgrad("torch", dry_run = TRUE, pip_options = c("--no-index"))
  expect_true("--no-index" %in% plan$commands[[2]])
  expect_true("https://download.pytorch.org/whl/cpu" %in% plan$commands[[2]])
})

test_that("install_customgrad() rejects a bad backend or envname with classed errors", {
  expect_snapshot(error = TRUE, {
    install_customgrad("numpy", dry_run = TRUE)
    install_customgrad("jax", envname = 3, dry_run = TRUE)
  })
  expect_error(install_customgrad("numpy", dry_run = TRUE), class = "customgrad_error_argument")
})

test_that("install_customgrad() says how to use what it installed: environment and backend", {
  plan <- install_customgrad("torch", dry_run = TRUE)
  expect_identical(plan$setup, c('reticulate::use_virtualenv("r-customgrad")',
                                 'keras3::use_backend("torch")', "library(customgrad)"))
  # the help page shows the same lines (for the default environment and backend)
  page <- paste(utils::capture.output(tools::Rd2txt(
    tools::Rd_db("customgrad")[["install_customgrad.Rd"]], out = stdout())), collapse = "\n")
  default <- install_customgrad(dry_run = TRUE)$setup
  expect_match(page, paste(default, collapse = "\n     "), fixed = TRUE)
})

test_that("install_customgrad() runs pip without R's LD_LIBRARY_PATH and prints the set-up", {
  skip_on_os("windows")
  # a stand-in for python3: it records the LD_LIBRARY_PATH it sees, and `-m venv DIR` makes
  # DIR/bin/python a copy of itself, so the second command (pip) runs it too
  dir <- tempfile("cg-install-")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  fake <- file.path(dir, "python3")
  log <- file.path(dir, "seen")
  writeLines(c(
    "#!/bin/sh",
    sprintf("echo \"${LD_LIBRARY_PATH-unset} $*\" >> '%s'", log),
    "if [ \"$1\" = -m ] && [ \"$2\" = venv ]; then mkdir -p \"$3/bin\" && cp \"$0\" \"$3/bin/python\"; fi"
  ), fake)
  Sys.chmod(fake, "755")
  old <- Sys.getenv("LD_LIBRARY_PATH", unset = NA)
  Sys.setenv(LD_LIBRARY_PATH = "/usr/lib/R/lib")
  on.exit(if (is.na(old)) Sys.unsetenv("LD_LIBRARY_PATH") else Sys.setenv(LD_LIBRARY_PATH = old),
          add = TRUE)
  env <- file.path(dir, "env")
  messages <- character()
  plan <- withCallingHandlers(
    install_customgrad("jax", envname = env, python = fake),
    message = function(m) {
      messages <<- c(messages, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  seen <- readLines(log)
  expect_length(seen, 3L)  # the venv, the packages, the wheel again by itself
  expect_true(all(startsWith(seen, "unset ")))
  expect_match(seen[[2]], "-m pip install", fixed = TRUE)
  expect_match(seen[[3]], "--force-reinstall --no-deps", fixed = TRUE)
  expect_identical(Sys.getenv("LD_LIBRARY_PATH"), "/usr/lib/R/lib")  # R's own is back
  done <- paste(messages[-(1:3)], collapse = "")
  for (line in plan$setup) expect_match(done, line, fixed = TRUE)
  expect_match(done, "before anything starts Python", fixed = TRUE)
})
