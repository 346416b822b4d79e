"""The span of a campaign (``send_many``, ``send_many_iter``): one for the run, under the
caller's span, with the counts per outcome, the pace and the stop reason as attributes, and the
campaign's pauses, warnings and stop as events. Every request of the campaign carries the run
span's trace context: the campaign's handle is made for it (``NativeClient.observed``) before
Rust starts it, so nothing is done in Python per message. The pauses are recorded in Rust (on
the handle's log, a bounded number) and become events when the campaign ends.

With ``instrument(campaign_message_spans=...)``, each message (or a share of them) also gets a
span under the run's, with a CLIENT span per attempt under it: Rust records the message's times
and attempts and hands them back with its outcome, and the spans are built a batch of outcomes
at a time, as the batch arrives (the campaign's ``on_result`` is wrapped for it). Without it, no
message is traced and nothing is done per message: the counts come from the campaign's result.
A ``send_many_iter``'s generator (sync or async) is the caller's, unwrapped: it tells the
instrumentation when it begins and when it ends, with its result (``drivers.Watcher``)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import _native
from .._campaign import drivers
from .._campaign.collector import attach
from .._campaign.results import STATUSES
from . import _attempts, _calls
from ._guard import guarded, quietly
from ._telemetry import Telemetry

#: The stop reason of a ``send_many_iter`` whose caller left its loop early...
LEFT_THE_LOOP = "the caller stopped iterating"
#: ... and of one never iterated at all (its generator collected before its first ``next()``).
NEVER_ITERATED = "the caller never iterated"
#: The reason Rust gives a campaign stopped from outside (as leaving the loop stops it).
INTERRUPTED = "interrupted"

#: The outcomes whose span is an error.
_ERRORS = frozenset(("rejected", "unknown", "failed"))


class _Batches:
    """The ``on_result`` of a campaign whose messages are traced: builds the spans of each
    batch's traced messages, then calls the caller's own ``on_result`` (if any). A batch handed
    out again (after an interruption, the same list) is not traced twice (a message's trace is
    taken once)."""

    def __init__(self, on_result: Callable[[list[Any]], object] | None,
                 spans: _MessageSpans) -> None:
        self.on_result = on_result
        self.spans = spans
        self.last: list[Any] | None = None

    def __call__(self, batch: list[Any]) -> object:
        if batch is not self.last:
            self.last = batch
            # A fault here must not stop the campaign, as an exception from on_result would.
            with quietly("building the spans of a campaign's messages"):
                self.spans.record(batch)
        if self.on_result is not None:
            return self.on_result(batch)
        return None


class _MessageSpans:
    """The spans of a campaign's traced messages, built a batch of outcomes at a time."""

    def __init__(self, telemetry: Telemetry, parent: trace.Span, resource: Any,
                 log: _native.AttemptLog) -> None:
        self.telemetry = telemetry
        self.parent = parent
        self.context = trace.set_span_in_context(parent)
        self.server = _attempts.Server(resource._native.base_url)
        self.transport: str = resource._native.transport
        self.log = log

    def record(self, batch: list[Any]) -> None:
        _pauses(self.parent, self.log)
        for outcome in batch:
            traced = outcome._take_trace()
            if traced is not None:
                # One message's fault costs that message's span, not the batch's others.
                with quietly("building the span of a campaign's message"):
                    self._span(outcome, traced)

    def _span(self, outcome: Any, traced: Any) -> None:
        start, end, recipient, sender, sms_id, code, attempts = traced
        status = outcome.status
        attributes: dict[str, str | int] = {
            "messaging.system": "bizmsg", "messaging.operation.type": "send",
            "messaging.operation.name": "send", "bizmsg.recipient": recipient,
            "messaging.destination.name": sender,
            "bizmsg.outcome": status, "bizmsg.campaign.message.index": outcome.index,
        }
        key = outcome.idempotency_key
        if key is not None:
            attributes["bizmsg.idempotency_key"] = key
        if sms_id is not None:
            attributes["messaging.message.id"] = sms_id
        if code is not None:
            attributes["bizmsg.commit.code"] = code
        span = self.telemetry.tracer.start_span("send", context=self.context,
                                                kind=SpanKind.PRODUCER, attributes=attributes,
                                                start_time=start)
        try:
            if status in _ERRORS:
                error = outcome.error
                if error is not None:
                    span.record_exception(error, timestamp=end)
                    span.set_attribute("error.type", type(error).__qualname__)
                    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                else:  # pragma: no cover - every such outcome has its error
                    span.set_status(Status(StatusCode.ERROR, status))
            _attempts.record(self.telemetry, span, self.server, attempts, self.transport)
        finally:
            span.end(end_time=end)


