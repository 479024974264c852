"""Runs the Python walkthroughs (vignettes/*.md) for the Python site and prints, as JSON, what
each ```python block printed and which files it wrote: scripts/mkdocs_hooks.py shows them under
the blocks. Each walkthrough runs in a namespace and a folder of its own, in one process (the
backend KERAS_BACKEND names); an error stops it, and so the site's build.

    python scripts/walkthrough_outputs.py OUT_DIR vignettes/getting-started.md ...
"""

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)  # as tests/integration/test_vignettes.py


def run(path: Path, folder: Path) -> list:
    """[{"output": what the block printed, "files": the files it wrote}] per ```python block."""
    folder.mkdir(parents=True, exist_ok=True)
    namespace = {"__name__": "__main__"}
    blocks = []
    os.chdir(folder)
    for number, code in enumerate(BLOCK.findall(path.read_text()), start=1):
        before = set(os.listdir(folder))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{path.name}, block {number}", "exec"), namespace)
        blocks.append({"output": printed.getvalue(),
                       "files": sorted(set(os.listdir(folder)) - before)})
    return blocks


def main(out: str, *paths: str) -> None:
    results = {}
    for path in [Path(p).resolve() for p in paths]:  # before run() changes the folder
        results[path.name] = run(path, Path(out).resolve() / path.stem)
    print(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])
