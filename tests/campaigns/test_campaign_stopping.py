"""What stops a campaign and what it leaves behind: ``stop_on_error``, the platform's stop,
pause and pair-rate codes, a revoked token, injected faults (no message sent twice), and every
input message accounted for when a campaign stops early.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from campaign_support import (
    NO_DUPLICATE_FAULTS,
    Pulls,
    check_no_duplicates_under_faults,
    commits_by_recipient,
    message,
    messages,
    recipient,
    settle,
)
from conftest import Number, committed


# --- stopping -----------------------------------------------------------------------------------


def test_stop_on_error_stops_at_the_first_rejected_message_and_stops_reading(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, globex_sender: Number
) -> None:
    """``stop_on_error=True``: message #3 is rejected (another tenant's number, code 1002);
    it is ``stopped_by``, the input is not read beyond the chunks already taken, every pulled
    item has an outcome, and those never dispatched are skipped (and not sent)."""
    pulled = 0

    def rows() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for i in range(100_000):
            pulled += 1
            yield message(globex_sender.digits if i == 3 else sender.digits, i)

    result = client.messages.send_many(rows(), stop_on_error=True)

    assert pulled <= 4 * 512, f"{pulled} items pulled after the campaign stopped"
    assert [o.index for o in result] == list(range(pulled))
    stopped = result.stopped_by
    assert stopped is not None and stopped.index == 3 and stopped.status == "rejected"
    assert isinstance(stopped.error, bizmsg.SendRejectedError) and stopped.error.code == "1002"
    assert result.stop_reason is not None
    assert result.stop_reason.startswith("message #3 was rejected") and "1002" in result.stop_reason
    assert result.counts["rejected"] == 1 and result.counts["skipped"] > 0
    assert {o.reason for o in result.skipped()} == {"not sent: the campaign stopped at message #3"}
    settle(sandbox)
    assert sorted(commits_by_recipient(sandbox)) == sorted(o.message["to"] for o in result.sent())


def test_without_stop_on_error_a_rejection_is_just_an_outcome(
    client: bizmsg.Client, sender: Number, globex_sender: Number
) -> None:
    items = [message(globex_sender.digits if i == 3 else sender.digits, i) for i in range(20)]
    result = client.messages.send_many(items)
    assert result.counts == {"sent": 19, "rejected": 1, "unknown": 0, "failed": 0, "skipped": 0}
    assert result.stopped_by is None and result.rejected()[0].index == 3


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_campaign_fatal_status_stops_the_campaign(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, status: int
) -> None:
    """A 401/403/404 on every send means no message can succeed: the campaign stops at the
    first one (``stopped_by``, ``stop_reason``), the messages in flight fail with that error,
    the rest are skipped, and nothing was sent."""
    sandbox.inject("send", status=status, times=None)
    source = Pulls(sender.digits, 100_000)
    result = client.messages.send_many(source, concurrency=16)

    assert source.pulled <= 4 * 512, f"{source.pulled} items pulled after the campaign stopped"
    assert [o.index for o in result] == list(range(source.pulled))
    stopped = result.stopped_by
    assert stopped is not None and stopped.status == "failed"
    assert isinstance(stopped.error, bizmsg.APIError) and stopped.error.status_code == status
    assert result.stop_reason is not None
    assert str(status) in result.stop_reason
    assert result.stop_reason.endswith("no other message could be sent")
    assert 1 <= result.counts["failed"] <= 16
    assert result.counts["failed"] + result.counts["skipped"] == len(result)
    assert len(sandbox.sent_messages()) == result.counts["failed"]
    assert committed(sandbox) == []


def test_a_revoked_token_stops_the_campaign(sandbox: Sandbox, sender: Number) -> None:
    with bizmsg.Client("sandbox-token-nobody", base_url=sandbox.base_url) as client:
        result = client.messages.send_many(messages(sender.digits, 100), concurrency=4)
    assert result.stopped_by is not None
    assert isinstance(result.stopped_by.error, bizmsg.AuthenticationError)
    assert result.counts["sent"] == 0 and result.counts["skipped"] > 0


@pytest.mark.parametrize("code", ["130429", "131016"])
def test_a_platform_pause_code_sends_the_message_again_with_a_new_key(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, code: str
) -> None:
    """A failed commit whose code asks to pause the batch (throughput, service unavailable) is
    sent again after a pause with the key ``<key>.r1``: a failed commit sent nothing, and the
    old key would be answered with the old failure."""
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": code, "msg": "throughput"}))
    result = client.messages.send_many(messages(sender.digits, 3), concurrency=1)

    assert [o.status for o in result] == ["sent"] * 3
    first, retried = sandbox.sent_messages()[:2]
    assert first["body"]["to"] == retried["body"]["to"] == recipient(0)
    assert first["response_body"]["code"] == code
    key = first["headers"]["idempotency-key"]
    assert retried["headers"]["idempotency-key"] == key + ".r1"
    assert result.outcomes[0].idempotency_key == key + ".r1"
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(3)}


def test_a_pause_code_that_persists_ends_rejected_after_max_retries(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    body = json.dumps({"smsId": None, "status": "FAILED", "code": "80007", "msg": "rate"})
    sandbox.inject("send", status=200, body=body, times=2)
    result = client.messages.send_many(messages(sender.digits, 1), max_retries=1)
    [outcome] = result.outcomes
    assert outcome.status == "rejected"
    assert isinstance(outcome.error, bizmsg.SendRejectedError) and outcome.error.code == "80007"
    keys = [r["headers"]["idempotency-key"] for r in sandbox.sent_messages()]
    assert keys == [keys[0], keys[0] + ".r1"] and outcome.idempotency_key == keys[1]


def test_the_pair_rate_code_retries_only_that_message_later(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """Code 131056 (pair rate) sends that message again after 4 s with a new key; the other
    messages of the batch do not wait for it (their outcomes come first)."""
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": "131056", "msg": "pair rate"}))
    started = time.monotonic()
    order = [o.message["to"] for o in client.messages.send_many_iter(messages(sender.digits, 3),
                                                                      concurrency=3)]
    assert time.monotonic() - started >= 3.9
    [refused] = [r for r in sandbox.sent_messages() if r["response_body"]["code"] == "131056"]
    to = refused["body"]["to"]
    assert order[-1] == to and sorted(order) == [recipient(i) for i in range(3)]
    keys = [r["headers"]["idempotency-key"] for r in sandbox.sent_messages()
            if r["body"]["to"] == to]
    assert keys == [keys[0], keys[0] + ".r1"]
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(3)}


@pytest.mark.parametrize("code", ["131048", "368"])
def test_a_platform_stop_code_stops_the_campaign(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, code: str
) -> None:
    """Codes that ask a person to look (spam rate limit, policy block) stop the campaign at
    that message."""
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": code, "msg": "blocked"}))
    result = client.messages.send_many(messages(sender.digits, 2000), concurrency=8)
    stopped = result.stopped_by
    assert stopped is not None and stopped.status == "rejected"
    assert stopped.result is not None and stopped.result.code == code
    assert result.stop_reason is not None and f"code {code} (blocked)" in result.stop_reason
    assert result.counts["rejected"] == 1 and result.counts["skipped"] > 0
    assert len(sandbox.sent_messages()) < 2000


def test_the_stop_reason_of_a_platform_code_reads_cleanly(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": "131031", "msg": "locked"}))
    result = client.messages.send_many(messages(sender.digits, 1))
    assert result.stop_reason is not None
    assert "  " not in result.stop_reason, result.stop_reason
    assert result.stop_reason.endswith("it asks to stop sending and alert a person")


def test_retry_after_pauses_the_whole_batch(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """One 429 with ``Retry-After: 1`` holds every message of the batch for that second, not
    only the refused one: beyond those already in flight, no outcome arrives before the
    pause ends. The refused message is retried with its key and sent once."""
    sandbox.inject("send", status=429, headers={"Retry-After": "1"})
    started = time.monotonic()
    arrivals = [time.monotonic() - started
                for _ in client.messages.send_many_iter(messages(sender.digits, 50), concurrency=8)]
    assert arrivals[-1] >= 0.9
    # Up to 7 were in flight beside the refused one; allow a second round for the race between
    # their answers and the 429's. Without a batch-wide pause ~49 would arrive at once.
    early = sum(1 for t in arrivals if t < 0.5)
    assert early <= 16, f"{early} outcomes arrived during the pause"
    log = sandbox.sent_messages()
    refused = [r for r in log if r["status"] == 429]
    assert len(refused) == 1
    key = refused[0]["headers"]["idempotency-key"]
    assert [r["status"] for r in log if r["headers"]["idempotency-key"] == key] == [429, 200]
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(50)}


# --- no duplicates under faults --------------------------------------------------------------


def test_no_message_is_sent_twice_under_injected_faults(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """2,000 distinct messages at concurrency 64 while ~10 % of sends suffer 503/429 (before
    processing: retried), cut connections (after processing: unknown) and 500s (unknown): each
    recipient is committed at most once, each ``sent`` outcome exactly once with its key, each
    ``unknown`` is a cut (committed once) or a 500 (not committed), ``failed`` ones never."""
    for fault in NO_DUPLICATE_FAULTS:
        sandbox.inject("send", fault)
    result = client.messages.send_many(messages(sender.digits, 2000), concurrency=64)
    check_no_duplicates_under_faults(sandbox, result.outcomes, 2000)
    assert result.counts["unknown"] == len(result.unknown()) > 0


# -- every input message accounted for ------------------------------------------------------------


def _dead_service_client() -> bizmsg.Client:
    """A client of a service nobody listens to (its breaker trips quickly)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return bizmsg.Client("sandbox-token-acme", base_url=f"http://127.0.0.1:{port}",
                         allow_insecure_http=True, max_retries=0)


