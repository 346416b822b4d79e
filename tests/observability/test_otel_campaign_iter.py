"""OpenTelemetry and ``send_many_iter``: the generator the caller gets is the campaign's own
(the instrumentation does nothing per outcome, sync or async: the campaign calls it once, at
its end), the counts come from the campaign's result, and leaving the loop early ends the
campaign's span without an error."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.trace import StatusCode  # noqa: E402

import bizmsg  # noqa: E402
from bizmsg._campaign import drivers  # noqa: E402
from bizmsg.instrumentation import BizmsgInstrumentor  # noqa: E402
from bizmsg.testing import Sandbox  # noqa: E402
from conftest import Number  # noqa: E402
from otel_support import Otel, Raising, instrumented  # noqa: E402

TEMPLATE = bizmsg.Template(name="n", parameters=["p"], language="en")


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield from instrumented()


def messages(sender: Number, count: int) -> list[bizmsg.Message]:
    return [bizmsg.Message(to=f"4477009{i:05d}", from_=sender.digits, template=TEMPLATE)
            for i in range(count)]


def test_the_sync_generator_is_the_campaigns_own(otel: Otel, sandbox: Sandbox,
                                                 sender: Number) -> None:
    """Regression: it was a wrapping generator, resumed once per outcome."""
    with sandbox.client() as client:
        outcomes = client.messages.send_many_iter(messages(sender, 3))
        assert outcomes.gi_code is drivers._outcomes.__code__  # type: ignore[attr-defined]
        assert len(list(outcomes)) == 3


async def test_the_async_generator_is_the_campaigns_own(otel: Otel, sandbox: Sandbox,
                                                        sender: Number) -> None:
    """Regression: it was a wrapping async generator, one more step per outcome."""
    async with sandbox.async_client() as client:
        outcomes = client.messages.send_many_iter(messages(sender, 3))
        code = outcomes.ag_code  # type: ignore[attr-defined]
        assert code is drivers._outcomes_async.__code__
        assert len([o async for o in outcomes]) == 3


def test_a_sync_send_many_iter_is_counted_from_its_result(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client() as client:
        outcomes = client.messages.send_many_iter(messages(sender, 3))
        with pytest.raises(StopIteration) as ended:
            while True:
                next(outcomes)
    result = ended.value.value
    assert isinstance(result, bizmsg.BulkResult) and result.counts["sent"] == 3
    [campaign] = otel.named("send_many_iter")
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.sent"] == 3
    assert campaign.attributes["messaging.batch.message_count"] == 3
    assert campaign.status.status_code is StatusCode.UNSET


async def test_an_async_send_many_iter_is_counted_from_its_result(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    rejected = bizmsg.Message(to="447700900199", from_="14155550199", template=TEMPLATE)
    batches: list[int] = []
    async with sandbox.async_client() as client:
        statuses = [o.status async for o in client.messages.send_many_iter(
            [*messages(sender, 3), rejected],
            on_result=lambda batch: batches.append(len(batch)))]
    assert sorted(statuses) == ["rejected", "sent", "sent", "sent"] and sum(batches) == 4
    [campaign] = otel.named("send_many_iter")
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.sent"] == 3
    assert campaign.attributes["bizmsg.campaign.rejected"] == 1
    assert campaign.attributes["messaging.batch.message_count"] == 4
    messages_metric = {p.attributes["bizmsg.outcome"]: p.value
                       for p in otel.metrics()["bizmsg.messages"]}
    assert messages_metric == {"sent": 3, "rejected": 1}


def test_leaving_the_loop_early_ends_the_span_without_an_error(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client() as client:
        for seen, _ in enumerate(client.messages.send_many_iter(messages(sender, 600),
                                                                concurrency=2), 1):
            if seen == 5:
                break
    [campaign] = otel.named("send_many_iter")
    assert campaign.status.status_code is StatusCode.UNSET
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.stop_reason"] == "the caller stopped iterating"
    # What it did before it stopped: at least the 5 seen, never the 600.
    assert 5 <= campaign.attributes["bizmsg.campaign.sent"] < 600
    assert [e.name for e in campaign.events][-1] == "bizmsg.campaign.stop"


async def test_leaving_an_async_loop_early_ends_the_span_without_an_error(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    async with sandbox.async_client() as client:
        outcomes = client.messages.send_many_iter(messages(sender, 600), concurrency=2)
        seen = 0
        async for _ in outcomes:
            seen += 1
            if seen == 5:
                break
        await outcomes.aclose()  # type: ignore[attr-defined]
    [campaign] = otel.named("send_many_iter")
    assert campaign.status.status_code is StatusCode.UNSET
    assert campaign.attributes is not None
    assert 5 <= campaign.attributes["bizmsg.campaign.sent"] < 600
    assert campaign.attributes["bizmsg.campaign.stop_reason"] == "the caller stopped iterating"


def test_a_campaign_that_raises_keeps_its_error_on_the_span(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    def full(batch: list[bizmsg.SendOutcome]) -> None:
        raise LookupError("sink full")

    with sandbox.client() as client, pytest.raises(LookupError):
        for _ in client.messages.send_many_iter(messages(sender, 10), on_result=full):
            pass
    [campaign] = otel.named("send_many_iter")
    assert campaign.status.status_code is StatusCode.ERROR
    assert campaign.attributes is not None and campaign.attributes["error.type"] == "LookupError"


def in_flight(otel: Otel) -> float:
    [point] = otel.metrics()["bizmsg.calls.in_flight"]
    return float(point.value)


def test_a_generator_never_iterated_ends_its_span_when_collected(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    """Regression (review): its span never ended and the calls in flight stayed raised."""
    with sandbox.client() as client:
        client.messages.send_many_iter(messages(sender, 3))
        gc.collect()
    [campaign] = otel.named("send_many_iter")
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.stop_reason"] == "the caller never iterated"
    assert in_flight(otel) == 0


async def test_an_async_generator_never_iterated_ends_its_span_when_collected(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    async with sandbox.async_client() as client:
        client.messages.send_many_iter(messages(sender, 3))
        gc.collect()
    [campaign] = otel.named("send_many_iter")
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.stop_reason"] == "the caller never iterated"
    assert in_flight(otel) == 0


def test_a_generator_collected_after_it_began_ends_once_with_its_counts(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client() as client:
        outcomes = client.messages.send_many_iter(messages(sender, 300), concurrency=2)
        next(outcomes)
        del outcomes
        gc.collect()
    [campaign] = otel.named("send_many_iter")
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.stop_reason"] == "the caller stopped iterating"
    assert campaign.attributes["bizmsg.campaign.sent"] >= 1
    assert in_flight(otel) == 0


def test_a_wrapper_put_on_send_many_iter_before_instrumenting_still_runs(
        sandbox: Sandbox, sender: Number, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (review): the traced path called the campaign's driver itself, past
    whatever wrapped the method before ``instrument()``."""
    from bizmsg._resources.messages import Messages

    called: list[str] = []

    original = Messages.send_many_iter

    def spy(self: Any, messages: Any, **options: Any) -> Any:
        called.append("send_many_iter")
        return original(self, messages, **options)

    monkeypatch.setattr(Messages, "send_many_iter", spy)
    with contextlib.contextmanager(instrumented)() as otel, sandbox.client() as client:
        assert len(list(client.messages.send_many_iter(messages(sender, 3)))) == 3
        [campaign] = otel.named("send_many_iter")
    assert called == ["send_many_iter"]
    assert campaign.attributes is not None and campaign.attributes["bizmsg.campaign.sent"] == 3


