"""OpenTelemetry: the instrumentor's spans (names, kinds, parents, attributes, statuses), the
trace context every request carries, the metrics, uninstrument(), and no token or whole number in
any attribute or event. With the SDK's in-memory exporter and metric reader."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import bizmsg  # noqa: E402
from bizmsg import _native  # noqa: E402
from bizmsg.instrumentation import BizmsgInstrumentor  # noqa: E402
from bizmsg.testing import Sandbox  # noqa: E402
from conftest import Number, free_port  # noqa: E402
from otel_support import Otel, instrumented  # noqa: E402

RECIPIENT = "447700900123"
SEND = "POST /v1/chat/messages/send"


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield from instrumented()


def traceparent_of(span: Any) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}"


def received_contexts(sandbox: Sandbox) -> set[str]:
    """The trace contexts the sandbox received (without the flags, which the SDK sets)."""
    return {r["headers"]["traceparent"].rsplit("-", 1)[0] for r in sandbox.requests()}


def test_a_sent_message(otel: Otel, sandbox: Sandbox, client: bizmsg.Client,
                        sender: Number) -> None:
    with otel.tracer.start_as_current_span("request") as request:
        result = client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    [send] = otel.named("send")
    [attempt] = otel.named(SEND)
    assert send.kind is SpanKind.PRODUCER and attempt.kind is SpanKind.CLIENT
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert attempt.parent is not None and attempt.parent.span_id == send.context.span_id
    assert send.attributes is not None and attempt.attributes is not None
    assert send.attributes["messaging.message.id"] == str(result.sms_id)
    assert send.attributes["bizmsg.idempotency_key"] == result.meta.idempotency_key
    assert send.attributes["bizmsg.recipient"] == "4477****0123"
    assert attempt.attributes["http.request.method"] == "POST"
    assert attempt.attributes["http.response.status_code"] == 200
    assert attempt.attributes["server.address"] == "127.0.0.1"
    assert attempt.attributes["server.port"] == int(sandbox.base_url.rsplit(":", 1)[1].strip("/"))
    assert attempt.attributes["url.full"] == sandbox.base_url.rstrip("/") + "/v1/chat/messages/send"
    assert attempt.attributes["network.protocol.name"] == "http"
    assert "http.request.resend_count" not in attempt.attributes
    assert attempt.start_time is not None and send.start_time is not None
    assert send.start_time <= attempt.start_time <= (attempt.end_time or 0) <= (send.end_time or 0)
    # The request carried the trace context of the send's span.
    assert received_contexts(sandbox) == {traceparent_of(send)}


def test_a_rejected_message(otel: Otel, sandbox: Sandbox, client: bizmsg.Client) -> None:
    with pytest.raises(bizmsg.SendRejectedError):
        client.messages.send_template(
            to=RECIPIENT, from_="14155550199", name="n", parameters="p", language="en")
    [send] = otel.named("send")
    assert send.status.status_code is StatusCode.ERROR
    assert send.attributes is not None
    assert send.attributes["error.type"] == "SendRejectedError"
    assert "bizmsg.commit.code" in send.attributes
    assert [e.name for e in send.events] == ["exception"]
    [attempt] = otel.named(SEND)
    assert attempt.status.status_code is StatusCode.UNSET


def test_an_unknown_outcome(otel: Otel, sandbox: Sandbox, client: bizmsg.Client,
                            sender: Number) -> None:
    sandbox.inject("send", cut_connection=True)
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
        client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    [send] = otel.named("send")
    [attempt] = otel.named(SEND)
    assert send.attributes is not None and attempt.attributes is not None
    assert send.attributes["error.type"] == "SendOutcomeUnknownError"
    assert send.attributes["bizmsg.idempotency_key"] == caught.value.idempotency_key
    assert attempt.status.status_code is StatusCode.ERROR
    assert "http.response.status_code" not in attempt.attributes
    assert attempt.attributes["error.type"] in ("connection_broken", "send_outcome_unknown")


def test_a_retried_send_has_two_attempt_spans(otel: Otel, sandbox: Sandbox,
                                              sender: Number) -> None:
    sandbox.inject("send", status=429, headers={"Retry-After": "0"})
    with sandbox.client(max_retries=2) as client:
        client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    first, second = sorted(otel.named(SEND), key=lambda s: s.start_time or 0)
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["http.response.status_code"] == 429
    assert first.attributes["error.type"] == "429"
    assert "http.request.resend_count" not in first.attributes
    assert second.attributes["http.response.status_code"] == 200
    assert second.attributes["http.request.resend_count"] == 1
    metrics = otel.metrics()
    # Counted in Rust, reported as counted since instrument() (the fixture's, just before).
    retries = {(p.attributes["error.type"], p.attributes["url.template"]): p.value
               for p in metrics["bizmsg.retries"] if p.value}
    assert retries == {("429", "/v1/chat/messages/send"): 1}
    assert sum(p.count for p in metrics["http.client.request.duration"]) == 2
    throttled = {(p.attributes["http.response.status_code"], p.attributes["url.template"]):
                 p.value for p in metrics["bizmsg.throttled"] if p.value}
    assert throttled == {(429, "/v1/chat/messages/send"): 1}


def test_an_attempt_span_ends_when_the_answers_head_was_read(otel: Otel) -> None:
    """The CLIENT span of an attempt ends where the HTTP conventions end it, when the answer's
    head was read, not once its body was: a server that sends the head, then the body 0.4 s
    later, makes an attempt span far shorter than the send it belongs to."""
    import socket

    if os.environ.get("BIZMSG_TRANSPORT", "").lower() in ("http2", "proxied"):
        pytest.skip("the server here speaks HTTP/1.1 only")

    body = json.dumps({"smsId": "sms-head", "status": "ACCEPTED", "code": "0",
                       "msg": "success"}).encode()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            received = b""
            while b"\r\n\r\n" not in received:
                received += connection.recv(65536)
            head, _, rest = received.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(rest) < length:
                rest += connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                               b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
            time.sleep(0.4)
            connection.sendall(body)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        with bizmsg.Client("t", base_url=f"http://127.0.0.1:{port}", allow_insecure_http=True,
                           max_retries=0) as client:
            client.messages.send_template(to=RECIPIENT, from_="14155550100", name="n",
                                          parameters="p", language="en")
    finally:
        server.join(5)
        listener.close()
    [attempt] = otel.named(SEND)
    [send] = otel.named("send")
    attempt_seconds = ((attempt.end_time or 0) - (attempt.start_time or 0)) / 1e9
    send_seconds = ((send.end_time or 0) - (send.start_time or 0)) / 1e9
    assert send_seconds >= 0.4
    assert attempt_seconds < send_seconds - 0.3, (attempt_seconds, send_seconds)


def test_a_listing_through_iter_has_a_span_per_page(otel: Otel, sandbox: Sandbox,
                                                    client: bizmsg.Client) -> None:
    with otel.tracer.start_as_current_span("request") as request:
        numbers = list(client.business_phone_numbers.iter(page_size=2, limit=5))
    assert len(numbers) == 5
    pages = otel.named("list business_phone_numbers page")
    attempts = otel.named("GET /v1/chat/businessPhoneNumber")
    assert len(pages) == len(attempts) >= 3
    assert {p.parent.span_id for p in pages if p.parent} == {request.get_span_context().span_id}
    assert {a.parent.span_id for a in attempts if a.parent} == {p.context.span_id for p in pages}
    assert received_contexts(sandbox) == {traceparent_of(request)}


def test_a_page_through_list(otel: Otel, sandbox: Sandbox, client: bizmsg.Client) -> None:
    client.business_accounts.list(page_size=1)
    [listing] = otel.named("list business_accounts")
    [attempt] = otel.named("GET /v1/chat/businessAccounts")
    assert attempt.parent is not None and attempt.parent.span_id == listing.context.span_id
    assert attempt.attributes is not None and "?" not in str(attempt.attributes["url.full"])


async def test_async_calls_carry_their_tasks_context(otel: Otel, sandbox: Sandbox,
                                                     aclient: bizmsg.AsyncClient,
                                                     sender: Number) -> None:
    async def one(name: str) -> str:
        with otel.tracer.start_as_current_span(name):
            result = await aclient.messages.send_template(
                to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
            return str(result.sms_id)

    await asyncio.gather(one("a"), one("b"))
    sends = otel.named("send")
    assert len(sends) == 2
    by_parent = {s.parent.span_id: s for s in sends if s.parent}
    for name in ("a", "b"):
        [parent] = otel.named(name)
        assert parent.context.span_id in by_parent
    assert received_contexts(sandbox) == {traceparent_of(s) for s in sends}


def test_threads_carry_their_own_context(otel: Otel, sandbox: Sandbox, client: bizmsg.Client,
                                         sender: Number) -> None:
    def one(name: str) -> None:
        with otel.tracer.start_as_current_span(name):
            client.messages.send_template(
                to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")

    threads = [threading.Thread(target=one, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sends = otel.named("send")
    assert len(sends) == 4
    assert received_contexts(sandbox) == {
        traceparent_of(s) for s in sends}
    parents = {s.parent.span_id for s in sends if s.parent}
    assert parents == {otel.named(f"t{i}")[0].context.span_id for i in range(4)}


def test_a_campaign_with_a_pause(otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(6)]
    messages.append(bizmsg.Message(to="447700900199", from_="14155550199", template=template))
    sandbox.inject("send", status=429, headers={"Retry-After": "0.2"})
    with sandbox.client() as client, otel.tracer.start_as_current_span("job") as job:
        result = client.messages.send_many(messages, campaign_id="otel-pause", concurrency=2)
    assert result.counts["sent"] == 6
    [campaign] = otel.named("send_many")
    assert campaign.parent is not None and campaign.parent.span_id == job.get_span_context().span_id
    assert campaign.attributes is not None
    assert campaign.attributes["bizmsg.campaign.sent"] == 6
    assert campaign.attributes["bizmsg.campaign.rejected"] == 1
    assert campaign.attributes["bizmsg.campaign.id"] == "otel-pause"
    assert campaign.attributes["messaging.batch.message_count"] == 7
    # Every request of the campaign (the refused one and its retry too) carried the run's span.
    assert received_contexts(sandbox) == {
        traceparent_of(campaign)}
    messages_metric = {p.attributes["bizmsg.outcome"]: p.value
                       for p in otel.metrics()["bizmsg.messages"]}
    assert messages_metric == {"sent": 6, "rejected": 1}
    # The 429's Retry-After paused the campaign: an event at the time Rust decided it.
    [pause] = [e for e in campaign.events if e.name == "bizmsg.campaign.pause"]
    assert pause.attributes is not None
    assert pause.attributes["bizmsg.pause.reason"] == "retry_after"
    assert pause.attributes["bizmsg.pause.seconds"] == pytest.approx(0.2)
    assert pause.attributes["http.response.status_code"] == 429
    assert (campaign.start_time or 0) <= pause.timestamp <= (campaign.end_time or 0)
    # Message spans were not asked for: the campaign is one span, no attempt is recorded, and
    # no outcome carries a trace.
    assert otel.named("send") == [] and otel.named(SEND) == []
    assert all(o._take_trace() is None for o in result.outcomes)


def test_a_stopped_campaign_has_a_stop_event(otel: Otel, sandbox: Sandbox,
                                             sender: Number) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to="447700900199", from_="14155550199", template=template)]
    messages += [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                 for i in range(3)]
    with sandbox.client() as client:
        client.messages.send_many(messages, stop_on_error=True, concurrency=1)
    [campaign] = otel.named("send_many")
    assert "bizmsg.campaign.stop" in [e.name for e in campaign.events]
    assert campaign.attributes is not None and campaign.attributes["bizmsg.campaign.stop_reason"]


def test_a_service_that_stops_answering_is_a_pause_event(otel: Otel) -> None:
    """The breaker opening (the service unreachable: one probe at a time from then) is a pause
    of the campaign, on its span, before the stop it leads to."""
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009002{i:02d}", from_="14155550100", template=template)
                for i in range(40)]
    with bizmsg.Client("sandbox-token-acme", base_url=f"http://127.0.0.1:{free_port()}",
                       allow_insecure_http=True, max_retries=0) as client:
        result = client.messages.send_many(messages, concurrency=2, unreachable_after=3,
                                           unreachable_for=0.2)
    assert result.counts["sent"] == 0 and result.stop_reason
    [campaign] = otel.named("send_many")
    events = [e for e in campaign.events if e.name in ("bizmsg.campaign.pause",
                                                        "bizmsg.campaign.stop")]
    assert [e.name for e in events][:1] == ["bizmsg.campaign.pause"], events
    pause = events[0]
    assert pause.attributes is not None
    assert pause.attributes["bizmsg.pause.reason"] == "unreachable"
    assert "bizmsg.pause.seconds" not in pause.attributes  # no set end: one probe at a time
    assert "bizmsg.campaign.stop" in [e.name for e in events]


def test_a_platform_throttling_code_is_a_pause_event(otel: Otel, sandbox: Sandbox,
                                                     sender: Number) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": "130429", "msg": "throughput"}))
    with sandbox.client() as client:
        result = client.messages.send_many(
            [bizmsg.Message(to=RECIPIENT, from_=sender.digits, template=template)],
            concurrency=1)
    assert result.counts["sent"] == 1
    [campaign] = otel.named("send_many")
    [pause] = [e for e in campaign.events if e.name == "bizmsg.campaign.pause"]
    assert pause.attributes is not None
    assert pause.attributes["bizmsg.pause.reason"] == "throttled"
    assert pause.attributes["bizmsg.commit.code"] == "130429"
    assert pause.attributes["bizmsg.pause.seconds"] > 0
    # The sender's throughput code holds that sender only: named, masked.
    assert pause.attributes["messaging.destination.name"] == _native.mask_phone(sender.digits)


@pytest.fixture
def otel_messages(request: pytest.FixtureRequest) -> Iterator[Otel]:
    """Instrumented with message spans: ``campaign_message_spans`` from the test's parameter
    (``True`` unless parametrized)."""
    yield from instrumented(campaign_message_spans=getattr(request, "param", True))


def _by_parent(spans: list[ReadableSpan]) -> dict[int, list[ReadableSpan]]:
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            children.setdefault(span.parent.span_id, []).append(span)
    return children


def test_message_spans_of_a_campaign(otel_messages: Otel, sandbox: Sandbox,
                                     sender: Number) -> None:
    """With ``campaign_message_spans=True``: a span per message under the campaign's, built from
    the times Rust took, with its outcome; a CLIENT span per attempt under it (the retried one
    has two), and ``http.client.request.duration`` for each attempt."""
    otel = otel_messages
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(4)]
    messages.append(bizmsg.Message(to="447700900199", from_="14155550199", template=template))
    sandbox.inject("send", status=429, headers={"Retry-After": "0"})
    with sandbox.client(max_retries=2) as client:
        result = client.messages.send_many(messages, concurrency=1)
    assert result.counts == {"sent": 4, "rejected": 1, "unknown": 0, "failed": 0,
                             "skipped": 0}
    [campaign] = otel.named("send_many")
    children = _by_parent(otel.spans())
    sends = children[campaign.context.span_id]
    assert sorted(s.name for s in sends) == ["send"] * 5
    by_index = {s.attributes["bizmsg.campaign.message.index"]: s for s in sends
                if s.attributes is not None}
    for outcome in result.outcomes:
        span = by_index[outcome.index]
        assert span.kind is SpanKind.PRODUCER and span.attributes is not None
        assert span.attributes["bizmsg.outcome"] == outcome.status
        assert span.attributes["bizmsg.idempotency_key"] == outcome.idempotency_key
        assert span.attributes["bizmsg.recipient"] == _native.mask_phone(
            messages[outcome.index].to)
        assert span.attributes["messaging.destination.name"] == _native.mask_phone(
            messages[outcome.index].from_)
        assert (campaign.start_time or 0) <= (span.start_time or 0) <= (span.end_time or 0)
        assert (span.end_time or 0) <= (campaign.end_time or 0)
        attempts = children[span.context.span_id]
        assert {a.name for a in attempts} == {SEND}
        assert all(a.kind is SpanKind.CLIENT for a in attempts)
        assert all((span.start_time or 0) <= (a.start_time or 0) <= (a.end_time or 0)
                   <= (span.end_time or 0) for a in attempts)
        if outcome.status == "sent":
            assert outcome.result is not None
            assert span.attributes["messaging.message.id"] == str(outcome.result.sms_id)
            assert span.status.status_code is StatusCode.UNSET
        else:
            assert span.status.status_code is StatusCode.ERROR
            assert span.attributes["error.type"] == "SendRejectedError"
            assert "bizmsg.commit.code" in span.attributes
            assert [e.name for e in span.events] == ["exception"]
    # The first message was answered 429 and sent again: two attempts under its span.
    first = sorted(children[by_index[0].context.span_id], key=lambda a: a.start_time or 0)
    assert [a.attributes["http.response.status_code"] for a in first
            if a.attributes is not None] == [429, 200]
    assert first[1].attributes is not None
    assert first[1].attributes["http.request.resend_count"] == 1
    metrics = otel.metrics()
    assert sum(p.count for p in metrics["http.client.request.duration"]) == 6
    assert sum(p.value for p in metrics["bizmsg.retries"]) == 1
    # Each trace was taken once, as its batch arrived: the outcomes kept hold none.
    assert all(o._take_trace() is None for o in result.outcomes)


@pytest.mark.parametrize("otel_messages", [0.25], indirect=True)
def test_a_share_of_a_campaigns_messages_get_spans(otel_messages: Otel, sandbox: Sandbox,
                                                   sender: Number) -> None:
    otel = otel_messages
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"447700900{i:03d}", from_=sender.digits, template=template)
                for i in range(200)]
    with sandbox.client() as client:
        result = client.messages.send_many(messages, concurrency=8)
    assert result.counts["sent"] == 200
    traced = len(otel.named("send"))
    assert 20 <= traced <= 80, traced
    assert len(otel.named(SEND)) == traced


def test_message_spans_of_send_many_iter_and_on_result_still_called(
        otel_messages: Otel, sandbox: Sandbox, sender: Number) -> None:
    otel = otel_messages
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(3)]
    batches: list[int] = []
    with sandbox.client() as client:
        outcomes = list(client.messages.send_many_iter(
            messages, on_result=lambda batch: batches.append(len(batch))))
    assert len(outcomes) == 3 and sum(batches) == 3
    [campaign] = otel.named("send_many_iter")
    sends = otel.named("send")
    assert len(sends) == 3
    assert all(s.parent is not None and s.parent.span_id == campaign.context.span_id
               for s in sends)


async def test_message_spans_of_an_async_campaign(otel_messages: Otel, sandbox: Sandbox,
                                                  sender: Number) -> None:
    otel = otel_messages
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(3)]
    async with sandbox.async_client() as client:
        result = await client.messages.send_many(messages)
    assert result.counts["sent"] == 3
    [campaign] = otel.named("send_many")
    sends = otel.named("send")
    assert len(sends) == 3 and len(otel.named(SEND)) == 3
    assert all(s.parent is not None and s.parent.span_id == campaign.context.span_id
               for s in sends)


def test_a_fault_building_message_spans_does_not_stop_the_campaign(
        otel_messages: Otel, sandbox: Sandbox, sender: Number,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from bizmsg.instrumentation import _campaigns

    def broken(self: Any, batch: list[Any]) -> None:
        raise RuntimeError("broken exporter")

    monkeypatch.setattr(_campaigns._MessageSpans, "record", broken)
    # A WARNING the first time for its kind in this process, DEBUG after.
    caplog.set_level(logging.DEBUG, logger="bizmsg")
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(3)]
    with sandbox.client() as client:
        result = client.messages.send_many(messages)
    assert result.counts["sent"] == 3
    assert any("building the spans of a campaign's messages failed" in r.getMessage()
               for r in caplog.records)
    [campaign] = otel_messages.named("send_many")
    assert campaign.attributes is not None and campaign.attributes["bizmsg.campaign.sent"] == 3


def test_campaign_message_spans_must_be_a_flag_or_a_share() -> None:
    for wrong in (2, -0.1, "yes"):
        with pytest.raises(ValueError, match="campaign_message_spans"):
            BizmsgInstrumentor().instrument(tracer_provider=TracerProvider(),
                                            campaign_message_spans=wrong)
        BizmsgInstrumentor().uninstrument()


def _send_records(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [r for r in caplog.records
            if r.name == "bizmsg" and getattr(r, "path", None) == "/v1/chat/messages/send"]


def test_a_sync_calls_log_records_carry_its_trace_ids(
    otel: Otel, bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    sandbox.inject("send", status=429, headers={"Retry-After": "0"})
    with sandbox.client(max_retries=2) as client:
        client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    [send] = otel.named("send")
    records = _send_records(bizmsg_logs)
    # The two attempts (DEBUG) and the scheduled retry (WARNING), logged on the caller's thread.
    assert sorted(r.levelname for r in records) == ["DEBUG", "DEBUG", "WARNING"]
    service = otel.tracer_provider.resource.attributes["service.name"]
    for record in records:
        assert record.otelTraceID == f"{send.context.trace_id:032x}"
        assert record.otelSpanID == f"{send.context.span_id:016x}"
        assert record.otelTraceSampled is True
        assert record.otelServiceName == service


async def test_records_logged_on_the_runtimes_threads_carry_their_calls_ids(
    otel: Otel, bizmsg_logs: pytest.LogCaptureFixture, aclient: bizmsg.AsyncClient,
    sandbox: Sandbox, sender: Number
) -> None:
    # An async call's requests and a campaign run on tokio's threads, which see no Python
    # context: the ids are the ones the call's handle was given, put on the records by Rust.
    await aclient.messages.send_template(
        to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    [send] = otel.named("send")
    attempts = _send_records(bizmsg_logs)
    assert attempts and all(r.thread != threading.get_ident() for r in attempts)
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    with sandbox.client() as client:
        client.messages.send_many(
            [bizmsg.Message(to=RECIPIENT, from_=sender.digits, template=template)],
            campaign_id="otel-logs")
    [campaign] = otel.named("send_many")
    ends = [r for r in bizmsg_logs.records
            if r.name == "bizmsg" and getattr(r, "campaign_id", None) == "otel-logs"]
    assert len(ends) >= 2  # the campaign's start and end
    campaign_attempts = _send_records(bizmsg_logs)[len(attempts):]
    assert campaign_attempts
    service = otel.tracer_provider.resource.attributes["service.name"]
    for span, records in ((send, attempts), (campaign, ends + campaign_attempts)):
        for record in records:
            assert (record.otelTraceID, record.otelSpanID, record.otelTraceSampled) == (
                f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}", True)
            assert record.otelServiceName == service


def test_records_of_pages_read_ahead_carry_the_ids_of_the_span_iter_was_called_in(
    otel: Otel, bizmsg_logs: pytest.LogCaptureFixture, client: bizmsg.Client
) -> None:
    with otel.tracer.start_as_current_span("request") as request:
        pages = client.business_phone_numbers.iter(limit=3)
    assert len(list(pages)) == 3  # read outside the span: the ids are still the request's
    records = [r for r in bizmsg_logs.records
               if getattr(r, "path", None) == "/v1/chat/businessPhoneNumber"]
    assert records
    for record in records:
        assert (record.otelTraceID, record.otelSpanID) == (
            f"{request.get_span_context().trace_id:032x}",
            f"{request.get_span_context().span_id:016x}")


def test_records_of_an_untraced_client_carry_no_ids_while_instrumented(
    otel: Otel, bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    # A record logged on tokio's threads outside any traced call: the "no span" values the
    # logging instrumentation would give it. (The native client's own call is not traced.)
    async def untraced(client: bizmsg.Client) -> None:
        await client._native.send_async(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en",
            raw=False, timeout=None, max_retries=None, idempotency_key=None)

    with sandbox.client() as client:
        asyncio.run(untraced(client))
    [record] = _send_records(bizmsg_logs)
    assert (record.otelTraceID, record.otelSpanID, record.otelTraceSampled) == ("0", "0", False)


def test_uninstrument_takes_the_ids_off_the_records(
    bizmsg_logs: pytest.LogCaptureFixture, client: bizmsg.Client, sender: Number
) -> None:
    telemetry = Otel()
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    instrumentor.uninstrument()
    with telemetry.tracer.start_as_current_span("request"):
        client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
    [record] = _send_records(bizmsg_logs)
    assert not hasattr(record, "otelTraceID")


def test_uninstrument_stops_everything(sandbox: Sandbox, client: bizmsg.Client,
                                       sender: Number) -> None:
    telemetry = Otel()
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                            meter_provider=telemetry.meter_provider)
    instrumentor.uninstrument()
    with telemetry.tracer.start_as_current_span("request"):
        client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
        client.business_accounts.list()
        list(client.business_phone_numbers.iter(limit=3))
    assert [s.name for s in telemetry.spans()] == ["request"]
    assert all("traceparent" not in r["headers"] for r in sandbox.requests())
    assert "bizmsg.messages" not in telemetry.metrics()
    assert not telemetry.metrics().get("bizmsg.pacing.wait")


def test_no_token_and_no_whole_number_in_any_attribute_or_event(
    otel: Otel, sandbox: Sandbox, sender: Number
) -> None:
    _no_token_and_no_whole_number(otel, sandbox, sender)


def test_no_token_and_no_whole_number_in_message_spans(
    otel_messages: Otel, sandbox: Sandbox, sender: Number
) -> None:
    _no_token_and_no_whole_number(otel_messages, sandbox, sender)
    assert len(otel_messages.named("send")) == 4  # two single sends, two campaign messages


def _no_token_and_no_whole_number(otel: Otel, sandbox: Sandbox, sender: Number) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    sandbox.inject("send", status=503, headers={"Retry-After": "0"})
    with sandbox.client() as client:
        client.messages.send_template(
            to=RECIPIENT, from_=sender.digits, name="n", parameters="p", language="en")
        with pytest.raises(bizmsg.SendRejectedError):
            client.messages.send_template(
                to=RECIPIENT, from_="14155550199", name="n", parameters="p", language="en")
        client.messages.send_many(
            [bizmsg.Message(to=RECIPIENT, from_=sender.digits, template=template),
             bizmsg.Message(to=RECIPIENT, from_="14155550199", template=template)])
    everything = []
    for span in otel.spans():
        everything.append(repr(dict(span.attributes or {})))
        everything += [repr(dict(e.attributes or {})) for e in span.events]
    for points in otel.metrics().values():
        everything += [repr(dict(p.attributes)) for p in points]
    text = "\n".join(everything)
    for secret in (sandbox.token, RECIPIENT, sender.digits):
        assert secret not in text


def test_import_bizmsg_imports_no_opentelemetry() -> None:
    code = textwrap.dedent("""
        import sys
        import bizmsg
        client = bizmsg.Client("t", base_url="http://127.0.0.1:9")
        client.close()
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_auto_instrumentation_through_opentelemetry_instrument(sandbox: Sandbox,
                                                              sender: Number) -> None:
    import shutil

    command = shutil.which("opentelemetry-instrument",
                           path=str(__import__("pathlib").Path(sys.executable).parent))
    if command is None:
        pytest.skip("opentelemetry-instrument is not installed")
    code = textwrap.dedent(f"""
        import bizmsg
        with bizmsg.Client({sandbox.token!r}, base_url={sandbox.base_url!r}) as client:
            client.messages.send_template(to={RECIPIENT!r}, from_={sender.digits!r},
                                          name="n", parameters="p", language="en")
    """)
    env = {**__import__("os").environ, "OTEL_TRACES_EXPORTER": "console",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_SERVICE_NAME": "auto-test"}
    done = subprocess.run([command, sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, timeout=60, check=True)
    assert '"name": "send"' in done.stdout and f'"name": "{SEND}"' in done.stdout
    [received] = sandbox.requests()
    assert "traceparent" in received["headers"]