def _messages(count: int) -> list[dict[str, Any]]:
    return [{"to": f"86138{i:08d}", "from": "14155550100", "name": "promo",
             "parameters": [str(i)], "language": "en"} for i in range(count)]


def test_a_campaign_that_stops_early_gives_every_message_of_a_list_its_outcome() -> None:
    """3,000 messages to a dead service: the breaker stops the campaign after its first chunks;
    the messages it never read are outcomes too (skipped, with the stop's note), in the
    result, its counts and its repr (before: 1,024 outcomes for 3,000 messages)."""
    seen: list[int] = []
    with _dead_service_client() as client:
        result = client.messages.send_many(
            _messages(3000), concurrency=4, unreachable_after=3, unreachable_for=0.2,
            on_result=lambda batch: seen.extend(outcome.index for outcome in batch))
    assert result.stop_reason is not None
    assert len(result) == 3000
    assert [outcome.index for outcome in result] == list(range(3000))
    assert sorted(seen) == list(range(3000))
    assert sum(result.counts.values()) == 3000
    assert result.unread_from is None
    assert "3,000 messages" in repr(result)
    last = result[-1]
    assert last.status == "skipped" and last.reason is not None
    assert "unreachable" in last.reason


def test_a_campaign_that_stops_early_says_where_it_stopped_reading_an_iterator() -> None:
    """An input without a length is read only as far as the campaign went: the result says
    from which message on it was not read, and how to go on."""
    with _dead_service_client() as client:
        result = client.messages.send_many(
            iter(_messages(3000)), concurrency=4, unreachable_after=3, unreachable_for=0.2)
    assert result.stop_reason is not None
    assert result.unread_from is not None and result.unread_from == len(result) < 3000
    assert f"not read from message #{result.unread_from:,} on" in repr(result)


