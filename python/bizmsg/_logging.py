"""Logging: the Rust core logs to ``logging.getLogger("bizmsg")``.

One DEBUG line per attempt (method, path, status, time, attempt, request id) and a WARNING when
a retry is scheduled. A campaign's tier warnings are logged once a day per process. Phone numbers are masked and template parameters and tokens are never
logged. ``BIZMSG_LOG=debug`` (or ``info``) installs a stderr handler at import.

Nothing is logged before a client (or a sandbox) exists, so the bridge from Rust's log records
to Python's ``logging`` is installed when the first one is made: ``import bizmsg`` does not
import ``logging`` (it would cost a third of the import's time).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from . import _native

if TYPE_CHECKING:
    import logging

_installed = False

#: How a campaign's tier warnings begin and what they name (``campaign/senders.rs``).
_CAMPAIGN = "campaign: "
_TIER = "messaging tier"


class _TierWarningsOncePerDay:
    """A filter on the ``bizmsg`` logger: each tier warning (the same account, the same
    warning) is logged once a day (UTC) per process, however many campaigns pass the tier;
    every campaign's result still lists it (``BulkResult.warnings``). Four workers running 30
    campaigns logged the same warning 23 times. Placed after the notebook's filter
    (``place_last``), so that a warning a notebook holds back counts only once it is logged."""

    def __init__(self) -> None:
        self.logged: dict[str, tuple[int, int, int]] = {}

    def __call__(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # pragma: no cover - not ours to judge
            return True
        if not text.startswith(_CAMPAIGN) or _TIER not in text:
            return True
        day = time.gmtime(record.created)[:3]
        if self.logged.get(text) == day:
            return False
        self.logged[text] = day
        return True


_once_a_day = _TierWarningsOncePerDay()


def place_last() -> None:
    """Puts the once-a-day filter after every other filter of the ``bizmsg`` logger (the
    notebook's is added when the first client is made in a kernel)."""
    import logging

    logger = logging.getLogger("bizmsg")
    logger.removeFilter(_once_a_day)
    logger.addFilter(_once_a_day)


def forget_logged() -> None:
    """Forgets which tier warnings were logged today (for tests that read the log)."""
    _once_a_day.logged.clear()


def ensure_installed() -> None:
    """Installs the bridge and the ``bizmsg`` logger's NullHandler, once."""
    global _installed
    if _installed:
        return
    import logging

    # A library logs and leaves handling to the application: without any handler, Python's
    # last-resort handler would print our warnings to stderr.
    logging.getLogger("bizmsg").addHandler(logging.NullHandler())
    place_last()
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
