"""Logging: the Rust core logs to ``logging.getLogger("bizmsg")``.

One DEBUG line per attempt (method, path, status, time, attempt, request id) and a WARNING when
a retry is scheduled; a campaign logs an INFO line at its start and at its end. A campaign's
tier warnings are logged once a day per process. Phone numbers are masked and template
parameters and tokens are never logged. ``BIZMSG_LOG=debug`` (or ``info``) installs a stderr
handler at import.

Each record carries its facts as attributes of the ``LogRecord`` (``request_id``, ``attempt``,
``status``, ``idempotency_key``, ``campaign_id``, counts...: ``FIELDS``), as ``extra=`` would
put them, so a JSON formatter writes them as fields. The Rust side hands them over as text
(pyo3-log's ``kv``); ``_TypedFields`` gives numbers, booleans and ``None`` back their types.

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

#: The fields bizmsg's records may carry, by type (docs/observability.md lists what each means).
_INTEGER_FIELDS = frozenset(
    {"status", "attempt", "retry", "max_retries", "concurrency", "total", "sent", "rejected",
     "unknown", "failed", "skipped"}
)
_FLOAT_FIELDS = frozenset({"duration_ms", "delay_seconds", "duration_seconds", "rate_limit"})
_BOOLEAN_FIELDS = frozenset({"journal", "outage"})
_TEXT_FIELDS = frozenset(
    {"method", "path", "request_id", "idempotency_key", "campaign_id", "run_id", "pace", "to",
     "code", "account", "store", "stop_reason", "error"}
)
FIELDS = _INTEGER_FIELDS | _FLOAT_FIELDS | _BOOLEAN_FIELDS | _TEXT_FIELDS


def _typed(name: str, text: str) -> object:
    if text == "None":
        return None
    try:
        if name in _INTEGER_FIELDS:
            return int(text)
        if name in _FLOAT_FIELDS:
            return float(text)
    except ValueError:  # pragma: no cover - the Rust side writes these fields as numbers
        return text
    if name in _BOOLEAN_FIELDS:
        return text == "true"
    return text


class _TypedFields:
    """A filter on the ``bizmsg`` logger: the fields of a record from Rust, typed (the Rust
    side writes every field as text; an absent value, such as the request id of an attempt
    that got no answer, as ``None``)."""

    def __call__(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        for name in FIELDS.intersection(fields):
            value = fields[name]
            if isinstance(value, str):
                fields[name] = _typed(name, value)
        return True


_typed_fields = _TypedFields()


def place_last() -> None:
    """Puts the once-a-day filter after every other filter of the ``bizmsg`` logger (the
    notebook's is added when the first client is made in a kernel)."""
    import logging

    logger = logging.getLogger("bizmsg")
    logger.removeFilter(_once_a_day)
    logger.addFilter(_once_a_day)
    logger.addFilter(_typed_fields)  # once: addFilter ignores a filter already there


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
