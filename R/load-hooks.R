# Python modules' load hooks that reticulate never ran.
#
# keras3 defers part of its set-up to reticulate load hooks (reticulate::py_register_load_hook()):
# when Python imports keras it registers as.array(), `[`, `^`, ... for the backend's tensor class
# (for torch tensors only there). reticulate runs such a hook when Python imports the module after
# reticulate has attached to Python, or at once if the module is imported when the hook is
# registered. When Python starts first and R runs inside it (rpy2), keras3 registers its hooks
# before reticulate has attached, and keras and the backend are imported already when it does:
# neither happens and the hooks wait forever (as.array() of a torch tensor then fails with
# "dim(x) <- length(x): invalid first argument"). reticulate runs "reticulate.onPyInit" hooks
# once it has attached to Python; customgrad's runs what is pending for a module already imported,
# as reticulate itself would have when the module was imported: each hook once, then dropped.

register_pending_load_hooks <- function() {
  if (reticulate::py_available()) {
    run_pending_load_hooks()
  } else {
    setHook("reticulate.onPyInit", run_pending_load_hooks)
  }
  invisible()
}

run_pending_load_hooks <- function() {
  modules <- reticulate::py_eval("list(__import__('sys').modules)")
  for (module in modules) {
    name <- paste("reticulate", module, "load", sep = "::")
    hooks <- getHook(name)
    if (!length(hooks)) next
    setHook(name, NULL, "replace")
    if (is.function(hooks)) hooks <- list(hooks)
    for (hook in hooks) {
      # reticulate reports a failing load hook as a warning and goes on; so does this
      tryCatch(hook(), error = function(e) {
        cli::cli_warn("The load hook of Python module {.val {module}} failed.", parent = e,
                      class = "customgrad_warning_load_hook")
      })
    }
  }
  invisible()
}
