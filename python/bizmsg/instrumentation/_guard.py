"""The instrumentation never changes what a call does: a fault of its own, of the
OpenTelemetry SDK or of a user's span processor, exporter or propagator (an ``on_start`` or
``on_end`` that raises) is logged as a WARNING on the ``bizmsg`` logger and the call goes on,
untraced if its span could not be started, and returns its result or raises its own error as
it would have. A campaign whose 300 messages were all sent must not raise a processor's error
with no result, nor a send raise after the service committed it."""

from __future__ import annotations

import logging
from types import TracebackType

_log = logging.getLogger("bizmsg")


class quietly:
    """``with quietly("what was being done"):``: an ``Exception`` raised inside is logged, not
    raised (a ``KeyboardInterrupt`` or ``SystemExit`` still is)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if error is None or not isinstance(error, Exception):
            return False
        _log.warning("bizmsg.instrumentation: %s failed; the call goes on as it would "
                     "untraced", self.what, exc_info=error)
        return True
