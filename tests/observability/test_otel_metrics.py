"""OpenTelemetry metrics kept outside the calls: read when metrics are collected, not
measured per call (the calls in flight, the seconds waited for pacing, the shared state's
outages)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

import bizmsg  # noqa: E402
from bizmsg import _native  # noqa: E402
from bizmsg.instrumentation import BizmsgInstrumentor  # noqa: E402
from bizmsg.testing import Sandbox  # noqa: E402
from conftest import Number  # noqa: E402
from otel_support import Otel, instrumented  # noqa: E402

RECIPIENT = "447700900123"


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield from instrumented()


def in_flight(otel: Otel) -> float:
    [point] = otel.metrics()["bizmsg.calls.in_flight"]
    return float(point.value)


def in_flight_while_a_send_waits(otel: Otel, sender: Number) -> float:
    """``bizmsg.calls.in_flight`` read while a send waits for the service's answer."""
    with Sandbox(delay=0.5) as slow, slow.client() as client:
        sending = threading.Thread(target=lambda: client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en"))
        sending.start()
        deadline = time.monotonic() + 5
        while not slow.requests() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = in_flight(otel)
        sending.join()
    return seen


def test_calls_in_flight_are_read_when_collected(otel: Otel, sender: Number) -> None:
    assert in_flight_while_a_send_waits(otel, sender) == 1
    assert in_flight(otel) == 0


def test_calls_in_flight_after_instrumenting_again_on_the_same_meter(sender: Number) -> None:
    """Regression (review): the meter kept the first instrument's callback, and the second
    ``instrument()`` counted where nothing read."""
    telemetry = Otel()
    instrumentor = BizmsgInstrumentor()
    for _ in range(2):
        instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                                meter_provider=telemetry.meter_provider)
        try:
            assert in_flight_while_a_send_waits(telemetry, sender) == 1
        finally:
            instrumentor.uninstrument()


def test_a_campaigns_messages_in_flight_are_counted_in_rust(otel: Otel, sender: Number) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009{i:05d}", from_=sender.digits, template=template)
                for i in range(8)]

    def in_flight_messages() -> float:
        [point] = otel.metrics()["bizmsg.messages.in_flight"]
        return float(point.value)

    with Sandbox(delay=0.5) as slow, slow.client() as client:
        campaign = threading.Thread(
            target=lambda: client.messages.send_many(messages, concurrency=4))
        campaign.start()
        deadline = time.monotonic() + 5
        while len(slow.requests()) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert in_flight_messages() == 4
        campaign.join()
    assert in_flight_messages() == 0


def test_a_campaigns_retries_and_throttling_are_counted_without_message_spans(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    """Counted in Rust where each attempt ends: a campaign whose messages get no span of their
    own counts them too (it did not: only traced messages were counted, in Python)."""
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009{i:05d}", from_=sender.digits, template=template)
                for i in range(3)]
    sandbox.inject("send", status=429, headers={"Retry-After": "0"})
    with sandbox.client() as client:
        result = client.messages.send_many(messages)
    assert result.counts["sent"] == 3
    metrics = otel.metrics()
    assert sum(p.value for p in metrics["bizmsg.retries"]) == 1
    assert sum(p.value for p in metrics["bizmsg.throttled"]) == 1


def test_a_new_instrumentation_reports_only_what_was_counted_since(
        sandbox: Sandbox, sender: Number) -> None:
    """Regression (review): Rust's totals live as long as the process, and a second
    ``instrument()`` (a new provider) was handed the first one's retries."""
    for _ in range(2):
        telemetry = Otel()
        instrumentor = BizmsgInstrumentor()
        instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                                meter_provider=telemetry.meter_provider)
        try:
            sandbox.inject("send", status=429, headers={"Retry-After": "0"})
            with sandbox.client() as client:
                client.messages.send_template(to=RECIPIENT, from_=sender.digits, name="n",
                                              parameters="p", language="en")
            metrics = telemetry.metrics()
            assert sum(p.value for p in metrics["bizmsg.retries"]) == 1
            assert sum(p.value for p in metrics["bizmsg.throttled"]) == 1
        finally:
            instrumentor.uninstrument()


def test_uninstrument_stops_the_calls_in_flight(sender: Number, sandbox: Sandbox) -> None:
    telemetry = Otel()
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                            meter_provider=telemetry.meter_provider)
    instrumentor.uninstrument()
    with sandbox.client() as client:
        client.messages.send_template(to=RECIPIENT, from_=sender.digits, name="n",
                                      parameters="p", language="en")
    assert "bizmsg.calls.in_flight" not in telemetry.metrics()


def test_shared_state_outages_are_counted(otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    """A shared limits' store that cannot be reached (nothing listens on its port: a single
    send looks its sender's pace up there) is an outage, counted in Rust where it is logged,
    and read when the metrics are collected."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = _native.shared_state_outages()[0]
    with sandbox.client(shared_limits=f"redis://127.0.0.1:{port}/0?wait=0.5",
                        timeout=5) as client:
        with pytest.raises((bizmsg.SharedStateError, bizmsg.TimeoutError)):
            client.messages.send_template(
                to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    [point] = otel.metrics()["bizmsg.shared_state.outages"]
    assert point.value >= before + 1
    assert "bizmsg.shared_state.unreachable" in otel.metrics()


def test_seconds_waited_for_pacing_slots(otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    from bizmsg import _native

    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(5)]
    masked = _native.mask_phone(sender.digits)
    with sandbox.client() as client:
        result = client.messages.send_many(messages, rate_limit=10, concurrency=1)
    assert result.counts["sent"] == 5
    # Per sender (masked), read when collected, as waited since instrument() (the fixture's,
    # just before): 4 waits of about 0.1 s here, all of this sender's.
    points = {p.attributes["bizmsg.sender"]: p.value
              for p in otel.metrics()["bizmsg.pacing.wait"]}
    assert sender.digits not in points
    assert 0.3 <= points[masked] < 5
