"""The instrumentation never changes what a call does: a span processor (the user's, or an
exporter behind one) that raises in ``on_start`` or ``on_end`` is logged as a WARNING, and the
call returns its result, or raises its own error, as it would untraced. Regression: an
``on_end`` that raised made a fully-sent ``send_many`` raise the processor's error with no
``bulk_result``, and a committed ``send`` raise it after the service had taken the message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

import bizmsg  # noqa: E402
from bizmsg.instrumentation import BizmsgInstrumentor  # noqa: E402
from bizmsg.testing import Sandbox  # noqa: E402
from conftest import Number  # noqa: E402
from otel_support import Raising  # noqa: E402

RECIPIENT = "447700900123"
TEMPLATE = bizmsg.Template(name="n", parameters=["p"], language="en")


@pytest.fixture(params=["on_start", "on_end", "both"])
def processor(request: pytest.FixtureRequest) -> Iterator[Raising]:
    raising = Raising(on_start=request.param in ("on_start", "both"),
                      on_end=request.param in ("on_end", "both"))
    provider = TracerProvider()
    provider.add_span_processor(raising)
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=provider, campaign_message_spans=True)
    yield raising
    instrumentor.uninstrument()


def messages(sender: Number, count: int) -> list[bizmsg.Message]:
    return [bizmsg.Message(to=f"4477009{i:05d}", from_=sender.digits, template=TEMPLATE)
            for i in range(count)]


def warned(caplog: pytest.LogCaptureFixture, boom: str = "processor boom") -> bool:
    """A fault was logged (a WARNING the first time for its kind, DEBUG after)."""
    return any("bizmsg.instrumentation" in r.getMessage() and boom in (r.exc_text or "")
               for r in caplog.records)


@pytest.fixture(autouse=True)
def every_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="bizmsg")


def test_a_send_returns_its_result(processor: Raising, client: bizmsg.Client, sender: Number,
                                   sandbox: Sandbox, caplog: pytest.LogCaptureFixture) -> None:
    result = client.messages.send_template(to=RECIPIENT, from_=sender.digits, name="n",
                                           parameters="p", language="en")
    assert result.sms_id is not None
    assert len(sandbox.requests()) == 1
    assert warned(caplog)


def test_a_rejected_send_raises_its_own_error(processor: Raising, client: bizmsg.Client,
                                              caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(bizmsg.SendRejectedError):
        client.messages.send_template(to=RECIPIENT, from_="14155550199", name="n",
                                      parameters="p", language="en")
    assert warned(caplog)


def test_a_campaign_returns_every_outcome(processor: Raising, sandbox: Sandbox,
                                          sender: Number,
                                          caplog: pytest.LogCaptureFixture) -> None:
    with sandbox.client() as client:
        result = client.messages.send_many(messages(sender, 60), concurrency=8)
    assert result.counts["sent"] == 60 and len(result) == 60
    assert len(sandbox.requests()) == 60
    assert warned(caplog)


def test_a_campaign_iterated_yields_every_outcome(processor: Raising, sandbox: Sandbox,
                                                  sender: Number,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    with sandbox.client() as client:
        statuses = [o.status for o in client.messages.send_many_iter(messages(sender, 20))]
    assert statuses == ["sent"] * 20
    assert warned(caplog)


def test_a_listing_yields_every_item(processor: Raising, client: bizmsg.Client,
                                     caplog: pytest.LogCaptureFixture) -> None:
    accounts = list(client.business_accounts.iter(page_size=1))
    assert len(accounts) == 3
    assert warned(caplog)


def test_async_calls_return_their_results(processor: Raising, sandbox: Sandbox,
                                          sender: Number,
                                          caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> tuple[object, bizmsg.BulkResult, list[str]]:
        async with sandbox.async_client() as client:
            one = await client.messages.send_template(
                to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
            many = await client.messages.send_many(messages(sender, 30))
            iterated = [o.status async for o in client.messages.send_many_iter(
                messages(sender, 5))]
            return one, many, iterated

    one, many, iterated = asyncio.run(run())
    assert one is not None
    assert many.counts["sent"] == 30 and iterated == ["sent"] * 5
    assert warned(caplog)


def test_an_interrupted_campaign_keeps_its_own_error(processor: Raising, sandbox: Sandbox,
                                                     sender: Number) -> None:
    """The campaign's own error (here the caller's ``on_result`` raising) is what is raised,
    with its ``bulk_result``, not the processor's."""
    def stop(batch: list[bizmsg.SendOutcome]) -> None:
        raise LookupError("caller stops")

    with sandbox.client() as client, pytest.raises(LookupError) as raised:
        client.messages.send_many(messages(sender, 10), on_result=stop)
    assert "caller stops" in str(raised.value)
    assert len(raised.value.bulk_result) == 10  # type: ignore[attr-defined]


class RaisingPropagator:
    """A text map propagator whose ``inject`` raises."""

    fields: set[str] = set()

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        raise RuntimeError("propagator boom")

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        return context


def test_a_failing_propagator_leaves_the_call_traced_without_headers(
        sandbox: Sandbox, client: bizmsg.Client, sender: Number,
        caplog: pytest.LogCaptureFixture) -> None:
    """Regression (review): the call's span was ended at once and the call ran untraced."""
    from opentelemetry import propagate
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(RaisingPropagator())  # type: ignore[arg-type]
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with pytest.raises(bizmsg.SendRejectedError):
            client.messages.send_template(to=RECIPIENT, from_="14155550199", name="n",
                                          parameters="p", language="en")
    finally:
        instrumentor.uninstrument()
        propagate.set_global_textmap(before)
    [send] = [span for span in exporter.get_finished_spans() if span.name == "send"]
    assert send.attributes is not None and send.attributes["error.type"] == "SendRejectedError"
    assert "traceparent" not in sandbox.requests()[0]["headers"]
    assert warned(caplog, "propagator boom")


def test_each_kind_of_fault_is_a_warning_once(processor: Raising, client: bizmsg.Client,
                                              sender: Number,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """A processor that fails on every span must not write a traceback per send."""
    from bizmsg.instrumentation import _guard

    _guard._warned.clear()
    for _ in range(5):
        client.messages.send_template(to=RECIPIENT, from_=sender.digits, name="n",
                                      parameters="p", language="en")
    faults = [r for r in caplog.records if "bizmsg.instrumentation" in r.getMessage()]
    warnings = [r for r in faults if r.levelno == logging.WARNING]
    assert 1 <= len(warnings) <= 2  # the span's start and its end are two kinds
    assert len(faults) > len(warnings)


class RaisingMeter:
    """A meter provider whose instruments raise on every measurement."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def _instrument(self, *args: Any, **kwargs: Any) -> Any:
        return self

    create_counter = create_up_down_counter = create_histogram = _instrument
    create_observable_counter = create_observable_up_down_counter = _instrument
    create_observable_gauge = create_gauge = _instrument

    def add(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("meter boom")

    record = set = add


def test_a_failing_meter_never_makes_a_failed_campaign_look_successful(
        sandbox: Sandbox, sender: Number, caplog: pytest.LogCaptureFixture) -> None:
    """Regression (review): the counts were recorded before the error, and a raising meter
    left the span without it; a message's span was never ended."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=RaisingMeter(),
                            campaign_message_spans=True)

    def full(batch: list[bizmsg.SendOutcome]) -> None:
        raise LookupError("sink full")

    try:
        with sandbox.client() as client, pytest.raises(LookupError):
            client.messages.send_many(messages(sender, 5), on_result=full)
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    [campaign] = [span for span in spans if span.name == "send_many"]
    assert campaign.status.status_code is StatusCode.ERROR
    assert campaign.attributes is not None and campaign.attributes["error.type"] == "LookupError"
    assert [span.name for span in spans].count("send") >= 1
    assert warned(caplog, "meter boom")


@pytest.mark.parametrize("method", ["send_many", "send_many_iter"])
def test_a_ctrl_c_while_a_finished_campaigns_span_ends_keeps_its_result(
        sandbox: Sandbox, sender: Number, method: str) -> None:
    provider = TracerProvider()
    # A Ctrl-C landing while the campaign's span ends (in a slow exporter).
    provider.add_span_processor(Raising(on_end=True, error=KeyboardInterrupt, names="send_many"))
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with sandbox.client() as client, pytest.raises(KeyboardInterrupt) as raised:
            if method == "send_many":
                client.messages.send_many(messages(sender, 4))
            else:
                for _ in client.messages.send_many_iter(messages(sender, 4)):
                    pass
    finally:
        instrumentor.uninstrument()
    result = raised.value.bulk_result  # type: ignore[attr-defined]
    assert result.counts["sent"] == 4
