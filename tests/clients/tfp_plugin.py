"""pytest plugin for `tfp_suite.py`: runs one of TensorFlow Probability's own test modules against
the installed TFP wheel, natively or with customgrad in place of `tf.custom_gradient`.

Loaded with `-p tfp_plugin` (this folder on PYTHONPATH), so it runs before pytest imports the test
module, hence before TFP is imported: module-level `@tf.custom_gradient` decorators in TFP bind
whatever `tf.custom_gradient` is at import. Set by the runner in the environment:

* `CUSTOMGRAD_TFP_MODE`: `native` (TensorFlow's own `tf.custom_gradient`) or `customgrad`.
* `CUSTOMGRAD_TFP_SOURCE`: the TFP source checkout (the folder holding `tensorflow_probability/`).
  Only the test libraries the wheel does not ship (`hypothesis_testlib`, `bijector_test_util`,
  ...) are loaded from it; every module the wheel has comes from the wheel.
* `CUSTOMGRAD_TFP_SAMPLE` (optional): N > 1 keeps every N-th collected test (a quick sample).

What TFP's own test runner would do and pytest does not is done here: absl's flags are marked
parsed (TFP's test_util reads them), and a module with distributed tests gets its virtual devices
before any test runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

MODE = os.environ.get("CUSTOMGRAD_TFP_MODE", "native")
SOURCE = os.environ.get("CUSTOMGRAD_TFP_SOURCE", "")
MODES = ("native", "customgrad")


class SourceFallback(importlib.abc.MetaPathFinder):
    """Finds `tensorflow_probability.*` modules that the installed wheel lacks (TFP's test
    libraries) in the source checkout. It is the last finder on `sys.meta_path`, so it is asked
    only after the wheel had no such module."""

    def __init__(self, root: str, package: str = "tensorflow_probability"):
        self.root, self.package = root, package
        self.loaded: list[str] = []  # the modules taken from the source, for the report header

    def find_spec(self, name, path=None, target=None):
        """A spec for `root/<package>/.../name.py`, or None."""
        if not name.startswith(self.package + "."):
            return None
        file = os.path.join(self.root, *name.split(".")) + ".py"
        if not os.path.isfile(file):
            return None
        self.loaded.append(name)
        return importlib.util.spec_from_file_location(name, file)


def _put_customgrad_in_place() -> None:
    """Applies `customgrad.patch_tensorflow()` and checks that `tf.custom_gradient`, as TFP reads
    it (`import tensorflow.compat.v2 as tf`), is customgrad's."""
    import customgrad
    import tensorflow.compat.v2 as tf

    customgrad.patch_tensorflow()
    module = getattr(tf.custom_gradient, "__module__", "") or ""
    if not module.startswith("customgrad"):
        raise RuntimeError(f"customgrad.patch_tensorflow() left tensorflow.compat.v2."
                           f"custom_gradient = {tf.custom_gradient!r} (from {module!r})")


_FALLBACK = SourceFallback(SOURCE)


def pytest_configure(config):
    """Checks the mode, patches (customgrad mode) before TFP is imported, then imports TFP from
    the wheel and marks absl's flags parsed (TFP's test_util reads them; pytest parses none)."""
    if MODE not in MODES:
        raise ValueError(f"CUSTOMGRAD_TFP_MODE={MODE!r}: expected one of {MODES}")
    if not os.path.isdir(os.path.join(SOURCE, "tensorflow_probability")):
        raise ValueError(f"CUSTOMGRAD_TFP_SOURCE={SOURCE!r} holds no tensorflow_probability/")
    if os.environ.get("KERAS_BACKEND") != "tensorflow":
        raise ValueError("KERAS_BACKEND must be tensorflow")
    if "tensorflow_probability" in sys.modules:
        raise RuntimeError("tensorflow_probability was imported before the plugin could patch")
    sys.meta_path.append(_FALLBACK)
    if MODE == "customgrad":
        _put_customgrad_in_place()

    import tensorflow_probability
    from absl import flags

    flags.FLAGS.mark_as_parsed()
    source = os.path.realpath(SOURCE) + os.sep
    if os.path.realpath(tensorflow_probability.__file__).startswith(source):
        raise RuntimeError(f"tensorflow_probability imported from the source checkout "
                           f"({tensorflow_probability.__file__}), not the installed wheel")


def pytest_collection_modifyitems(config, items):
    """Keeps every N-th test when `CUSTOMGRAD_TFP_SAMPLE` is N > 1 (the same ones in both modes:
    collection does not depend on the mode)."""
    every = int(os.environ.get("CUSTOMGRAD_TFP_SAMPLE") or 1)
    if every > 1:
        config.hook.pytest_deselected(
            items=[item for index, item in enumerate(items) if index % every])
        items[:] = items[::every]


def pytest_terminal_summary(terminalreporter):
    """The mode, how tf.custom_gradient was patched, where TFP came from, and which of its modules
    came from the source checkout (TFP's test libraries)."""
    import tensorflow_probability

    write = terminalreporter.write_line
    patched = "customgrad.patch_tensorflow()" if MODE == "customgrad" else "none"
    write(f"tfp_suite: mode {MODE}; patch: {patched}")
    write(f"tfp_suite: tensorflow_probability {tensorflow_probability.__version__} from "
          f"{tensorflow_probability.__file__}")
    write("tfp_suite: from the TFP source: " + (", ".join(sorted(set(_FALLBACK.loaded))) or "none"))


def pytest_collection_finish(session):
    """Sets up TFP's virtual devices for a module that uses its distributed tests, as the first
    DistributedTest's setUp does under TFP's own runner (before anything initialized TensorFlow's
    context; pytest runs other tests first)."""
    lib = sys.modules.get("tensorflow_probability.python.internal.distribute_test_lib")
    if lib is not None:
        lib.distributed_set_up()
