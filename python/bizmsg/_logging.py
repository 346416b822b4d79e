"""Logging: the Rust core logs to ``logging.getLogger("bizmsg")``.

One DEBUG line per attempt (method, path, status, time, attempt, request id) and a WARNING when
a retry is scheduled. Phone numbers are masked and template parameters and tokens are never
logged. ``BIZMSG_LOG=debug`` (or ``info``) installs a stderr handler at import.

Nothing is logged before a client (or a sandbox) exists, so the bridge from Rust's log records
to Python's ``logging`` is installed when the first one is made: ``import bizmsg`` does not
import ``logging`` (it would cost a third of the import's time).
"""

from __future__ import annotations

import os

from . import _native

_installed = False


def ensure_installed() -> None:
    """Installs the bridge and the ``bizmsg`` logger's NullHandler, once."""
    global _installed
    if _installed:
        return
    import logging

    # A library logs and leaves handling to the application: without any handler, Python's
    # last-resort handler would print our warnings to stderr.
    logging.getLogger("bizmsg").addHandler(logging.NullHandler())
    _native.install_logging()
    _installed = True


def refresh_logging() -> None:
    """Makes a level change of the ``bizmsg`` logger take effect at once. (Levels are cached
    on the Rust side so that a disabled log line costs nothing; new clients refresh too.)"""
    _native.refresh_logging()


def configure_from_env() -> None:
    level = os.environ.get("BIZMSG_LOG", "").strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        return
    import logging

    ensure_installed()
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger = logging.getLogger("bizmsg")
    logger.addHandler(handler)
    logger.setLevel(level)
    refresh_logging()
