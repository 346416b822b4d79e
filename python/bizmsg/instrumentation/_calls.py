"""The spans of single calls: a send (``messages.send``, ``send_template``), a page
(``list``), a page of ``iter()``. Each call gets one span for what it did (not a second HTTP
CLIENT span: the attempts under it are those, ``_attempts.py``), runs on a handle of the client
whose requests carry the span's trace context (``NativeClient.observed``), and records the
outcome. Only the instrumented methods do any of this: ``instrument()`` puts them in place of
the plain ones and ``uninstrument()`` puts those back."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import _native
from ..errors import SendOutcomeUnknownError, SendRejectedError
from . import _attempts
from ._guard import guarded, quietly
from ._telemetry import Telemetry

R = TypeVar("R")


def _headers() -> dict[str, str]:
    """The current context's trace headers, as every configured propagator writes them; none
    if a propagator fails (the call is traced all the same, its requests carry no context)."""
    carrier: dict[str, str] = {}
    with quietly("injecting the trace context (a propagator)"):
        propagate.inject(carrier)
        return carrier
    return {}


def _log_ids() -> tuple[str, str, bool] | None:
    """The current span's ids, for the records Rust logs while the call runs (on whatever
    thread: ``_logs.py`` reads them there), as ``opentelemetry-instrumentation-logging`` writes
    them."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return (format(context.trace_id, "032x"), format(context.span_id, "016x"),
            context.trace_flags.sampled)


def observed_resource(resource: Any, record_attempts: bool, message_sample: float = 0.0
                      ) -> tuple[Any, _native.AttemptLog]:
    """A copy of ``resource`` on a handle whose requests carry the current trace context, and
    the log its attempts (``record_attempts``), a campaign's pauses and the traces of a
    campaign's messages (a share of them, ``message_sample``) are recorded in."""
    native, log = resource._native.observed(headers_=_headers(),
                                            record_attempts=record_attempts,
                                            message_sample=message_sample,
                                            log_ids=_log_ids())
    copy: Any = object.__new__(resource.__class__)
    copy._native = native
    return copy, log


def _server(resource: Any) -> _attempts.Server:
    return _attempts.Server(resource._native.base_url)


def _send_attributes(kwargs: dict[str, Any]) -> dict[str, str]:
    attributes = {"messaging.system": "bizmsg", "messaging.operation.type": "send",
                  "messaging.operation.name": "send"}
    to = kwargs.get("to")
    if isinstance(to, str):
        attributes["bizmsg.recipient"] = _native.mask_phone(to)
    sender = kwargs.get("from_")
    if isinstance(sender, str):
        attributes["messaging.destination.name"] = _native.mask_phone(sender)
    return attributes


def _sent(span: trace.Span, result: Any) -> None:
    sms_id: object
    code: object
    key: str | None = None
    if isinstance(result, dict):  # raw=True: the JSON as received
        raw: dict[str, object] = result  # pyright: ignore[reportUnknownVariableType]
        sms_id, code = raw.get("smsId"), raw.get("code")
    else:
        sms_id, code = result.sms_id, result.code
        key = result.meta.idempotency_key if result.meta is not None else None
    if sms_id is not None:
        span.set_attribute("messaging.message.id", str(sms_id))
    if code is not None:
        span.set_attribute("bizmsg.commit.code", str(code))
    if key is not None:
        span.set_attribute("bizmsg.idempotency_key", key)


def _failed(telemetry: Telemetry, span: trace.Span, error: BaseException) -> str:
    """Records ``error`` on the span; returns the message's outcome for the counter."""
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    span.set_attribute("error.type", type(error).__qualname__)
    if isinstance(error, SendRejectedError):
        if error.code is not None:
            span.set_attribute("bizmsg.commit.code", str(error.code))
        meta = error.result.meta
        if meta is not None and meta.idempotency_key is not None:
            span.set_attribute("bizmsg.idempotency_key", meta.idempotency_key)
        return "rejected"
    if isinstance(error, SendOutcomeUnknownError):
        span.set_attribute("bizmsg.idempotency_key", error.idempotency_key)
        return "unknown"
    return "failed"


