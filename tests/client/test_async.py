"""The asyncio client beyond the per-operation tests in the other files: concurrency,
cancellation, several loops, and the async surface itself."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, committed


def test_every_async_method_is_a_coroutine_function() -> None:
    client = bizmsg.AsyncClient("t", base_url="https://api.example.com")
    for method in (client.messages.send, client.messages.send_template,
                   client.business_accounts.list, client.business_phone_numbers.list,
                   client.aclose, client.__aenter__, client.__aexit__):
        assert inspect.iscoroutinefunction(method), method
    client.close()


def test_the_sync_surface_matches_the_async_one() -> None:
    sync = bizmsg.Client("t", base_url="https://api.example.com")
    asy = bizmsg.AsyncClient("t", base_url="https://api.example.com")
    for resource in ("messages", "business_accounts", "business_phone_numbers"):
        sync_methods = {n for n in dir(getattr(sync, resource)) if not n.startswith("_")}
        async_methods = {n for n in dir(getattr(asy, resource)) if not n.startswith("_")}
        assert sync_methods == async_methods, resource
        for name in sync_methods:
            s = inspect.signature(getattr(getattr(sync, resource), name))
            a = inspect.signature(getattr(getattr(asy, resource), name))
            assert list(s.parameters) == list(a.parameters), (resource, name)
    sync.close()
    asy.close()


async def test_concurrent_calls_on_one_client(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    sandbox.delay = 0.2
    started = time.monotonic()
    results = await asyncio.gather(
        *[aclient.business_accounts.list(page_no=i % 3 + 1, page_size=1) for i in range(6)],
        *[aclient.business_phone_numbers.list(page_size=2) for _ in range(4)],
        *[aclient.messages.send_template(to=f"1415555{i:04d}", from_=sender.digits, name="n",
                                         parameters="p", language="en") for i in range(6)],
    )
    elapsed = time.monotonic() - started
    # Sixteen 0.2 s calls at once take about 0.2 s, not 3.2 s: nothing serializes them.
    assert elapsed < 1.5
    accounts, numbers, sends = results[:6], results[6:10], results[10:]
    assert [p.current for p in accounts] == [1, 2, 3, 1, 2, 3]
    assert accounts[0] == accounts[3] and accounts[1] == accounts[4]
    assert all(p == numbers[0] for p in numbers)
    assert len({r.sms_id for r in sends}) == 6
    assert sorted(r["body"]["to"] for r in committed(sandbox)) == [f"1415555{i:04d}" for i in range(6)]


async def test_cancelling_drops_the_rust_future_no_later_attempt_is_made(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient
) -> None:
    # asyncio would cancel the Python future on its own; only a dropped Rust future also
    # stops the retries it had scheduled.
    sandbox.inject("business_accounts", status=503, headers={"Retry-After": "0.5"}, times=5)
    task = asyncio.create_task(aclient.business_accounts.list(max_retries=4))
    while not sandbox.requests():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(1.3)  # two more attempts would have happened by now
    assert len(sandbox.requests()) == 1


async def test_on_retry_of_an_async_client_runs_on_the_event_loop(sandbox: Sandbox) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []
    sandbox.inject("business_accounts", status=503, headers={"Retry-After": "0"})
    async with sandbox.async_client(on_retry=lambda *_: seen.append(threading.get_ident())) as c:
        await c.business_accounts.list()
    assert seen == [loop_thread]


async def test_cancelling_a_slow_call_is_prompt_and_leaves_the_client_usable(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient
) -> None:
    sandbox.inject("business_accounts", delay=3.0)
    task = asyncio.create_task(aclient.business_accounts.list())
    await asyncio.sleep(0.3)
    assert not task.done()
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 0.5
    assert task.cancelled()
    page = await aclient.business_accounts.list(page_size=1)
    assert len(page) == 1 and page.meta is not None and page.meta.attempts == 1


async def test_wait_for_timeout_cancels_the_call(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    sandbox.inject("business_phone_numbers", delay=3.0)
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(aclient.business_phone_numbers.list(), timeout=0.3)
    assert time.monotonic() - started < 0.8
    assert len(await aclient.business_phone_numbers.list(page_size=3)) == 3


async def test_cancelled_send_may_still_have_gone_out(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    # Cancelling stops waiting; the service still processes what it received.
    sandbox.inject("send", delay=2.0)
    task = asyncio.create_task(aclient.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if sandbox.sent_messages() and sandbox.sent_messages()[0]["status"] == 200:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(committed(sandbox)) == 1


def test_one_async_client_on_several_loops(sandbox: Sandbox) -> None:
    client = sandbox.async_client()

    async def fetch() -> int:
        page = await client.business_accounts.list(page_size=2)
        return len(page)

    assert asyncio.run(fetch()) == 2
    assert asyncio.run(fetch()) == 2
    out: list[int] = []
    thread = threading.Thread(target=lambda: out.append(asyncio.run(fetch())))
    thread.start()
    thread.join(10)
    assert out == [2]
    client.close()
    assert len(sandbox.requests()) == 3


def test_async_client_on_a_loop_in_another_thread_while_this_one_runs_sync(sandbox: Sandbox) -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        aclient = sandbox.async_client()
        future = asyncio.run_coroutine_threadsafe(aclient.business_phone_numbers.list(page_size=1), loop)
        with sandbox.client() as client:
            assert len(client.business_accounts.list(page_size=1)) == 1
        assert len(future.result(timeout=10)) == 1
        aclient.close()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


async def test_async_with_and_aclose(sandbox: Sandbox) -> None:
    async with sandbox.async_client() as client:
        assert isinstance(client, bizmsg.AsyncClient)
        assert not client.is_closed
    assert client.is_closed
    other = sandbox.async_client()
    await other.aclose()
    await other.aclose()
    assert other.is_closed


async def test_sync_client_calls_inside_a_running_loop_still_work(sandbox: Sandbox) -> None:
    # Blocking, but allowed (scripts and notebooks do it); it must not deadlock.
    with sandbox.client() as client:
        assert len(client.business_accounts.list(page_size=2)) == 2