def test_a_campaign_that_stopped_itself_keeps_its_reason_when_the_caller_leaves_after(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    """Regression (review): leaving the loop while it read a stopped campaign's skipped rest
    replaced the campaign's own stop reason."""
    rejected = bizmsg.Message(to="447700900199", from_="14155550199", template=TEMPLATE)
    with sandbox.client() as client:
        for outcome in client.messages.send_many_iter(
                [rejected, *messages(sender, 40)], stop_on_error=True, concurrency=1):
            if outcome.status == "skipped":
                break
    [campaign] = otel.named("send_many_iter")
    assert campaign.attributes is not None
    reason = campaign.attributes["bizmsg.campaign.stop_reason"]
    assert reason != "the caller stopped iterating" and "rejected" in str(reason)


def test_nothing_of_the_campaign_is_kept_by_its_generator_after_its_span_ended(
        otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    """Regression (review): the finalizer kept the campaign's span, handle and options (and
    the caller's on_result) for as long as the exhausted generator lived."""
    class Sink:
        def __call__(self, batch: list[bizmsg.SendOutcome]) -> None:
            return None

    sink = Sink()
    alive = weakref.ref(sink)
    with sandbox.client() as client:
        outcomes = client.messages.send_many_iter(messages(sender, 3), on_result=sink)
        assert len(list(outcomes)) == 3
    del sink
    gc.collect()
    assert alive() is None
    del outcomes


@pytest.mark.parametrize("method", ["send_many", "send_many_iter"])
def test_a_second_ctrl_c_while_a_stopped_campaigns_span_ends_keeps_its_result(
        sandbox: Sandbox, sender: Number, method: str) -> None:
    """Regression (review): a KeyboardInterrupt while a failed campaign's span ended had no
    ``bulk_result``."""
    from opentelemetry.sdk.trace import TracerProvider

    def full(batch: list[bizmsg.SendOutcome]) -> None:
        raise LookupError("sink full")

    provider = TracerProvider()
    provider.add_span_processor(Raising(on_end=True, error=KeyboardInterrupt, names="send_many"))
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with sandbox.client() as client, pytest.raises(KeyboardInterrupt) as raised:
            if method == "send_many":
                client.messages.send_many(messages(sender, 4), on_result=full)
            else:
                for _ in client.messages.send_many_iter(messages(sender, 4), on_result=full):
                    pass
    finally:
        instrumentor.uninstrument()
    assert raised.value.bulk_result is not None  # type: ignore[attr-defined]
