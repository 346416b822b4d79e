"""Retries: which failures are retried for lists and for sends, ``Retry-After``, backoff,
``on_retry``, ``max_retries`` per client and per call, and Idempotency-Key reuse."""

from __future__ import annotations

import threading
import time
from email.utils import formatdate
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, committed, free_port

NOW = {"Retry-After": "0"}


class Recorder:
    """An ``on_retry`` hook that remembers its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, BaseException, float]] = []

    def __call__(self, attempt: int, error: BaseException, delay: float) -> None:
        self.calls.append((attempt, error, delay))

    @property
    def attempts(self) -> list[int]:
        return [c[0] for c in self.calls]

    @property
    def errors(self) -> list[type]:
        return [type(c[1]) for c in self.calls]

    @property
    def delays(self) -> list[float]:
        return [c[2] for c in self.calls]


def send(client: bizmsg.Client, sender: Number, **options: Any) -> bizmsg.SendResult:
    return client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en", **options
    )


# --- lists -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_lists_are_retried_on_transient_statuses(sandbox: Sandbox, status: int) -> None:
    sandbox.inject("business_accounts", status=status, headers=NOW, times=2)
    hook = Recorder()
    with sandbox.client(on_retry=hook) as client:
        page = client.business_accounts.list()
    assert len(page) == 3
    assert [r["status"] for r in sandbox.requests()] == [status, status, 200]
    assert page.meta is not None and page.meta.attempts == 3
    assert hook.attempts == [1, 2]
    assert hook.delays == [0.0, 0.0]
    for _, error, _ in hook.calls:
        assert isinstance(error, bizmsg.APIError) and error.status_code == status
    expected = bizmsg.RateLimitError if status == 429 else (
        bizmsg.ServerError if status >= 500 else bizmsg.APIError)
    assert hook.errors == [expected, expected]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_lists_are_not_retried_on_other_statuses(sandbox: Sandbox, status: int) -> None:
    sandbox.inject("business_phone_numbers", status=status, headers=NOW)
    hook = Recorder()
    with sandbox.client(on_retry=hook, max_retries=3) as client:
        with pytest.raises(bizmsg.APIError) as caught:
            client.business_phone_numbers.list()
    assert caught.value.status_code == status
    assert len(sandbox.requests()) == 1
    assert hook.calls == []


def test_lists_give_up_after_max_retries(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=503, headers=NOW, times=5)
    hook = Recorder()
    with sandbox.client(max_retries=2, on_retry=hook) as client:
        with pytest.raises(bizmsg.ServerError) as caught:
            client.business_accounts.list()
    assert caught.value.request_id == sandbox.requests()[-1]["request_id"]
    assert len(sandbox.requests()) == 3
    assert hook.attempts == [1, 2]


def test_lists_are_retried_after_a_cut_connection_with_backoff(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", cut_connection=True)
    hook = Recorder()
    with sandbox.client(max_retries=1, on_retry=hook) as client:
        started = time.monotonic()
        page = client.business_phone_numbers.list(page_size=2)
        elapsed = time.monotonic() - started
    assert len(page) == 2
    assert hook.errors == [bizmsg.ConnectionBrokenError]
    # No Retry-After: exponential backoff, first delay 0.5 s minus up to 25 % jitter.
    [delay] = hook.delays
    assert 0.375 <= delay <= 0.5
    assert elapsed >= delay
    assert [r["status"] for r in sandbox.requests()] == [200, 200]


def test_lists_are_retried_after_a_timeout(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", delay=1.5)
    hook = Recorder()
    timeout = bizmsg.Timeout(connect=0.15, read=0.15)
    with sandbox.client(max_retries=1, on_retry=hook, timeout=timeout) as client:
        page = client.business_accounts.list()
    assert len(page) == 3
    assert hook.errors == [bizmsg.TimeoutError]
    assert page.meta is not None and page.meta.attempts == 2
    assert len(sandbox.requests()) == 2


def test_lists_are_retried_on_connect_errors(sandbox: Sandbox) -> None:
    hook = Recorder()
    port = free_port()
    with bizmsg.Client("t", base_url=f"http://127.0.0.1:{port}", max_retries=2, on_retry=hook,
                       timeout=bizmsg.Timeout(connect=1.0, total=5.0)) as client:
        with pytest.raises(bizmsg.ConnectError):
            client.business_accounts.list()
    assert hook.attempts == [1, 2]
    assert hook.errors == [bizmsg.ConnectError, bizmsg.ConnectError]
    assert 0.375 <= hook.delays[0] <= 0.5 and 0.75 <= hook.delays[1] <= 1.0


def test_retry_after_seconds_is_honoured(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=429, headers={"Retry-After": "0.4"})
    hook = Recorder()
    with sandbox.client(on_retry=hook) as client:
        started = time.monotonic()
        client.business_accounts.list()
        elapsed = time.monotonic() - started
    assert hook.delays == [0.4]
    assert isinstance(hook.calls[0][1], bizmsg.RateLimitError)
    assert hook.calls[0][1].retry_after == 0.4  # type: ignore[attr-defined]
    assert 0.4 <= elapsed < 1.5


def test_retry_after_http_date_is_honoured(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=503,
                   headers={"Retry-After": formatdate(time.time() + 1, usegmt=True)})
    hook = Recorder()
    with sandbox.client(on_retry=hook) as client:
        client.business_accounts.list()
    [delay] = hook.delays
    assert 0.0 <= delay <= 1.0


def test_a_retry_after_beyond_the_cap_is_not_waited_for(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=429, headers={"Retry-After": "3600"}, times=3)
    hook = Recorder()
    with sandbox.client(max_retries=2, on_retry=hook) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.RateLimitError) as caught:
            client.business_accounts.list()
        assert time.monotonic() - started < 1.0
    assert caught.value.retry_after == 3600.0
    assert hook.calls == []
    assert len(sandbox.requests()) == 1


@pytest.mark.parametrize("value", ["99999999999999999999", "1e20"])
def test_an_absurd_retry_after_is_still_a_rate_limit_error(sandbox: Sandbox, value: str) -> None:
    sandbox.inject("business_accounts", status=429, headers={"Retry-After": value})
    with sandbox.client(max_retries=2) as client:
        with pytest.raises(bizmsg.RateLimitError):
            client.business_accounts.list()
    assert len(sandbox.requests()) == 1


@pytest.mark.parametrize("value", ["soon", "-5", "NaN", "inf", ""])
def test_an_unusable_retry_after_is_ignored(sandbox: Sandbox, value: str) -> None:
    sandbox.inject("business_accounts", status=429, headers={"Retry-After": value})
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.RateLimitError) as caught:
            client.business_accounts.list()
    assert caught.value.retry_after is None


def test_the_total_timeout_is_a_deadline_across_attempts(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=503, headers={"Retry-After": "0.3"}, times=10)
    hook = Recorder()
    with sandbox.client(max_retries=10, on_retry=hook) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.ServerError):
            client.business_accounts.list(timeout=bizmsg.Timeout(total=0.5))
        elapsed = time.monotonic() - started
    # A wait that would end past the deadline is not started.
    assert hook.attempts == [1]
    assert len(sandbox.requests()) == 2
    assert elapsed < 0.6  # a third attempt would have started at 0.6 s


def test_max_retries_per_call_overrides_the_client(sandbox: Sandbox) -> None:
    with sandbox.client(max_retries=0) as strict, sandbox.client(max_retries=5) as patient:
        sandbox.inject("business_phone_numbers", status=503, headers=NOW, times=2)
        page = strict.business_phone_numbers.list(max_retries=2)
        assert page.meta is not None and page.meta.attempts == 3
        sandbox.inject("business_phone_numbers", status=503, headers=NOW, times=2)
        with pytest.raises(bizmsg.ServerError):
            patient.business_phone_numbers.list(max_retries=0)
        sandbox.clear_faults()
    assert [r["status"] for r in sandbox.requests()] == [503, 503, 200, 503]


def test_max_retries_per_client_via_with_options(sandbox: Sandbox) -> None:
    hook = Recorder()
    with sandbox.client(max_retries=0) as client:
        retrying = client.with_options(max_retries=1, on_retry=hook)
        sandbox.inject("business_accounts", status=502, headers=NOW)
        assert len(retrying.business_accounts.list()) == 3
    assert hook.attempts == [1]


def test_an_on_retry_hook_that_raises_does_not_stop_the_retry(sandbox: Sandbox) -> None:
    def hook(attempt: int, error: BaseException, delay: float) -> None:
        raise RuntimeError("hook failed")

    sandbox.inject("business_accounts", status=503, headers=NOW)
    seen: list[Any] = []
    old = __import__("sys").unraisablehook
    __import__("sys").unraisablehook = seen.append
    try:
        with sandbox.client(on_retry=hook) as client:
            assert len(client.business_accounts.list()) == 3
    finally:
        __import__("sys").unraisablehook = old
    assert len(seen) == 1 and isinstance(seen[0].exc_value, RuntimeError)


async def test_async_lists_are_retried(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", status=504, headers=NOW)
    sandbox.inject("business_phone_numbers", cut_connection=True)
    hook = Recorder()
    async with sandbox.async_client(on_retry=hook) as client:
        page = await client.business_phone_numbers.list(page_size=1)
    assert len(page) == 1
    assert hook.errors == [bizmsg.ServerError, bizmsg.ConnectionBrokenError]
    assert page.meta is not None and page.meta.attempts == 3


# --- sends -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_sends_are_retried_when_the_service_did_not_process_them(
    sandbox: Sandbox, sender: Number, status: int
) -> None:
    sandbox.inject("send", status=status, headers=NOW, times=2)
    hook = Recorder()
    with sandbox.client(on_retry=hook) as client:
        result = send(client, sender)
    records = sandbox.sent_messages()
    assert [r["status"] for r in records] == [status, status, 200]
    keys = {r["headers"]["idempotency-key"] for r in records}
    assert len(keys) == 1  # the same key on every retry of one send
    assert result.meta is not None
    assert result.meta.attempts == 3
    assert result.meta.idempotency_key == keys.pop()
    assert {r["body_text"] for r in records} == {records[0]["body_text"]}
    assert len(committed(sandbox)) == 1
    assert hook.attempts == [1, 2]


@pytest.mark.parametrize("status", [408, 500, 502, 504])
def test_sends_are_not_retried_on_statuses_that_may_follow_processing(
    sandbox: Sandbox, sender: Number, status: int
) -> None:
    sandbox.inject("send", status=status, headers=NOW)
    hook = Recorder()
    with sandbox.client(max_retries=3, on_retry=hook) as client:
        with pytest.raises(bizmsg.BizmsgError) as caught:
            send(client, sender)
    error = caught.value
    # 500, 502 and 504 may follow processing: an unknown outcome caused by the APIError.
    if status in (500, 502, 504):
        assert isinstance(error, bizmsg.SendOutcomeUnknownError)
        error = error.__cause__  # type: ignore[assignment]
    assert isinstance(error, bizmsg.APIError) and error.status_code == status
    assert len(sandbox.sent_messages()) == 1
    assert hook.calls == []


def test_sends_are_never_retried_after_a_cut(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", cut_connection=True)
    hook = Recorder()
    with sandbox.client(max_retries=5, on_retry=hook) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError):
            send(client, sender)
    assert len(sandbox.sent_messages()) == 1
    assert len(committed(sandbox)) == 1  # it did go out
    assert hook.calls == []


def test_sends_are_never_retried_after_a_timeout(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", delay=0.8)
    hook = Recorder()
    timeout = bizmsg.Timeout(connect=0.1, read=0.2)
    with sandbox.client(max_retries=5, on_retry=hook, timeout=timeout) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            send(client, sender)
    assert isinstance(caught.value.__cause__, bizmsg.TimeoutError)
    assert len(sandbox.sent_messages()) == 1
    assert hook.calls == []


def test_a_cut_before_processing_is_still_an_unknown_outcome_for_a_send(
    sandbox: Sandbox, sender: Number
) -> None:
    # The client cannot tell a cut before processing from one after it: not retried.
    sandbox.inject("send", status=503, cut_connection=True)
    with sandbox.client(max_retries=3) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            send(client, sender)
        again = send(client, sender, idempotency_key=caught.value.idempotency_key)
    first, second = sandbox.sent_messages()
    assert first["status"] == 503 and second["status"] == 200
    assert second["idempotent_replay"] is False  # the first was never processed
    assert again.sms_id == "sms_00000000000000000001"
    assert len(committed(sandbox)) == 1


def test_lists_are_retried_after_a_cut_before_processing(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=500, cut_connection=True)
    hook = Recorder()
    with sandbox.client(max_retries=1, on_retry=hook) as client:
        assert len(client.business_accounts.list()) == 3
    assert hook.errors == [bizmsg.ConnectionBrokenError]


def test_sends_are_retried_on_connect_errors_and_sent_once(sender: Number) -> None:
    port = free_port()
    started: list[Sandbox] = []
    ready = threading.Event()

    def hook(attempt: int, error: BaseException, delay: float) -> None:
        assert isinstance(error, bizmsg.ConnectError)
        ready.set()

    def start_service() -> None:
        # The service comes up during the client's backoff (0.375 to 0.5 s).
        ready.wait(5)
        started.append(Sandbox(port=port))

    starter = threading.Thread(target=start_service)
    starter.start()
    try:
        with bizmsg.Client("sandbox-token-acme", base_url=f"http://127.0.0.1:{port}",
                           max_retries=2, on_retry=hook) as client:
            result = send(client, sender)
        starter.join(5)
        [sandbox] = started
        assert result.sms_id == "sms_00000000000000000001"
        assert result.meta is not None and result.meta.attempts == 2
        [record] = sandbox.sent_messages()
        assert record["headers"]["idempotency-key"] == result.meta.idempotency_key
        assert len(committed(sandbox)) == 1
    finally:
        starter.join(5)
        for sb in started:
            sb.close()


def test_a_fresh_key_per_send_and_the_same_key_per_retry(sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client() as client:
        sandbox.inject("send", status=503, headers=NOW)
        first = send(client, sender)
        sandbox.inject("send", status=429, headers=NOW)
        second = send(client, sender)
    keys = [r["headers"]["idempotency-key"] for r in sandbox.sent_messages()]
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2]
    assert first.meta is not None and second.meta is not None
    assert (first.meta.idempotency_key, second.meta.idempotency_key) == (keys[0], keys[2])
    assert first.sms_id != second.sms_id
    assert len(committed(sandbox)) == 2


def test_an_explicit_key_is_kept_across_retries(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", status=503, headers=NOW)
    with sandbox.client() as client:
        send(client, sender, idempotency_key="invoice-77")
    assert [r["headers"]["idempotency-key"] for r in sandbox.sent_messages()] == [
        "invoice-77", "invoice-77"]


def test_send_max_retries_per_call(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", status=503, headers=NOW, times=2)
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.ServerError):
            send(client, sender)
        result = send(client, sender, max_retries=1)
    assert [r["status"] for r in sandbox.sent_messages()] == [503, 503, 200]
    assert result.meta is not None and result.meta.attempts == 2
    assert len(committed(sandbox)) == 1


async def test_concurrent_sends_with_one_key_commit_once(sandbox: Sandbox, sender: Number) -> None:
    import asyncio

    async with sandbox.async_client() as client:
        results = await asyncio.gather(*[
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en",
                idempotency_key="one-key",
            )
            for _ in range(6)
        ])
    assert {r.sms_id for r in results} == {"sms_00000000000000000001"}
    assert len(committed(sandbox)) == 1
    assert sum(r["idempotent_replay"] for r in sandbox.sent_messages()) == 5


async def test_async_sends_are_retried_once_sent(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", status=429, headers=NOW)
    sandbox.inject("send", status=503, headers=NOW)
    hook = Recorder()
    async with sandbox.async_client(on_retry=hook) as client:
        result = await client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
        sandbox.inject("send", status=500, headers=NOW)
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            await client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    assert isinstance(caught.value.__cause__, bizmsg.ServerError)
    assert hook.errors == [bizmsg.RateLimitError, bizmsg.ServerError]
    assert result.meta is not None and result.meta.attempts == 3
    assert len({r["headers"]["idempotency-key"] for r in sandbox.sent_messages()[:3]}) == 1
    assert len(committed(sandbox)) == 1


async def test_async_send_is_not_retried_after_a_timeout(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", delay=0.8)
    async with sandbox.async_client(max_retries=4) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError):
            await client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p",
                language="en", timeout=0.25,
            )
    assert len(sandbox.sent_messages()) == 1