def _pauses(span: trace.Span, log: _native.AttemptLog) -> None:
    """The campaign's pauses recorded since the last look, as events at their own times."""
    for at, seconds, reason, status, code, sender in log.take_pauses():
        attributes: dict[str, str | int | float] = {"bizmsg.pause.reason": reason}
        if seconds is not None:
            attributes["bizmsg.pause.seconds"] = seconds
        if status is not None:
            attributes["http.response.status_code"] = status
        if code is not None:
            attributes["bizmsg.commit.code"] = code
        if sender is not None:
            attributes["messaging.destination.name"] = sender
        span.add_event("bizmsg.campaign.pause", attributes, timestamp=at)


class _Started:
    """A campaign's span as it started: the span, its scope (left at once by a
    ``send_many_iter``, ``leave``), the handle the campaign runs on (and its log) and the
    options it runs with (``on_result`` wrapped, ``_Batches``, for message spans)."""

    __slots__ = ("span", "scope", "observed", "log", "options")

    def __init__(self, span: trace.Span, scope: Any, observed: Any,
                 log: _native.AttemptLog, options: dict[str, Any]) -> None:
        self.span = span
        self.scope = scope
        self.observed = observed
        self.log = log
        self.options = options

    def leave(self) -> None:
        """Gives the caller's own context back (the span stays open)."""
        scope, self.scope = self.scope, _NoScope()
        scope.__exit__(None, None, None)


@guarded("starting a campaign's span")
def _start(telemetry: Telemetry, resource: Any, name: str, options: dict[str, Any]
           ) -> _Started:
    """The campaign's span started; ``None`` if it could not be: the campaign then runs
    untraced (``_guard.py``)."""
    attributes: dict[str, str | int | float] = {
        "messaging.system": "bizmsg", "messaging.operation.type": "send",
        "messaging.operation.name": name,
    }
    if options.get("campaign_id") is not None:
        attributes["bizmsg.campaign.id"] = str(options["campaign_id"])
    pace = options.get("pace")
    rate = options.get("rate_limit")
    attributes["bizmsg.campaign.pace"] = (str(pace) if pace is not None
                                          else "rate_limit" if rate is not None else "unpaced")
    if isinstance(rate, (int, float)):
        attributes["bizmsg.campaign.rate_limit"] = float(rate)
    span = telemetry.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
    scope = trace.use_span(span, end_on_exit=False)
    scope.__enter__()
    try:
        # Messages are traced only under a span that is recorded (a sampled-out campaign's
        # messages would be too).
        share = telemetry.message_sample if span.is_recording() else 0.0
        observed, log = _calls.observed_resource(resource, record_attempts=False,
                                                 message_sample=share)
        if share > 0:
            spans = _MessageSpans(telemetry, span, resource, log)
            options = {**options, "on_result": _Batches(options.get("on_result"), spans)}
    except BaseException:
        scope.__exit__(None, None, None)
        span.end()
        raise
    # Last: counted only once nothing more can fail before the campaign.
    telemetry.in_flight.add(1)
    return _Started(span, scope, observed, log, options)


@guarded("ending a campaign's span")
def _finish(telemetry: Telemetry, started: _Started, result: Any = None,
            error: BaseException | None = None, stop_reason: str | None = None) -> None:
    """Records the campaign's end on its span and ends it. Never raises an ``Exception``
    (``_guard.py``): the campaign's result, or its own error, is what the caller gets. The
    error is recorded first: a meter that fails after must not make a failed campaign look
    successful."""
    span = started.span
    try:
        # The caller leaving a send_many_iter's loop early stops the campaign: no error of it.
        # (A campaign that had stopped on its own before keeps its reason, below.)
        left = isinstance(error, GeneratorExit)
        if error is not None and not left:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            span.set_attribute("error.type", type(error).__qualname__)
        _pauses(span, started.log)
        dropped = started.log.pauses_dropped
        if dropped:
            span.set_attribute("bizmsg.campaign.pauses_dropped", dropped)
        result = result if result is not None else getattr(error, "bulk_result", None)
        counts: dict[str, int] = {}
        if result is not None and hasattr(result, "counts"):
            counts = dict(result.counts)
            for warning in result.warnings:
                span.add_event("bizmsg.campaign.warning",
                               {"bizmsg.warning.kind": warning.kind,
                                "bizmsg.warning.message": warning.message})
            own = result.stop_reason
            stop_reason = stop_reason or (LEFT_THE_LOOP if left and own in (None, INTERRUPTED)
                                          else own)
        elif left:
            stop_reason = stop_reason or LEFT_THE_LOOP
        if stop_reason is not None:
            span.add_event("bizmsg.campaign.stop", {"bizmsg.campaign.stop_reason": stop_reason})
            span.set_attribute("bizmsg.campaign.stop_reason", stop_reason)
        for status in STATUSES:
            span.set_attribute(f"bizmsg.campaign.{status}", counts.get(status, 0))
        span.set_attribute("messaging.batch.message_count", sum(counts.values()))
        for status in STATUSES:
            if counts.get(status):
                telemetry.messages.add(counts[status], {"bizmsg.outcome": status})
    finally:
        try:
            telemetry.in_flight.add(-1)
        finally:
            started.scope.__exit__(None, None, None)
            span.end()


