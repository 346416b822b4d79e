"""Logging: the Rust core logs to ``logging.getLogger("bizmsg")``.

One DEBUG line per attempt (method, path, status, time, attempt, request id) and a WARNING when
a retry is scheduled. Phone numbers are masked and template parameters and tokens are never
logged. ``BIZMSG_LOG=debug`` (or ``info``) installs a stderr handler at import.
"""

from __future__ import annotations

import logging
import os

from . import _native

logger = logging.getLogger("bizmsg")
# A library logs and leaves handling to the application: without any handler, Python's
# last-resort handler would print our warnings to stderr.
logger.addHandler(logging.NullHandler())


def refresh_logging() -> None:
    """Makes a level change of the ``bizmsg`` logger take effect at once. (Levels are cached
    on the Rust side so that a disabled log line costs nothing; new clients refresh too.)"""
    _native.refresh_logging()


def configure_from_env() -> None:
    level = os.environ.get("BIZMSG_LOG", "").strip().upper()
    if not level:
        return
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    refresh_logging()
