"""``stop_on_sigterm=True``: SIGTERM (systemd, Docker, Kubernetes, Celery's warm shutdown,
``timeout``) stops a campaign the way the first Ctrl-C does, then raises ``SystemExit(143)``
with the partial result, and never takes a handler the application installed itself.

The signal is delivered for real, to a child process: the child sends it to itself from
``on_result`` once the first outcomes arrived, while messages are in flight (the sandbox holds
every answer a while), so the test does not depend on timing. Each child puts SIGTERM back to
its default disposition first: a test run started with SIGTERM ignored would hand that down.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Fault, Sandbox
from conftest import Number, committed

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

#: The start of every child: SIGTERM as a fresh process has it, a client on the sandbox, and
#: ``rows(n)``, n messages to distinct recipients.
PRELUDE = """\
import asyncio, json, os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_DFL)
import bizmsg
client = bizmsg.Client(sys.argv[1], base_url=sys.argv[2])
sender = sys.argv[3]
def rows(n):
    return [{"to": f"86138{i:08d}", "from": sender, "name": "t", "parameters": [str(i)],
             "language": "en"} for i in range(n)]
killed = []
def kill_once(batch):
    if not killed:
        killed.append(True)
        os.kill(os.getpid(), signal.SIGTERM)
def report(result, **more):
    print(json.dumps(dict(counts=result.counts, outcomes=len(result), reason=result.stop_reason,
                          handler=signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, **more)))