def _finish_keeping(telemetry: Telemetry, started: _Started, result: Any = None,
                    error: BaseException | None = None) -> None:
    """``_finish`` after a campaign that returned ``result`` or raised ``error``: a
    ``KeyboardInterrupt`` while its span ends (a second Ctrl-C landing in a slow exporter)
    carries the campaign's result on ``bulk_result``, as the campaign's own interruption
    does."""
    try:
        _finish(telemetry, started, result, error)
    except BaseException as interrupted:
        kept = result if result is not None else getattr(error, "bulk_result", None)
        if kept is not None and getattr(interrupted, "bulk_result", None) is None:
            attach(interrupted, kept)
        raise


def sync_campaign(telemetry: Telemetry, wrapped: Callable[..., Any], name: str
                  ) -> Callable[..., Any]:
    @functools.wraps(wrapped)
    def traced(self: Any, messages: Any, **options: Any) -> Any:
        started = _start(telemetry, self, name, options)
        if started is None:
            return wrapped(self, messages, **options)
        try:
            result = wrapped(started.observed, messages, **started.options)
        except BaseException as error:
            _finish_keeping(telemetry, started, error=error)
            raise
        _finish_keeping(telemetry, started, result)
        return result

    return traced


def async_campaign(telemetry: Telemetry, wrapped: Callable[..., Any], name: str
                   ) -> Callable[..., Any]:
    @functools.wraps(wrapped)
    async def traced(self: Any, messages: Any, **options: Any) -> Any:
        started = _start(telemetry, self, name, options)
        if started is None:
            return await wrapped(self, messages, **options)
        try:
            result = await wrapped(started.observed, messages, **started.options)
        except BaseException as error:
            _finish_keeping(telemetry, started, error=error)
            raise
        _finish_keeping(telemetry, started, result)
        return result

    return traced


class _Watcher:
    """What a traced ``send_many_iter``'s generator tells (``drivers.Watcher``): its end ends
    the campaign's span, once. A generator never iterated never runs, so never tells: its span
    is ended when it is collected (``dropped``, called by a ``weakref.finalize``)."""

    __slots__ = ("telemetry", "started", "began_at_all", "done", "finalizer")

    def __init__(self, telemetry: Telemetry, started: _Started) -> None:
        self.telemetry = telemetry
        self.started = started
        self.began_at_all = False
        self.done = False
        self.finalizer: weakref.finalize[Any, Any] | None = None

    def began(self) -> None:
        self.began_at_all = True

    def ended(self, result: Any, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        if self.finalizer is not None:
            # Nothing of the campaign (its span, handle, options) is kept for the generator
            # object's lifetime once its span has ended.
            self.finalizer.detach()
        _finish(self.telemetry, self.started, result, error)

    def dropped(self) -> None:
        # A generator that began ends its span itself when it is closed: a sync one is closed
        # right after this callback when it is collected; an async one's ``aclose()`` is left to
        # its event loop (asyncio schedules it; a loop closed without ``shutdown_asyncgens()``
        # never runs it, and the span is then never ended, as for any async generator's own
        # clean-up).
        if not self.began_at_all and not self.done:
            self.done = True
            _finish(self.telemetry, self.started, stop_reason=NEVER_ITERATED)


def campaign_iter(telemetry: Telemetry, wrapped: Callable[..., Any], name: str
                  ) -> Callable[..., Any]:
    """``send_many_iter``, sync or async: returns the campaign's own generator, told of its
    watcher through ``drivers.WATCHER`` (so that whatever else wraps the method still runs)."""
    @functools.wraps(wrapped)
    def traced(self: Any, messages: Any, **options: Any) -> Any:
        started = _start(telemetry, self, name, options)
        if started is None:
            return wrapped(self, messages, **options)
        watcher = _Watcher(telemetry, started)
        # The span is current while the campaign starts (its requests take the context then);
        # the caller's own context comes back for the loop over the outcomes.
        watching = drivers.WATCHER.set(watcher)
        try:
            outcomes = wrapped(started.observed, messages, **started.options)
        except BaseException as error:
            watcher.ended(None, error)
            raise
        finally:
            drivers.WATCHER.reset(watching)
            started.leave()
        watcher.finalizer = weakref.finalize(outcomes, watcher.dropped)
        watcher.finalizer.atexit = False
        return outcomes

    return traced


class _NoScope:
    """The scope of a span already left (a campaign iterated outside its start)."""

    def __exit__(self, *_: object) -> None:
        return None
