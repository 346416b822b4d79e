"""MkDocs hooks (mkdocs.yml ``hooks:``): files outside docs/ that the site publishes.

- ``examples/quickstart.ipynb`` is published as ``downloads/quickstart.ipynb``, so the Notebooks
  page can link it (a link out of docs/ would fail the strict build);
- ``benches/results/latest.md`` (a page of the site: the latest benchmark figures) and its chart
  ``latest.png``, as written by ``python benches/run.py``, under ``benchmarks/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

#: (file in the repository, where the site publishes it)
PUBLISHED = (
    ("examples/quickstart.ipynb", "downloads/quickstart.ipynb"),
    ("benches/results/latest.md", "benchmarks/latest.md"),
    ("benches/results/latest.png", "benchmarks/latest.png"),
)


def on_files(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).parent
    for source, uri in PUBLISHED:
        path = root / source
        if not path.is_file():
            raise FileNotFoundError(f"docs: {source} is published by the site but is missing")
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
