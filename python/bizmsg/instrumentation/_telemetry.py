"""What the instrumentation records with: the tracer, the meter and its instruments, made once
per ``instrument()`` from the providers it was given (or the global ones)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace

from .. import _native

#: ``http.client.request.duration``'s bucket boundaries, as the HTTP semantic conventions
#: advise them (seconds).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                    7.5, 10.0)

SCOPE = "bizmsg.instrumentation"

#: Whether ``bizmsg.pacing.wait`` is reported: an observable instrument cannot be taken back
#: from its meter, so after ``uninstrument()`` its callback reports nothing.
observing = False

#: What Rust had counted when ``instrument()`` was last called: the totals it keeps live as
#: long as the process, and each ``instrument()`` reports what they grew by since (a new
#: provider, or delta temporality, must not be handed an earlier session's retries).
_since: dict[str, dict[Any, float]] = {"retries": {}, "throttled": {}, "waited": {}}


def mark_start() -> None:
    """Takes the totals Rust counted so far as this instrumentation's zero."""
    _since["retries"] = {(error_type, path): count
                         for error_type, path, count in _native.retries_counted()}
    _since["throttled"] = {(status, path): count
                           for status, path, count in _native.throttled_counted()}
    _since["waited"] = dict(_native.seconds_waited_to_send_by_sender())


def _pacing_wait(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    # Totals kept in Rust per sender (masked there), read at each collection: no work per
    # message in Python.
    if not observing:
        return []
    since = _since["waited"]
    return [metrics.Observation(seconds - since.get(sender, 0.0), {"bizmsg.sender": sender})
            for sender, seconds in _native.seconds_waited_to_send_by_sender()]


def _messages_in_flight(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    # Counted in Rust, where a campaign's send starts and ends: no work per message here.
    if not observing:
        return []
    return [metrics.Observation(_native.campaign_messages_in_flight())]


def _retries(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    # Counted in Rust where each attempt ends, calls and campaigns' messages alike.
    if not observing:
        return []
    since = _since["retries"]
    return [metrics.Observation(count - since.get((error_type, path), 0),
                                {"error.type": error_type, "url.template": path})
            for error_type, path, count in _native.retries_counted()]


def _throttled(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    if not observing:
        return []
    since = _since["throttled"]
    return [metrics.Observation(count - since.get((status, path), 0),
                                {"http.response.status_code": status, "url.template": path})
            for status, path, count in _native.throttled_counted()]


def _outages(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    # Counted in Rust where the shared limits' store is found unreachable (once an outage).
    if not observing:
        return []
    return [metrics.Observation(_native.shared_state_outages()[0])]


def _unreachable(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    if not observing:
        return []
    return [metrics.Observation(_native.shared_state_outages()[1])]


class InFlight:
    """The calls and campaigns in progress, counted here (a lock and an int) and reported by an
    observable up-down counter when metrics are collected: no SDK measurement per call (two
    were about 23 µs a call together, exemplars included). One for the process
    (``IN_FLIGHT``): a meter hands back the instrument it already has for a name, with the
    callback it was first made with, so an ``instrument()`` after ``uninstrument()`` must count
    where the first one reads."""

    __slots__ = ("_count", "_lock")

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def add(self, amount: int) -> None:
        with self._lock:
            self._count += amount

    @property
    def count(self) -> int:
        return self._count


IN_FLIGHT = InFlight()


def _in_flight(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    if not observing:
        return []
    return [metrics.Observation(IN_FLIGHT.count)]


def message_share(value: object) -> float:
    """``campaign_message_spans=``: ``True`` (every message), ``False`` (none, the default) or
    the share of messages traced, from 0 to 1."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and 0 <= value <= 1:
        return float(value)
    raise ValueError(f"campaign_message_spans must be True, False or a share from 0 to 1, "
                     f"got {value!r}")


@dataclass(frozen=True)
class Telemetry:
    tracer: trace.Tracer
    request_duration: metrics.Histogram
    messages: metrics.Counter
    retries: metrics.ObservableCounter
    throttled: metrics.ObservableCounter
    in_flight: InFlight
    pacing_wait: metrics.ObservableCounter
    outages: metrics.ObservableCounter
    unreachable: metrics.ObservableUpDownCounter
    #: The share of a campaign's messages that get a span of their own (0: none).
    message_sample: float = 0.0


def make(tracer_provider: Any, meter_provider: Any, version: str,
         message_sample: float = 0.0) -> Telemetry:
    tracer = trace.get_tracer(SCOPE, version, tracer_provider=tracer_provider)
    meter = metrics.get_meter(SCOPE, version, meter_provider=meter_provider)
    meter.create_observable_up_down_counter(
        "bizmsg.calls.in_flight", callbacks=[_in_flight], unit="{call}",
        description="Calls (sends, list()) and campaigns in progress.")
    meter.create_observable_up_down_counter(
        "bizmsg.messages.in_flight", callbacks=[_messages_in_flight], unit="{message}",
        description="Campaign messages dispatched and not finished: waiting for their pacing "
                    "slot, or on the wire.")
    return Telemetry(
        tracer=tracer,
        request_duration=meter.create_histogram(
            "http.client.request.duration", unit="s",
            description="Duration of HTTP client requests.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS)),
        messages=meter.create_counter(
            "bizmsg.messages", unit="{message}",
            description="Messages by outcome: sent, rejected, unknown, failed, skipped."),
        retries=meter.create_observable_counter(
            "bizmsg.retries", callbacks=[_retries], unit="{retry}",
            description="Requests sent again, by the error.type of the attempt that failed."),
        throttled=meter.create_observable_counter(
            "bizmsg.throttled", callbacks=[_throttled], unit="{answer}",
            description="Throttling answers of the service (429, 503), by status."),
        in_flight=IN_FLIGHT,
        pacing_wait=meter.create_observable_counter(
            "bizmsg.pacing.wait", callbacks=[_pacing_wait], unit="s",
            description="Seconds this process's sends waited for their pacing slots and "
                        "pauses, while instrumented."),
        outages=meter.create_observable_counter(
            "bizmsg.shared_state.outages", callbacks=[_outages], unit="{outage}",
            description="Times the shared limits' store (Redis) became unreachable, since "
                        "the process started."),
        unreachable=meter.create_observable_up_down_counter(
            "bizmsg.shared_state.unreachable", callbacks=[_unreachable], unit="{store}",
            description="Shared limits' stores unreachable now."),
        message_sample=message_sample,
    )