class _Call:
    """One traced call: its span, the handle it runs on, and what it records at the end."""

    def __init__(self, telemetry: Telemetry, resource: Any, name: str,
                 attributes: dict[str, str], is_send: bool) -> None:
        self.telemetry = telemetry
        self.is_send = is_send
        self.server = _server(resource)
        self.transport = resource._native.transport
        kind = SpanKind.PRODUCER if is_send else SpanKind.INTERNAL
        self.span = telemetry.tracer.start_span(name, kind=kind, attributes=attributes)
        self.scope = trace.use_span(self.span, end_on_exit=False)
        self.scope.__enter__()
        try:
            self.resource, self.log = observed_resource(resource, record_attempts=True)
        except BaseException:
            self.scope.__exit__(None, None, None)
            self.span.end()
            raise
        # Last: counted only once nothing more can fail before the call.
        telemetry.in_flight.add(1)

    @classmethod
    @guarded("starting a call's span")
    def begin(cls, telemetry: Telemetry, resource: Any, name: str, is_send: bool,
              kwargs: dict[str, Any]) -> _Call:
        """The call's span started; ``None`` if it could not be (the call runs untraced:
        ``_guard.py``)."""
        attributes = _send_attributes(kwargs) if is_send else {"bizmsg.listing": name}
        return cls(telemetry, resource, name, attributes, is_send)

    def done(self, result: Any = None, error: BaseException | None = None) -> None:
        with quietly("ending a call's span"):
            try:
                outcome = "sent"
                if error is not None:
                    outcome = _failed(self.telemetry, self.span, error)
                elif self.is_send:
                    _sent(self.span, result)
                _attempts.record(self.telemetry, self.span, self.server, self.log.take(),
                                 self.transport)
                if self.is_send:
                    self.telemetry.messages.add(1, {"bizmsg.outcome": outcome})
            finally:
                try:
                    self.telemetry.in_flight.add(-1)
                finally:
                    self.scope.__exit__(None, None, None)
                    self.span.end()


def sync_call(telemetry: Telemetry, wrapped: Callable[..., R], name: str, is_send: bool
              ) -> Callable[..., R]:
    @functools.wraps(wrapped)
    def traced(self: Any, *args: Any, **kwargs: Any) -> R:
        call = _Call.begin(telemetry, self, name, is_send, kwargs)
        if call is None:
            return wrapped(self, *args, **kwargs)
        try:
            result = wrapped(call.resource, *args, **kwargs)
        except BaseException as error:
            call.done(error=error)
            raise
        call.done(result)
        return result

    return traced


def async_call(telemetry: Telemetry, wrapped: Callable[..., Any], name: str, is_send: bool
               ) -> Callable[..., Any]:
    @functools.wraps(wrapped)
    async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        call = _Call.begin(telemetry, self, name, is_send, kwargs)
        if call is None:
            return await wrapped(self, *args, **kwargs)
        try:
            result = await wrapped(call.resource, *args, **kwargs)
        except BaseException as error:
            call.done(error=error)
            raise
        call.done(result)
        return result

    return traced


@guarded("recording the spans of a listing's pages")
def _page_spans(telemetry: Telemetry, name: str, server: _attempts.Server, transport: str,
                parent: trace.Span | None, log: _native.AttemptLog) -> None:
    """A span for each page whose attempts the stream has made since the last look, with those
    attempts under it (pages are read ahead by Rust, so several may be found at once: a page
    starts at an attempt that is no resend). Never raises (``_guard.py``)."""
    pages: list[list[_attempts.Attempt]] = []
    for attempt in log.take():
        if attempt[6] == 0 or not pages:
            pages.append([])
        pages[-1].append(attempt)
    context = trace.set_span_in_context(parent) if parent is not None else None
    for attempts in pages:
        span = telemetry.tracer.start_span(f"{name} page", context=context,
                                           kind=SpanKind.INTERNAL, start_time=attempts[0][2],
                                           attributes={"bizmsg.listing": name})
        _attempts.record(telemetry, span, server, attempts, transport)
        if attempts[-1][5] is not None:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=attempts[-1][3])


@guarded("starting the trace of a listing")
def _stream_start(resource: Any) -> tuple[trace.Span, _attempts.Server, str, Any, _native.AttemptLog]:
    """What a traced ``iter()`` needs: the caller's span (the pages' parent), where the
    requests go, and a handle whose requests carry the trace context with the log of their
    attempts; ``None`` if that could not be made (the stream runs untraced)."""
    parent = trace.get_current_span()
    observed, log = observed_resource(resource, record_attempts=True)
    return parent, _server(resource), resource._native.transport, observed, log


def sync_iter(telemetry: Telemetry, wrapped: Callable[..., Iterator[Any]], name: str
              ) -> Callable[..., Iterator[Any]]:
    @functools.wraps(wrapped)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        traced_stream = _stream_start(self)
        if traced_stream is None:
            return wrapped(self, *args, **kwargs)
        parent, server, transport, resource, log = traced_stream
        items = wrapped(resource, *args, **kwargs)

        def pages() -> Iterator[Any]:
            try:
                for item in items:
                    _page_spans(telemetry, name, server, transport, parent, log)
                    yield item
            finally:
                _page_spans(telemetry, name, server, transport, parent, log)

        return pages()

    return traced


def async_iter(telemetry: Telemetry, wrapped: Callable[..., AsyncIterator[Any]], name: str
               ) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(wrapped)
    def traced(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        traced_stream = _stream_start(self)
        if traced_stream is None:
            return wrapped(self, *args, **kwargs)
        parent, server, transport, resource, log = traced_stream
        items = wrapped(resource, *args, **kwargs)

        async def pages() -> AsyncIterator[Any]:
            try:
                async for item in items:
                    _page_spans(telemetry, name, server, transport, parent, log)
                    yield item
            finally:
                _page_spans(telemetry, name, server, transport, parent, log)

        return pages()

    return traced
