"""mkdocs hook: the Markdown files that live elsewhere in the repository (the Python vignettes,
the benchmark results, the architecture and the changelog) join the Python site as they are,
read from their own place, never copied into docs/."""

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
ELSEWHERE = ["vignettes/*.md", "bench/RESULTS.md", "bench/RESULTS-gpu.md", "ARCHITECTURE.md",
             "CHANGELOG.md"]


def on_files(files, config):
    for pattern in ELSEWHERE:
        for path in sorted(ROOT.glob(pattern)):
            files.append(File.generated(config, path.relative_to(ROOT).as_posix(),
                                        abs_src_path=str(path)))
    return files
