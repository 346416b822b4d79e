"""Threads sharing a client, Ctrl-C during a blocked call, fork, and process exit.

The Ctrl-C tests set up the SIGINT disposition they rely on themselves (``DEFAULT_SIGINT`` in a
child's script, the ``sigint_handler`` fixture in this process): started with SIGINT ignored
(``nohup``, a background job of a script, many CI runners), Python installs no KeyboardInterrupt
handler and children inherit the ignored signal. ``.ci/run`` runs them so started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bizmsg.testing import Sandbox
from conftest import DEFAULT_SIGINT, Number, committed


def exit_code_of_child(pid: int, timeout: float, what: str) -> int:
    """Waits for a forked child; kills it and fails the test if it hangs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(what)


def test_one_client_shared_by_eight_threads(sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client() as reference:
        accounts = {n: reference.business_accounts.list(page_no=n, page_size=1) for n in (1, 2, 3)}
        numbers = reference.business_phone_numbers.list(page_size=1000)
    sandbox.clear_requests()
    barrier = threading.Barrier(8)

    def work(worker: int) -> list[tuple[str, Any]]:
        barrier.wait(5)
        done: list[tuple[str, Any]] = []
        for round_ in range(4):
            page_no = (worker + round_) % 3 + 1
            done.append(("accounts", (page_no, client.business_accounts.list(page_no=page_no, page_size=1))))
            done.append(("numbers", client.business_phone_numbers.list(page_size=1000)))
            to = f"1415{worker:03d}{round_:04d}"
            done.append(("send", (to, client.messages.send_template(
                to=to, from_=sender.digits, name="n", parameters=[str(worker)], language="en"))))
        return done

    with sandbox.client() as client, ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(work, range(8)))

    sms_ids = set()
    for worker, done in enumerate(outcomes):
        assert len(done) == 12
        for kind, value in done:
            if kind == "accounts":
                page_no, page = value
                assert page == accounts[page_no]
                assert page.current == page_no
            elif kind == "numbers":
                assert value == numbers
            else:
                to, result = value
                assert result.ok and result.meta is not None and result.meta.attempts == 1
                sms_ids.add(result.sms_id)
    assert len(sms_ids) == 32
    sent = committed(sandbox)
    assert len(sent) == 32
    by_key = {r["headers"]["idempotency-key"]: r for r in sent}
    assert len(by_key) == 32
    for record in sent:
        worker = int(record["body"]["to"][4:7])
        assert record["body"]["template"]["parameters"] == f'["{worker}"]'
    assert len(sandbox.requests()) == 8 * 4 * 3


def test_threads_and_asyncio_share_the_runtime(sandbox: Sandbox) -> None:
    import asyncio

    errors: list[BaseException] = []

    def async_worker() -> None:
        async def run() -> None:
            async with sandbox.async_client() as client:
                pages = await asyncio.gather(*[client.business_accounts.list() for _ in range(5)])
                assert all(len(p) == 3 for p in pages)
        try:
            asyncio.run(run())
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    with sandbox.client() as client:
        threads = [threading.Thread(target=async_worker) for _ in range(3)]
        for t in threads:
            t.start()
        for _ in range(5):
            assert len(client.business_phone_numbers.list(page_size=2)) == 2
        for t in threads:
            t.join(20)
    assert errors == []
    assert len(sandbox.requests()) == 3 * 5 + 5


