"""The span of a campaign (``send_many``, ``send_many_iter``): one for the run, under the
caller's span, with the counts per outcome, the pace and the stop reason as attributes and the
campaign's warnings and its stop as events. Every request of the campaign carries the run span's
trace context: the campaign's handle is made for it (``NativeClient.observed``) before Rust
starts it, so nothing is done in Python per message. Its attempts are not recorded (the log
would grow with each message): the per-message spans and the per-attempt metrics of campaigns
are not built yet (docs/observability.md)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._campaign.results import STATUSES
from . import _calls
from ._telemetry import Telemetry


def _start(telemetry: Telemetry, resource: Any, name: str, options: dict[str, Any]
           ) -> tuple[trace.Span, Any, Any]:
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
    observed, _ = _calls.observed_resource(resource, record_attempts=False)
    telemetry.in_flight.add(1)
    return span, scope, observed


def _finish(telemetry: Telemetry, span: trace.Span, scope: Any, counts: dict[str, int],
            result: Any = None, error: BaseException | None = None) -> None:
    try:
        result = result if result is not None else getattr(error, "bulk_result", None)
        if result is not None and hasattr(result, "counts"):
            counts = dict(result.counts)
            for warning in result.warnings:
                span.add_event("bizmsg.campaign.warning",
                               {"bizmsg.warning.kind": warning.kind,
                                "bizmsg.warning.message": warning.message})
            if result.stop_reason is not None:
                span.add_event("bizmsg.campaign.stop",
                               {"bizmsg.campaign.stop_reason": result.stop_reason})
                span.set_attribute("bizmsg.campaign.stop_reason", result.stop_reason)
        for status in STATUSES:
            span.set_attribute(f"bizmsg.campaign.{status}", counts.get(status, 0))
            if counts.get(status):
                telemetry.messages.add(counts[status], {"bizmsg.outcome": status})
        span.set_attribute("messaging.batch.message_count", sum(counts.values()))
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            span.set_attribute("error.type", type(error).__qualname__)
    finally:
        telemetry.in_flight.add(-1)
        scope.__exit__(None, None, None)
        span.end()


def sync_campaign(telemetry: Telemetry, wrapped: Callable[..., Any], name: str
                  ) -> Callable[..., Any]:
    @functools.wraps(wrapped)
    def traced(self: Any, messages: Any, **options: Any) -> Any:
        span, scope, observed = _start(telemetry, self, name, options)
        try:
            result = wrapped(observed, messages, **options)
        except BaseException as error:
            _finish(telemetry, span, scope, {}, error=error)
            raise
        _finish(telemetry, span, scope, {}, result)
        return result

    return traced


def async_campaign(telemetry: Telemetry, wrapped: Callable[..., Any], name: str
                   ) -> Callable[..., Any]:
    @functools.wraps(wrapped)
    async def traced(self: Any, messages: Any, **options: Any) -> Any:
        span, scope, observed = _start(telemetry, self, name, options)
        try:
            result = await wrapped(observed, messages, **options)
        except BaseException as error:
            _finish(telemetry, span, scope, {}, error=error)
            raise
        _finish(telemetry, span, scope, {}, result)
        return result

    return traced


def sync_campaign_iter(telemetry: Telemetry, wrapped: Callable[..., Iterator[Any]], name: str
                       ) -> Callable[..., Iterator[Any]]:
    @functools.wraps(wrapped)
    def traced(self: Any, messages: Any, **options: Any) -> Iterator[Any]:
        span, scope, observed = _start(telemetry, self, name, options)
        # The span is current while the campaign starts (its requests take the context then);
        # the caller's own context comes back for the loop over the outcomes.
        try:
            outcomes = wrapped(observed, messages, **options)
        except BaseException as error:
            _finish(telemetry, span, scope, {}, error=error)
            raise
        finally:
            scope.__exit__(None, None, None)
        ended = _NoScope()

        def counted() -> Iterator[Any]:
            counts: dict[str, int] = {}
            try:
                for outcome in outcomes:
                    counts[outcome.status] = counts.get(outcome.status, 0) + 1
                    yield outcome
            except BaseException as error:
                _finish(telemetry, span, ended, counts, error=error)
                raise
            _finish(telemetry, span, ended, counts)

        return counted()

    return traced


def async_campaign_iter(telemetry: Telemetry, wrapped: Callable[..., AsyncIterator[Any]],
                        name: str) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(wrapped)
    def traced(self: Any, messages: Any, **options: Any) -> AsyncIterator[Any]:
        span, scope, observed = _start(telemetry, self, name, options)
        try:
            outcomes = wrapped(observed, messages, **options)
        except BaseException as error:
            _finish(telemetry, span, scope, {}, error=error)
            raise
        finally:
            scope.__exit__(None, None, None)
        ended = _NoScope()

        async def counted() -> AsyncIterator[Any]:
            counts: dict[str, int] = {}
            try:
                async for outcome in outcomes:
                    counts[outcome.status] = counts.get(outcome.status, 0) + 1
                    yield outcome
            except BaseException as error:
                _finish(telemetry, span, ended, counts, error=error)
                raise
            _finish(telemetry, span, ended, counts)

        return counted()

    return traced


class _NoScope:
    """The scope of a span already left (a campaign iterated outside its start)."""

    def __exit__(self, *_: object) -> None:
        return None


