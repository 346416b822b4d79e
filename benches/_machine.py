"""What the numbers were measured on: hardware, software versions, and how busy the machine was
(a load average well above zero at the start means another job shared the cores)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("bizmsg", "pyreqwest", "aiohttp", "httpx", "requests", "matplotlib")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_revision(repo: Path) -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def machine_info(repo: Path) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "git": git_revision(repo),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        # Read by bizmsg's runtime: a run with it set is not the default configuration.
        "BIZMSG_WORKER_THREADS": os.environ.get("BIZMSG_WORKER_THREADS"),
    }
