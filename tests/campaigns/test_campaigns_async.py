"""Campaigns with ``AsyncClient``: the core guarantees of ``test_campaigns.py`` on an
event loop (awaitable ``send_many`` and ``plan``, ``async for`` over ``send_many_iter``, async
generators as input) and cancelling the task that runs a campaign."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

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

TEMPLATE = bizmsg.Template(name="order_update", parameters=["A-1"], language="en_US")


async def test_an_async_generator_input_gives_outcomes_in_input_order(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """An async generator is read in chunks; the result has one outcome per item, in input
    order, each with its item, and each message went out once."""
    source = Pulls(sender.digits, 700)
    result = await aclient.messages.send_many(source.aiter(), concurrency=64)
    assert isinstance(result, bizmsg.BulkResult)
    assert [o.index for o in result] == list(range(700)) and source.pulled == 700
    assert [o.message["to"] for o in result] == [recipient(i) for i in range(700)]
    assert result.counts["sent"] == 700 and result.ok
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(700)}
    keys = {r["headers"]["idempotency-key"] for r in committed(sandbox)}
    assert keys == {o.idempotency_key for o in result}


async def test_every_input_shape_and_bad_items(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """The same shapes as with the sync client (a plain list here); bad items are ``failed``
    outcomes with a ``ValidationError`` while the rest goes out."""
    items: list[Any] = [
        bizmsg.Message(to=recipient(0), from_=sender.digits, template=TEMPLATE),
        {"to": recipient(1), "from": sender.digits, "template": TEMPLATE},
        {"to": recipient(2), "from_": sender.display, "template": TEMPLATE.to_dict()},
        {"to": recipient(3), "from": sender.digits, "name": "order_update",
         "parameters": ["A-1"], "language": "en-US"},
        "not a message",
        {"to": "12", "from": sender.digits, "template": TEMPLATE},
        {"to": recipient(6), "from": sender.digits},
    ]
    result = await aclient.messages.send_many(items)
    assert [o.status for o in result] == ["sent"] * 4 + ["failed"] * 3
    assert [o.error.field for o in result.failed()  # type: ignore[union-attr]
            ] == ["message", "to", "template.name"]
    records = {r["body"]["to"]: r for r in committed(sandbox)}
    assert sorted(records) == [recipient(i) for i in range(4)]
    for record in records.values():
        assert record["body"]["template"] == {"name": "order_update", "parameters": '["A-1"]',
                                              "language": "en_US"}


async def test_duplicates_are_skipped_unless_dedupe_is_off(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    items = [message(sender.digits, 0), message(sender.digits, 1), message(sender.digits, 0)]
    result = await aclient.messages.send_many(items)
    assert [o.status for o in result] == ["sent", "sent", "skipped"]
    assert result.outcomes[2].duplicate_of == 0
    again = await aclient.messages.send_many(items, dedupe=False)
    assert [o.status for o in again] == ["sent"] * 3
    assert commits_by_recipient(sandbox) == {recipient(0): 3, recipient(1): 2}


async def test_send_many_iter_reads_lazily_and_stops_when_closed(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """``async for`` over 10 outcomes of a 100,000-message async generator, then closing the
    iterator (``contextlib.aclosing``): far fewer items were pulled, the campaign stopped, and
    nothing went out twice."""
    source = Pulls(sender.digits, 100_000)
    seen = []
    iterator = cast("AsyncGenerator[bizmsg.SendOutcome, None]",
                    aclient.messages.send_many_iter(source.aiter()))
    async with contextlib.aclosing(iterator) as outcomes:
        async for outcome in outcomes:
            seen.append(outcome)
            if len(seen) == 10:
                break
    assert source.pulled <= 8 * 512, f"{source.pulled} items pulled for 10 outcomes"
    settle(sandbox)
    accepted = sandbox.stats()["accepted"]
    await asyncio.sleep(0.1)
    assert sandbox.stats()["accepted"] == accepted <= source.pulled
    assert max(commits_by_recipient(sandbox).values()) == 1


async def test_send_many_iter_yields_every_outcome(
    aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    indices = [o.index async for o in aclient.messages.send_many_iter(messages(sender.digits,
                                                                                 300))]
    assert sorted(indices) == list(range(300))


async def test_on_result_runs_on_the_event_loop_with_each_batch(
    aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    loop_thread = threading.get_ident()
    calls: list[tuple[int, int]] = []

    def on_result(batch: list[bizmsg.SendOutcome]) -> None:
        asyncio.get_running_loop()  # raises off the loop
        calls.append((threading.get_ident(), len(batch)))

    result = await aclient.messages.send_many(messages(sender.digits, 600), on_result=on_result)
    assert result.counts["sent"] == 600
    assert {thread for thread, _ in calls} == {loop_thread}
    assert sum(size for _, size in calls) == 600 and all(size <= 256 for _, size in calls)


async def test_no_message_is_sent_twice_under_injected_faults(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """The faults of the sync test (503/429 before processing, cuts after processing, 500s),
    2,000 messages at concurrency 64 from an async generator: no recipient gets two messages,
    outcomes agree with what the sandbox committed."""
    for fault in NO_DUPLICATE_FAULTS:
        sandbox.inject("send", fault)
    source = Pulls(sender.digits, 2000)
    result = await aclient.messages.send_many(source.aiter(), concurrency=64)
    check_no_duplicates_under_faults(sandbox, result.outcomes, 2000)


async def test_stop_on_error_and_a_fatal_status(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number, globex_sender: Number
) -> None:
    """``stop_on_error`` stops at the rejected message #3; a 401 on every send stops the
    campaign at the first one; the input is not read on after either."""
    source = Pulls(sender.digits, 100_000)

    async def rows() -> AsyncIterator[dict[str, Any]]:
        async for item in source.aiter():
            yield message(globex_sender.digits, 3) if source.pulled == 4 else item

    result = await aclient.messages.send_many(rows(), stop_on_error=True)
    assert result.stopped_by is not None and result.stopped_by.index == 3
    assert result.stopped_by.status == "rejected"
    assert source.pulled <= 4 * 512
    assert [o.index for o in result] == list(range(len(result)))

    sandbox.inject("send", status=401, times=None)
    fatal = await aclient.messages.send_many(messages(sender.digits, 1000, 200_000),
                                             concurrency=8)
    assert fatal.stopped_by is not None
    assert isinstance(fatal.stopped_by.error, bizmsg.AuthenticationError)
    assert fatal.stop_reason is not None and "no other message could be sent" in fatal.stop_reason
    assert fatal.counts["sent"] == 0 and fatal.counts["failed"] <= 8


async def test_a_platform_pause_code_retries_with_a_new_key(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": "130429", "msg": "throughput"}))
    result = await aclient.messages.send_many(messages(sender.digits, 2), concurrency=1)
    assert [o.status for o in result] == ["sent", "sent"]
    keys = [r["headers"]["idempotency-key"] for r in sandbox.sent_messages()]
    assert keys[1] == keys[0] + ".r1" == result.outcomes[0].idempotency_key


async def test_rate_limit_paces_an_async_campaign(
    aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    started = time.monotonic()
    result = await aclient.messages.send_many(messages(sender.digits, 60), rate_limit=60)
    assert result.counts["sent"] == 60
    assert time.monotonic() - started >= 0.9


async def test_campaign_id_gives_the_same_keys(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    items = messages(sender.digits, 10)
    first = await aclient.messages.send_many(items, campaign_id="autumn")
    second = await aclient.messages.send_many(items, campaign_id="autumn")
    assert [o.idempotency_key for o in first] == [o.idempotency_key for o in second]
    assert all(uuid.UUID(o.idempotency_key or "").version == 5 for o in first)
    assert sandbox.stats()["replayed"] == 10 and sandbox.stats()["accepted"] == 10


async def test_a_closed_async_client_refuses_campaigns(sandbox: Sandbox, sender: Number) -> None:
    client = sandbox.async_client()
    await client.aclose()
    items = messages(sender.digits, 3)
    with pytest.raises(bizmsg.ClientClosedError):
        await client.messages.send_many(items)
    with pytest.raises(bizmsg.ClientClosedError):
        await client.messages.plan(items)
    with pytest.raises(bizmsg.ClientClosedError):
        client.messages.send_many_iter(items)
    assert sandbox.requests() == []


async def test_plan_and_dry_run_of_a_hundred_thousand_row_async_generator(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """``await plan()`` and ``send_many(dry_run=True)`` read an async generator of 100k rows
    (every 1000th+7 invalid, every 1000th+9 a repeat) and send nothing."""
    async def rows(count: int) -> AsyncIterator[dict[str, Any]]:
        for i in range(count):
            if i % 1000 == 7:
                yield message(sender.digits, i, to="12")
            elif i % 1000 == 9:
                yield message(sender.digits, i - 1)
            else:
                yield message(sender.digits, i)

    plan = await aclient.messages.plan(rows(100_000), pace="auto")
    assert (plan.total, plan.invalid_count, plan.duplicate_count, plan.to_send) == (
        100_000, 100, 100, 99_800)
    assert plan.duplicates[0] == (9, 8) and plan.invalid[0][0] == 7
    assert plan.senders[0].pace == 60.0 and plan.accounts[0].unique_recipients == 99_800
    assert plan.estimated_duration is not None
    assert abs(plan.estimated_duration.total_seconds() - 99_799 * 1.005 / 60) < 1
    dry = await aclient.messages.send_many(rows(3000), dry_run=True, rate_limit=100)
    assert isinstance(dry, bizmsg.CampaignPlan)
    assert dry.total == 3000 and dry.to_send == 2994
    assert dry.estimated_duration is not None
    assert abs(dry.estimated_duration.total_seconds() - 2993 * 1.005 / 100) < 1e-6
    assert sandbox.sent_messages() == []


async def test_an_async_input_that_raises_keeps_what_it_gave(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """An exception from an async generator is raised with ``.bulk_result``, holding an
    outcome for each item it yielded before failing."""
    async def rows() -> AsyncIterator[dict[str, Any]]:
        for item in messages(sender.digits, 10):
            yield item
        raise OSError("the stream broke")

    with pytest.raises(OSError, match="stream broke") as caught:
        await aclient.messages.send_many(rows())
    partial: bizmsg.BulkResult = caught.value.bulk_result  # type: ignore[attr-defined]
    assert [o.index for o in partial] == list(range(10))
    settle(sandbox)
    assert sorted(commits_by_recipient(sandbox)) == sorted(o.message["to"] for o in partial.sent())


# --- cancelling the task ------------------------------------------------------------------------


async def wait_until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_cancelling_the_task_settles_messages_in_flight(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """Cancelling the task that awaits ``send_many``: no new message is taken, those in flight
    finish (reported ``sent``), and ``CancelledError`` carries ``.bulk_result`` with an outcome
    for every item pulled."""
    sandbox.inject("send", delay=0.2, times=None)
    source = Pulls(sender.digits, 100_000)
    task = asyncio.create_task(aclient.messages.send_many(source.aiter(), concurrency=8))
    await wait_until(lambda: sandbox.stats()["accepted"] >= 16)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    partial: bizmsg.BulkResult = caught.value.bulk_result  # type: ignore[attr-defined]
    assert partial.stop_reason == "interrupted"
    assert [o.index for o in partial] == list(range(source.pulled))
    assert source.pulled < 100_000
    assert partial.counts["unknown"] == 0
    assert partial.counts["sent"] + partial.counts["skipped"] == len(partial)
    settle(sandbox)
    commits = commits_by_recipient(sandbox)
    assert max(commits.values()) == 1 and len(commits) >= 16
    assert sorted(o.message["to"] for o in partial.sent()) == sorted(commits)


async def test_a_cancel_arriving_with_a_batch_of_outcomes_loses_none(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """The loop is kept busy while the first batch of outcomes arrives, then the task is
    cancelled: that batch must still be in ``bulk_result``, next to the ones that finished
    after the cancel. (A regression test: the cancelled wait's result used to be dropped, 14
    or 15 of 16 sent messages reported.)"""
    sandbox.inject("send", delay=0.2, times=None)
    task = asyncio.create_task(aclient.messages.send_many(messages(sender.digits, 16),
                                                          concurrency=8))
    await wait_until(lambda: sandbox.stats()["accepted"] >= 8)
    time.sleep(0.4)  # blocks the loop: the first outcomes are set on the future meanwhile
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    partial: bizmsg.BulkResult = caught.value.bulk_result  # type: ignore[attr-defined]
    settle(sandbox)
    assert sorted(o.message["to"] for o in partial.sent()) == sorted(commits_by_recipient(sandbox))
    assert [o.index for o in partial] == list(range(16))


async def test_a_second_cancel_abandons_messages_in_flight_as_unknown(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    """Cancelling again does not wait for slow sends: those in flight are ``unknown``, with
    the keys they went out with."""
    sandbox.delay = 5.0
    task = asyncio.create_task(aclient.messages.send_many(messages(sender.digits, 100),
                                                          concurrency=8))
    await wait_until(lambda: sum(1 for r in sandbox.requests() if r["status"] == 0) >= 8)
    task.cancel()
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    partial: bizmsg.BulkResult = caught.value.bulk_result  # type: ignore[attr-defined]
    unknown = partial.unknown()
    assert len(unknown) == 8 and partial.counts["sent"] == 0
    keys = {r["headers"]["idempotency-key"] for r in sandbox.sent_messages()}
    for outcome in unknown:
        assert outcome.reason == "abandoned while in flight: it may have been sent"
        assert isinstance(outcome.error, bizmsg.SendOutcomeUnknownError)
        assert outcome.idempotency_key in keys
    assert partial.counts["skipped"] == len(partial) - 8
    sandbox.delay = 0


async def test_outcome_statuses_are_counted(aclient: bizmsg.AsyncClient, sender: Number,
                                            globex_sender: Number) -> None:
    items: list[Any] = [message(sender.digits, 0), message(globex_sender.digits, 1), None]
    result = await aclient.messages.send_many(items)
    assert result.counts == {"sent": 1, "rejected": 1, "unknown": 0, "failed": 1, "skipped": 0}
    assert Counter(r["status"] for r in result.to_records()) == {"sent": 1, "rejected": 1,
                                                                 "failed": 1}


# --- an async token callable --------------------------------------------------------------------


async def test_a_campaign_awaits_an_async_token_callable_on_the_callers_loop(
        sandbox: Sandbox, sender: Number) -> None:
    """``send_many`` and ``send_many_iter`` of an ``AsyncClient`` built with an ``async def``
    token: the token's coroutine runs on the caller's loop, and after a ``401`` a fresh one is
    awaited (before, every message failed: "the token callable is async; Client needs a plain
    callable")."""
    caller = asyncio.get_running_loop()
    loops: list[asyncio.AbstractEventLoop] = []
    tokens = iter(["stale"])

    async def token() -> str:
        await asyncio.sleep(0)
        loops.append(asyncio.get_running_loop())
        return next(tokens, sandbox.token)

    async with bizmsg.AsyncClient(token, base_url=sandbox.base_url) as client:
        result = await client.messages.send_many(messages(sender.digits, 5), concurrency=1)
        streamed = [o async for o in client.messages.send_many_iter(
            messages(sender.digits, 5, start=5))]
    assert result.counts["sent"] == 5, result
    assert [o.status for o in streamed] == ["sent"] * 5
    assert loops and all(loop is caller for loop in loops)
    assert [r["status"] for r in sandbox.requests()][:2] == [401, 200]
    assert commits_by_recipient(sandbox).most_common(1)[0][1] == 1
