"""Figures a test reports without asserting them (yet): written as JSON and shown at the end of
the pytest run.

Each report goes to ``$BIZMSG_REPORT_DIR/<name>.json`` when that variable is set (CI keeps
them), else to the test's own temporary folder; its one-line summary is printed in pytest's
terminal summary ("bizmsg reports"), so a CI log shows it without ``-s``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_lines: list[str] = []


def write_report(name: str, data: dict[str, Any], *, summary: str, fallback_dir: Path) -> Path:
    folder = Path(os.environ["BIZMSG_REPORT_DIR"]) if os.environ.get("BIZMSG_REPORT_DIR") else fallback_dir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    _lines.append(f"{summary}  [{path}]")
    print(summary)
    return path


def add_summary_line(line: str) -> None:
    _lines.append(line)


def summary_lines() -> list[str]:
    return list(_lines)