async def test_an_async_campaign_that_stops_early_accounts_for_every_message() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with bizmsg.AsyncClient("sandbox-token-acme", base_url=f"http://127.0.0.1:{port}",
                                  allow_insecure_http=True, max_retries=0) as client:
        result = await client.messages.send_many(
            _messages(3000), concurrency=4, unreachable_after=3, unreachable_for=0.2)
        assert len(result) == 3000 and result.unread_from is None

        async def rows() -> Any:
            for row in _messages(3000):
                yield row

        streamed = await client.messages.send_many(
            rows(), concurrency=4, unreachable_after=3, unreachable_for=0.2)
        assert streamed.unread_from == len(streamed) < 3000


def test_send_many_iter_yields_the_unread_messages_of_a_list_too() -> None:
    with _dead_service_client() as client:
        outcomes = list(client.messages.send_many_iter(
            _messages(3000), concurrency=4, unreachable_after=3, unreachable_for=0.2))
    assert sorted(outcome.index for outcome in outcomes) == list(range(3000))

def test_an_on_result_that_raises_on_the_unread_messages_still_gives_the_result() -> None:
    """The messages a stopped campaign never read reach ``on_result`` as a last batch; if it
    raises there, the exception still carries the whole result (found in review)."""
    def sink(batch: list[Any]) -> None:
        if any(outcome.reason and "unreachable" in outcome.reason and outcome.index > 1500
               for outcome in batch):
            raise ValueError("sink full")

    with _dead_service_client() as client:
        with pytest.raises(ValueError) as caught:
            client.messages.send_many(_messages(3000), concurrency=4, unreachable_after=3,
                                      unreachable_for=0.2, on_result=sink)
    assert len(caught.value.bulk_result) == 3000  # type: ignore[attr-defined]