CTRL_C_SCRIPT = DEFAULT_SIGINT + textwrap.dedent(
    """
    import sys, time
    from bizmsg.testing import Sandbox
    sandbox = Sandbox(delay=30)
    client = sandbox.client()
    print("calling", flush=True)
    started = time.monotonic()
    try:
        client.{call}
    finally:
        print(f"left the call after {{time.monotonic() - started:.2f}}s", flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    "call",
    [
        "business_accounts.list()",
        "messages.send_template(to='14155550100', from_='14155550199', name='n', "
        "parameters='p', language='en')",
    ],
)
def test_ctrl_c_interrupts_a_blocked_sync_call(call: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT.format(call=call)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "calling"
        time.sleep(1.0)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=5)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert took < 5
    assert "KeyboardInterrupt" in err, err
    assert process.returncode != 0
    assert "left the call after" in out
    assert float(out.split("after ")[1].rstrip("s\n")) < 3.0
    if call.startswith("messages.") and sys.version_info >= (3, 11):
        # The send may have reached the service: the interrupt says with which key.
        assert "may have reached the service" in err and "Idempotency-Key" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_aborts_the_call_and_its_remaining_retries(sandbox: Sandbox) -> None:
    # Interrupted during a retry's wait: no later attempt may reach the service.
    sandbox.inject("business_accounts", status=503, headers={"Retry-After": "1"}, times=5)
    script = DEFAULT_SIGINT + textwrap.dedent(
        f"""
        import time, bizmsg
        client = bizmsg.Client({sandbox.token!r}, base_url={sandbox.base_url!r}, max_retries=4)
        print("calling", flush=True)
        try:
            client.business_accounts.list()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        time.sleep(2.5)  # time enough for two more attempts, were the call still running
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "calling"
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "interrupted" in out, err
    assert len(sandbox.requests()) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_this_process_interrupts_a_send_and_the_client_still_works(
    sandbox: Sandbox, sender: Number, sigint_handler: None
) -> None:
    sandbox.delay = 5
    ctrl_c = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    with sandbox.client() as client:
        started = time.monotonic()
        ctrl_c.start()
        try:
            with pytest.raises(KeyboardInterrupt) as caught:
                client.messages.send_template(
                    to="14155550100", from_=sender.digits, name="n", parameters="p",
                    language="en", idempotency_key="interrupted-send-key",
                )
        finally:
            ctrl_c.cancel()
            ctrl_c.join()
        assert time.monotonic() - started < 3
        notes = getattr(caught.value, "__notes__", [])
        assert any("Idempotency-Key" in n and "interrupted-send-key" in n for n in notes), notes
        # For code, too: the key as an attribute.
        assert getattr(caught.value, "idempotency_key", None) == "interrupted-send-key"
        sandbox.delay = 0
        assert len(client.business_accounts.list(page_size=1)) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork semantics tested on Linux")
def test_a_forked_child_can_use_the_parents_client(sandbox: Sandbox) -> None:
    client = sandbox.client()
    assert len(client.business_accounts.list()) == 3  # the runtime and pool exist now
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            page = client.business_phone_numbers.list(page_size=2)
            code = 0 if len(page) == 2 and page.meta is not None else 3
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    assert exit_code_of_child(pid, timeout=15, what="the forked child hung") == 0
    # The parent's client still works after the fork.
    assert len(client.business_accounts.list(page_size=1)) == 1
    client.close()
    assert [r["status"] for r in sandbox.requests()] == [200, 200, 200]
    assert sandbox.requests()[1]["query"] == "pageNo=1&pageSize=2"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork semantics tested on Linux")
def test_a_forked_child_can_use_an_async_client(sandbox: Sandbox) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, os, sys
        import bizmsg
        client = bizmsg.AsyncClient({sandbox.token!r}, base_url={sandbox.base_url!r})
        async def fetch():
            return len(await client.business_accounts.list(page_size=2))
        assert asyncio.run(fetch()) == 2
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(0 if asyncio.run(fetch()) == 2 else 3)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert len(sandbox.requests()) == 2


EXIT_SCRIPT = textwrap.dedent(
    """
    import asyncio
    from bizmsg.testing import Sandbox
    sandbox = Sandbox()
    async def main():
        client = sandbox.async_client()
        await client.business_phone_numbers.list(page_size=1)
    asyncio.run(main())
    """
)


def test_the_interpreter_exits_cleanly_right_after_an_async_call() -> None:
    # Regression: this used to crash about 1 run in 5 (SIGSEGV, or "Fatal Python error:
    # PyGILState_Release ... finalizing") until the runtime was shut down at exit.
    failures: list[str] = []
    for _ in range(12):
        # Two at a time: both cores busy, the run stays short.
        runs = [subprocess.Popen([sys.executable, "-c", EXIT_SCRIPT], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for run in runs:
            _, err = run.communicate(timeout=30)
            if run.returncode != 0:
                failures.append(f"exit code {run.returncode}: {err.strip()[-300:]}")
        if failures:
            break
    assert failures == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork semantics tested on Linux")
def test_a_forked_child_can_continue_an_inherited_page_iterator(sandbox: Sandbox) -> None:
    # Regression: the child waited forever for the read-ahead task of the parent's runtime.
    sandbox.delay = 0.5  # set before page 1, so page 2's read-ahead is in flight at the fork
    pages = sandbox.client().business_phone_numbers.iter_pages(page_size=2)
    first = next(pages)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = 0 if next(pages).current == 2 else 3
        finally:
            os._exit(code)
    assert exit_code_of_child(pid, timeout=10, what="the forked child hung on the inherited page iterator") == 0
    assert first.current == 1