"""


def run_child(sandbox: Sandbox, sender: Number, body: str) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code, sandbox.token, sandbox.base_url,
                           sender.digits], capture_output=True, text=True, timeout=120)


@pytest.fixture
def slow(sandbox: Sandbox) -> Iterator[Sandbox]:
    """The sandbox, answering each send after 0.3 s: messages are in flight when SIGTERM
    arrives."""
    sandbox.inject("send", Fault(delay=0.3, times=None))
    yield sandbox


def test_sigterm_stops_send_many_gracefully_and_raises_system_exit(slow: Sandbox,
                                                                  sender: Number) -> None:
    done = run_child(slow, sender, """
        try:
            client.messages.send_many(rows(200), concurrency=4, on_result=kill_once,
                                      stop_on_sigterm=True)
        except SystemExit as exc:
            report(exc.bulk_result, code=exc.code)
    """)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["code"] == 143
    counts = seen["counts"]
    # The messages in flight settled (sent); the ones waiting were not sent; none in doubt.
    assert counts["sent"] >= 4 and counts["unknown"] == 0 and counts["failed"] == 0
    assert counts["sent"] + counts["skipped"] == seen["outcomes"] == 200
    assert counts["sent"] < 100 and seen["reason"] == "interrupted"
    assert seen["handler"], "the default SIGTERM disposition is back after the campaign"
    assert len(committed(slow)) == counts["sent"]


def test_uncaught_it_ends_the_program_with_status_143(slow: Sandbox, sender: Number) -> None:
    done = run_child(slow, sender, """
        client.messages.send_many(rows(200), concurrency=4, on_result=kill_once,
                                  stop_on_sigterm=True)
        print("not reached")
    """)
    assert done.returncode == 143, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_send_many_iter_yields_every_outcome_then_raises(slow: Sandbox, sender: Number) -> None:
    done = run_child(slow, sender, """
        seen = []
        try:
            for outcome in client.messages.send_many_iter(rows(200), concurrency=4,
                                                          on_result=kill_once,
                                                          stop_on_sigterm=True):
                seen.append(outcome.status)
        except SystemExit as exc:
            result = exc.bulk_result
            print(json.dumps(dict(code=exc.code, seen=len(seen), counts=result.counts,
                                  statuses=sorted(set(seen)))))
    """)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["code"] == 143
    assert seen["seen"] == sum(seen["counts"].values()) == 200
    assert seen["counts"]["skipped"] > 100
    assert seen["statuses"] == ["sent", "skipped"]


def test_async_send_many_stops_the_same_way(slow: Sandbox, sender: Number) -> None:
    done = run_child(slow, sender, """
        async def main():
            async with bizmsg.AsyncClient(sys.argv[1], base_url=sys.argv[2]) as aclient:
                try:
                    await aclient.messages.send_many(rows(200), concurrency=4,
                                                     on_result=kill_once, stop_on_sigterm=True)
                except SystemExit as exc:
                    report(exc.bulk_result, code=exc.code)
        asyncio.run(main())
    """)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["code"] == 143 and seen["counts"]["unknown"] == 0
    assert 4 <= seen["counts"]["sent"] < 100 and seen["outcomes"] == 200
    assert seen["handler"]


def test_a_second_sigterm_abandons_the_messages_in_flight(slow: Sandbox,
                                                          sender: Number) -> None:
    done = run_child(slow, sender, """
        def twice(batch):
            kill_once(batch)
            os.kill(os.getpid(), signal.SIGTERM)
        try:
            client.messages.send_many(rows(200), concurrency=4, on_result=twice,
                                      stop_on_sigterm=True)
        except SystemExit as exc:
            report(exc.bulk_result, code=exc.code)
    """)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["code"] == 143 and seen["counts"]["unknown"] > 0


def test_without_the_option_sigterm_keeps_its_default(slow: Sandbox, sender: Number) -> None:
    done = run_child(slow, sender, """
        client.messages.send_many(rows(200), concurrency=4, on_result=kill_once)
        print("not reached")
    """)
    assert done.returncode == -signal.SIGTERM
    assert done.stdout == ""


def test_a_handler_of_the_application_is_left_alone(sandbox: Sandbox, sender: Number,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Nothing is delivered here: the handler the application installed must still be the one
    in place during the campaign (on_result looks) and after it."""
    def own(signum: int, frame: object) -> None:  # pragma: no cover - never called
        pass

    during: list[Any] = []
    previous = signal.signal(signal.SIGTERM, own)
    try:
        with sandbox.client() as client:
            result = client.messages.send_many(
                [{"to": "8613800138000", "from": sender.digits, "name": "t", "parameters": [],
                  "language": "en"}],
                stop_on_sigterm=True,
                on_result=lambda batch: during.append(signal.getsignal(signal.SIGTERM)))
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.counts["sent"] == 1
    assert during == [own]
    assert any("stop_on_sigterm=True is ignored for this campaign: SIGTERM already has a "
               "handler" in record.getMessage() for record in caplog.records)


def test_outside_the_main_thread_nothing_is_installed(sandbox: Sandbox, sender: Number,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    outcome: list[bizmsg.BulkResult] = []

    def work() -> None:
        with sandbox.client() as client:
            outcome.append(client.messages.send_many(
                [{"to": "8613800138000", "from": sender.digits, "name": "t", "parameters": [],
                  "language": "en"}], stop_on_sigterm=True))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert outcome and outcome[0].counts["sent"] == 1
    assert any("outside the main thread" in record.getMessage() for record in caplog.records)


def test_installed_during_the_campaign_and_restored_after(sandbox: Sandbox,
                                                          sender: Number) -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    during: list[Any] = []
    try:
        with sandbox.client() as client:
            client.messages.send_many(
                [{"to": "8613800138000", "from": sender.digits, "name": "t", "parameters": [],
                  "language": "en"}], stop_on_sigterm=True,
                on_result=lambda batch: during.append(signal.getsignal(signal.SIGTERM)))
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(during) == 1 and callable(during[0]) and during[0] != signal.SIG_DFL


def test_stop_on_sigterm_must_be_a_bool(client: bizmsg.Client) -> None:
    with pytest.raises(bizmsg.ValidationError) as excinfo:
        client.messages.send_many([], stop_on_sigterm="yes")  # type: ignore[typeddict-item]
    assert excinfo.value.field == "stop_on_sigterm"
