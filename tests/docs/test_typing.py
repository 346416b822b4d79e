"""The typed usage file type-checks under ``mypy --strict`` and runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = Path(__file__).with_name("typing_usage.py")


def test_typing_usage_runs() -> None:
    spec = importlib.util.spec_from_file_location("typing_usage", USAGE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sync_seen, async_seen = module.main()
    assert "sms_00000000000000000001" in sync_seen  # the match statement's capture
    assert any(line.startswith("1002 False ") for line in sync_seen)
    assert any(line.startswith("0.0 429 ") for line in sync_seen)
    assert sync_seen[-1] == "page_size"
    assert async_seen[0] == "3"
    assert async_seen[-1].startswith("AsyncClient(base_url=")


def test_typing_usage_is_clean_under_mypy_strict() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null",
         str(USAGE)],
        capture_output=True, text=True, timeout=120, cwd=USAGE.parents[2],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout
