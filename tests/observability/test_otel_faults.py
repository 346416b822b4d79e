"""The instrumentation never changes what a call does: a span processor (the user's, or an
exporter behind one) that raises in ``on_start`` or ``on_end`` is logged as a WARNING, and the
call returns its result, or raises its own error, as it would untraced. Regression: an
``on_end`` that raised made a fully-sent ``send_many`` raise the processor's error with no
``bulk_result``, and a committed ``send`` raise it after the service had taken the message."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402

import bizmsg  # noqa: E402
from bizmsg.instrumentation import BizmsgInstrumentor  # noqa: E402
from bizmsg.testing import Sandbox  # noqa: E402
from conftest import Number  # noqa: E402

RECIPIENT = "447700900123"
TEMPLATE = bizmsg.Template(name="n", parameters=["p"], language="en")


class Raising(SpanProcessor):
    """Raises in ``on_start``, ``on_end`` or both, and counts the spans it saw end."""

    def __init__(self, on_start: bool = False, on_end: bool = False) -> None:
        self.raise_on_start = on_start
        self.raise_on_end = on_end
        self.ended = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.raise_on_start:
            raise RuntimeError("processor boom on start")

    def on_end(self, span: Any) -> None:
        self.ended += 1
        if self.raise_on_end:
            raise RuntimeError("processor boom on end")


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


def warned(caplog: pytest.LogCaptureFixture) -> bool:
    return any(r.levelname == "WARNING" and "bizmsg.instrumentation" in r.getMessage()
               and "processor boom" in (r.exc_text or "") for r in caplog.records)


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
