"""The instrumentation never changes what a call does. A fault of its own, of the OpenTelemetry
SDK, or of a user's span processor, exporter, meter or propagator (an ``on_start``, ``on_end``
or ``inject`` that raises) is logged on the ``bizmsg`` logger and the call goes on unchanged:
it returns its result, or raises its own error, as it would have. A campaign whose 300
messages were all sent must not raise a processor's error with no result, nor a send raise
after the service committed it.

Such a fault usually repeats on every call (a broken exporter), so each kind (what was being
done, and the exception's type) is logged once as a WARNING with its traceback, and later at
DEBUG: a campaign of a million traced messages must not write a million tracebacks."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import ParamSpec, TypeVar

_log = logging.getLogger("bizmsg")

P = ParamSpec("P")
R = TypeVar("R")

#: The kinds of fault already logged as a WARNING (bounded: past it, all go to DEBUG).
_warned: set[tuple[str, type[BaseException]]] = set()
_MAX_KINDS = 256
_lock = threading.Lock()


def _report(what: str, error: Exception) -> None:
    kind = (what, type(error))
    with _lock:
        first = kind not in _warned and len(_warned) < _MAX_KINDS
        if first:
            _warned.add(kind)
    level = logging.WARNING if first else logging.DEBUG
    later = " (later faults of this kind are logged at DEBUG)" if first else ""
    _log.log(level, "bizmsg.instrumentation: %s failed; the call goes on unchanged%s", what,
             later, exc_info=error)


class quietly:
    """``with quietly("what was being done"):``: an ``Exception`` raised inside is logged
    (``_report``), not raised. A ``KeyboardInterrupt`` or ``SystemExit`` still is. ``what`` is
    a fixed text: it names the kind of fault."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if error is None or not isinstance(error, Exception):
            return False
        _report(self.what, error)
        return True


def guarded(what: str) -> Callable[[Callable[P, R]], Callable[P, R | None]]:
    """A function that returns ``None`` where it would have raised an ``Exception``, logged as
    ``quietly`` logs it."""
    def decorate(function: Callable[P, R]) -> Callable[P, R | None]:
        @functools.wraps(function)
        def never_raising(*args: P.args, **kwargs: P.kwargs) -> R | None:
            with quietly(what):
                return function(*args, **kwargs)
            return None

        return never_raising

    return decorate
