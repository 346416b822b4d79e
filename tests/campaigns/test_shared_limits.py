"""Shared limits on Redis (``shared_limits="redis://..."``) across real processes: a real
``redis-server``, the standalone sandbox (``bizmsg sandbox --enforce-limits``, which refuses a
STANDARD number's sends past 80 in a second with a 429) or an in-process one shared with the
children, and each client in an OS process of its own (``shared_child.py``).

Judged by what the sandbox counted (the busiest one-second window per sender, throughput
refusals, messages per recipient), never by how long anything took. Each test that proves a
limit holds also shows, where it is cheap, that the same run without the shared store breaks it.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Fault, Sandbox
from services.postgres_server import PostgresServer
from services.redis_server import RedisServer
from services.reports import write_report
from services.sandbox_server import SandboxProcess
from shared_support import (
    SENDERS,
    STANDARD_CEILING,
    Children,
    of_sender,
    rows,
    seed_data,
    traffic,
    wait_for,
    write_seed_data,
)

#: Messages per process in the four-process runs: 400 in all, about 7 s at 60/s.
PER_PROCESS = 100


def standalone(start: Callable[..., SandboxProcess], folder: Path, *args: str) -> SandboxProcess:
    """A standalone sandbox with the test accounts (``shared_support.SENDERS``)."""
    return start(["--enforce-limits", "--seed-data", str(write_seed_data(folder)),
                  "--max-logged-requests", "0", *args])


def spec(sandbox: SandboxProcess | Sandbox, client: str, *, shared: str | None,
         **fields: Any) -> dict[str, Any]:
    return {"client": client, "base_url": sandbox.base_url, "token": "sandbox-token-acme",
            "shared_limits": shared, "barrier": True, **fields}


# -- four processes, one number -----------------------------------------------------------------


@pytest.mark.parametrize("shared", [True, False], ids=["shared_limits", "each_alone"])
def test_four_processes_pace_one_number_under_its_throughput(
        shared: bool, redis_server: RedisServer, start_sandbox_process: Callable[..., SandboxProcess],
        children: Children, tmp_path: Path) -> None:
    """Two sync clients and two ``AsyncClient``s, each in its own process, run campaigns of
    100 messages from one STANDARD number with ``pace="auto"``, started together. Through one
    Redis: no one-second window over the number's 80, not one throughput refusal, every message
    committed once. Each pacing alone (the same run without ``shared_limits``): four times 60/s
    on one number, which the sandbox refuses."""
    sandbox = standalone(start_sandbox_process, tmp_path)
    sender = SENDERS[0]
    started = [
        children.start(f"p{i}", spec(sandbox, kind, shared=redis_server.url if shared else None,
                                     options={"pace": "auto", "concurrency": 16}),
                       rows(sender, PER_PROCESS, group=i))
        for i, kind in enumerate(["sync", "sync", "async", "async"])
    ]
    children.start_together(started)
    records = [child.result() for child in started]
    report = traffic(sandbox.base_url)
    line = of_sender(report, sender)
    figures = {"shared_limits": shared, "busiest_second": line["busiest_second"],
               "throttled": line["throttled"], "accepted": line["accepted"],
               "sends": report["sends"], "repeated_recipients": report["repeated_recipients"],
               "counts": [r.get("counts") for r in records]}
    write_report(f"shared_limits_four_processes_{'shared' if shared else 'alone'}", figures,
                 summary=(f"4 processes on one STANDARD number, "
                          f"{'shared_limits' if shared else 'each pacing alone'}: busiest second "
                          f"{line['busiest_second']} (ceiling {STANDARD_CEILING}), "
                          f"{line['throttled']} throughput refusals, {line['accepted']} committed"),
                 fallback_dir=tmp_path)

    assert report["repeated_recipients"] == 0, figures
    if shared:
        assert all("error" not in r for r in records), records
        assert [r["counts"]["sent"] for r in records] == [PER_PROCESS] * 4, figures
        assert line["throttled"] == 0, figures
        assert line["busiest_second"] <= STANDARD_CEILING, figures
        assert line["accepted"] == report["sends"] == 4 * PER_PROCESS, figures
    else:
        # The proof that the test can fail: alone, each paces at 60/s and together they pass
        # the number's 80 (the sandbox refuses, the campaigns pause and retry).
        assert line["throttled"] > 0, figures


def test_single_sends_and_campaigns_share_one_numbers_pace(
        redis_server: RedisServer, start_sandbox_process: Callable[..., SandboxProcess],
        children: Children, tmp_path: Path) -> None:
    """Web workers' single sends (``messages.send``: 8 threads of a sync client, 8 tasks of an
    ``AsyncClient``, each in its own process) and a campaign with ``pace="auto"`` in a third,
    all from one STANDARD number through one Redis: each single send takes a slot of the
    number's pace, so together they stay under its ceiling, without one refusal."""
    sandbox = standalone(start_sandbox_process, tmp_path)
    sender = SENDERS[0]
    shared = redis_server.url
    started = [
        children.start("threads", spec(sandbox, "sync", shared=shared, kind="single", threads=8),
                       rows(sender, 60, group=0)),
        children.start("tasks", spec(sandbox, "async", shared=shared, kind="single", threads=8),
                       rows(sender, 60, group=1)),
        children.start("campaign", spec(sandbox, "sync", shared=shared,
                                        options={"pace": "auto", "concurrency": 16}),
                       rows(sender, 120, group=2)),
    ]
    children.start_together(started)
    records = [child.result() for child in started]
    report = traffic(sandbox.base_url)
    line = of_sender(report, sender)
    assert [r["counts"]["sent"] for r in records] == [60, 60, 120], records
    assert line["throttled"] == 0 and line["busiest_second"] <= STANDARD_CEILING, line
    assert line["accepted"] == report["sends"] == 240 and report["repeated_recipients"] == 0


@pytest.mark.parametrize("shared", [True, False], ids=["shared_limits", "each_alone"])
def test_the_messaging_tier_is_counted_across_processes(
        shared: bool, redis_server: RedisServer,
        start_sandbox_process: Callable[..., SandboxProcess], children: Children,
        tmp_path: Path) -> None:
    """An account whose tier is 50 unique recipients a day; two processes each send campaigns
    to 40 new recipients from two of its numbers with ``pace="auto"``. Through one Redis the
    count is the account's, whatever process sends: 50 go out and the 30 past the tier fail up
    front, before any request (the sandbox, enforcing the tier, refuses none). Counting alone,
    each process believes it has room, and the sandbox refuses the 30 (failed commits ``1007``)."""
    sandbox = start_sandbox_process([
        "--enforce-limits", "--max-logged-requests", "0",
        "--seed-data", str(write_seed_data(tmp_path, tier="TIER_50"))])
    started = [
        children.start(f"p{i}", spec(sandbox, kind, shared=redis_server.url if shared else None,
                                     options={"pace": "auto", "concurrency": 4}),
                       rows(SENDERS[i], 40, group=i))
        for i, kind in enumerate(["sync", "async"])
    ]
    children.start_together(started)
    records = [child.result() for child in started]
    report = traffic(sandbox.base_url)
    totals = {k: sum(r["counts"][k] for r in records) for k in records[0]["counts"]}
    assert report["accepted"] == totals["sent"] == 50, (totals, report)
    if shared:
        assert totals["failed"] == 30 and report["failed_commits"] == 0, (totals, report)
        assert report["sends"] == 50
        errors = {o[4] or "" for r in records for o in r["outcomes"] if o[1] == "failed"}
        assert errors and all("tier" in error for error in errors), errors
    else:
        assert totals["rejected"] == report["failed_commits"] == 30, (totals, report)


# -- a Retry-After seen by one process pauses the others ---------------------------------------


def sends_by_sender(sandbox: Sandbox) -> dict[str, int]:
    counted: dict[str, int] = {}
    for request in sandbox.sent_messages():
        sender = (request["body"] or {}).get("from", "")
        counted[sender] = counted.get(sender, 0) + 1
    return counted


@pytest.mark.parametrize("shared", [True, False], ids=["shared_limits", "each_alone"])
def test_a_retry_after_answered_to_one_process_pauses_the_others(
        shared: bool, redis_server: RedisServer, children: Children, tmp_path: Path) -> None:
    """Three processes send campaigns from three numbers of one service (an in-process sandbox
    they reach over HTTP). Once all three are sending, the service answers one request (one
    process) ``503`` with ``Retry-After: 3``. Through one Redis the pause is the service's,
    for every process: in the next 1.5 s (well inside the pause) the two others send no more
    than what was already on its way (slots granted within the 250 ms horizon, requests in
    flight), where each alone goes on at its 60/s. Then every message is sent, once."""
    pause = 3
    per_process = 300
    with Sandbox(seed_data=seed_data()) as sandbox:
        started = [
            children.start(f"p{i}", spec(sandbox, "sync" if i % 2 else "async",
                                         shared=redis_server.url if shared else None,
                                         options={"pace": "auto", "concurrency": 8}),
                           rows(SENDERS[i], per_process, group=i))
            for i in range(3)
        ]
        children.start_together(started)
        wait_for(lambda: all(sends_by_sender(sandbox).get(s, 0) >= 30 for s in SENDERS[:3]),
                 "every process sending")
        sandbox.inject("send", Fault(status=503, headers={"Retry-After": str(pause)}))
        told = wait_for(lambda: next((r for r in sandbox.sent_messages() if r["status"] == 503),
                                     None), "the 503 answered")
        at_pause = sends_by_sender(sandbox)
        time.sleep(pause / 2)
        half_way = sends_by_sender(sandbox)
        records = [child.result() for child in started]
        sent = sandbox.sent_messages()

    paused_sender = told["body"]["from"]
    others = [s for s in SENDERS[:3] if s != paused_sender]
    during = {s: half_way.get(s, 0) - at_pause.get(s, 0) for s in others}
    figures = {"shared_limits": shared, "told": paused_sender, "others_sent_during_pause": during}
    write_report(f"shared_limits_retry_after_{'shared' if shared else 'alone'}", figures,
                 summary=(f"Retry-After: {pause} answered to one of 3 processes, "
                          f"{'shared_limits' if shared else 'each alone'}: the 2 others sent "
                          f"{sorted(during.values())} in the next {pause / 2:.1f} s"),
                 fallback_dir=tmp_path)
    assert all(r["counts"]["sent"] == per_process for r in records), records
    committed = [r for r in sent if r["status"] == 200]
    assert len(committed) == 3 * per_process == len({r["body"]["to"] for r in committed})
    if shared:
        # At most what was granted before the pause (250 ms at 60/s) and in flight (8).
        assert all(n <= 15 + 8 for n in during.values()), figures
    else:
        # The proof that the test can fail: alone, the others did not hear of it.
        assert all(n > 30 for n in during.values()), figures


def test_retries_after_a_retry_after_pause_keep_the_shared_pace(redis_server: RedisServer) -> None:
    """A campaign under shared limits whose first 60 sends are answered ``429`` with
    ``Retry-After: 1``: their retries take slots of the shared pace (``rate_limit=200``) like
    every other send, so no second at the service holds more than the pace (before: 260)."""
    rate, count = 200, 500
    with Sandbox(seed_data=seed_data()) as sandbox, \
            sandbox.client(shared_limits=redis_server.url) as client:
        sandbox.inject("send", status=429, headers={"Retry-After": "1"}, delay=0.3, times=60)
        result = client.messages.send_many(rows(SENDERS[0], count), rate_limit=rate,
                                           concurrency=128)
        report = sandbox.traffic()
    line = of_sender(report, SENDERS[0])
    assert result.counts["sent"] == count, result.counts
    assert line["busiest_second"] <= rate and report["repeated_recipients"] == 0, report


def test_single_sends_retried_after_a_429_keep_the_numbers_pace(
        redis_server: RedisServer) -> None:
    """64 threads of a web worker send single messages from one STANDARD number under shared
    limits; the first 100 requests are answered ``429`` (no ``Retry-After``: each is retried
    after its backoff). Each retry takes a slot of the number's pace like a first attempt, so
    the busiest second stays under the number's ceiling (before: 124 where the ceiling is
    80, the retries going out on top of the paced sends)."""
    threads, count, refused = 64, 150, 100
    template = bizmsg.Template(name="promo", parameters=["x"], language="en")
    # Retries enough for a send answered 429 several times in a row.
    with Sandbox(seed_data=seed_data(), max_logged_requests=0) as sandbox, \
            sandbox.client(shared_limits=redis_server.url, max_retries=refused) as client:
        sandbox.inject("send", status=429, times=refused)
        with ThreadPoolExecutor(threads) as pool:
            sent = list(pool.map(
                lambda i: client.messages.send(to=f"86139{i:08d}", from_=SENDERS[0],
                                               template=template),
                range(count)))
        line = of_sender(sandbox.traffic(), SENDERS[0])
    assert len(sent) == count
    assert line["busiest_second"] <= STANDARD_CEILING and line["throttled"] == 0, line


def test_a_token_callable_is_asked_once_per_single_send_and_its_interrupt_passes_through(
        redis_server: RedisServer) -> None:
    """Under shared limits a single send asks its token callable as its slot's last step, once:
    what the callable raises is the send's, a ``KeyboardInterrupt`` unchanged, and nothing is
    sent, even if the callable would answer when asked again. (Found in review, helper-46: the
    callable asked before the slot had its failure dropped and was asked again, so a Ctrl-C
    inside it was lost and the message went out.)"""
    template = bizmsg.Template(name="promo", parameters=["x"], language="en")
    with Sandbox(seed_data=seed_data()) as sandbox:
        calls: list[str] = []
        interrupt = False

        def token() -> str:
            nonlocal interrupt
            calls.append("asked")
            if interrupt:
                # Once: a provider asked again would get a token, and the message would go.
                interrupt = False
                raise KeyboardInterrupt
            return sandbox.token

        with bizmsg.Client(token, base_url=sandbox.base_url,
                           shared_limits=redis_server.url) as client:
            client.messages.send(to="8613900000001", from_=SENDERS[0], template=template)
            asked_before = len(calls)
            interrupt = True
            with pytest.raises(KeyboardInterrupt):
                client.messages.send(to="8613900000002", from_=SENDERS[0], template=template)
        requests = sandbox.requests()
    # One request per ask: the sender's facts (a listing, once) and the first send.
    assert asked_before == len(requests) == 2, requests
    assert [r["method"] for r in requests] == ["GET", "POST"]
    # The second send asked once, and sent nothing.
    assert len(calls) == asked_before + 1


def test_a_single_sends_total_timeout_counts_its_wait_for_the_shared_slot(
        redis_server: RedisServer) -> None:
    """``total`` bounds a single send under shared limits as a whole: the attempts have what
    the wait for the slot left of it. (Found in review, helper-50: each had all of it, so a
    send with ``total=2`` waited 1.7 s for its slot, then 1.6 s for a slow answer, and
    succeeded after 3.3 s.)"""
    template = bizmsg.Template(name="promo", parameters=["x"], language="en")
    with Sandbox(seed_data=seed_data()) as sandbox:
        with bizmsg.Client(sandbox.token, base_url=sandbox.base_url,
                           shared_limits=redis_server.url, max_retries=0,
                           timeout=bizmsg.Timeout(total=2.0)) as client:
            # A 429 with Retry-After 1.7 pauses the service in Redis, so the next send waits
            # about 1.7 s for its slot; its answer then takes 1.6 s.
            sandbox.inject("send", status=429, headers={"Retry-After": "1.7"}, times=1)
            with pytest.raises(bizmsg.errors.RateLimitError):
                client.messages.send(to="8613900000001", from_=SENDERS[0], template=template)
            sandbox.inject("send", delay=1.6, times=1)
            # Out of time while its request was answered (it may have been processed), or,
            # on a slow machine, already while it waited for its slot.
            with pytest.raises((bizmsg.errors.SendOutcomeUnknownError,
                                bizmsg.errors.TimeoutError)):
                client.messages.send(to="8613900000002", from_=SENDERS[0], template=template)


# -- Redis lost mid-campaign ------------------------------------------------------------------------


def test_redis_killed_and_restarted_mid_campaign_stops_sends_then_resumes(
        redis_server: RedisServer, start_sandbox_process: Callable[..., SandboxProcess],
        children: Children, tmp_path: Path) -> None:
    """Two processes pace one number through a Redis without persistence, which is killed
    (SIGKILL) once 100 messages went out and started again 2.5 s later, empty. While it is away
    nothing is sent (nothing goes unpaced): the count of committed messages does not move
    between 1 s and 2.5 s after the kill. Then both campaigns resume by themselves (the store is
    retried with backoff within ``wait=``, 60 s by default) and finish: every message once, no
    window over the ceiling, no refusal, although the restarted Redis forgot the pace (the
    250 ms horizon bounds what a fresh schedule can add)."""
    sandbox = standalone(start_sandbox_process, tmp_path)
    sender = SENDERS[0]
    started = [
        children.start(f"p{i}", spec(sandbox, kind, shared=redis_server.url,
                                     options={"pace": "auto", "concurrency": 16}),
                       rows(sender, 200, group=i))
        for i, kind in enumerate(["sync", "async"])
    ]
    children.start_together(started)
    wait_for(lambda: of_sender(traffic(sandbox.base_url), sender)["accepted"] >= 100,
             "100 messages sent")
    redis_server.kill()
    time.sleep(1.0)  # what was granted before the kill (at most 250 ms ahead) has gone
    stopped_at = of_sender(traffic(sandbox.base_url), sender)["accepted"]
    time.sleep(1.5)
    still = of_sender(traffic(sandbox.base_url), sender)["accepted"]
    redis_server.start()
    records = [child.result() for child in started]
    report = traffic(sandbox.base_url)
    line = of_sender(report, sender)
    figures = {"committed_when_stopped": stopped_at, "committed_1.5s_later": still, **line}
    write_report("shared_limits_redis_restarted", figures,
                 summary=(f"Redis killed mid-campaign: {stopped_at} committed when it died, "
                          f"{still - stopped_at} more while it was away; after its restart "
                          f"{line['accepted']} in all, busiest second {line['busiest_second']}, "
                          f"{line['throttled']} refusals"),
                 fallback_dir=tmp_path)
    assert still == stopped_at < 400, figures
    assert [r["counts"]["sent"] for r in records] == [200, 200], records
    assert line["accepted"] == report["sends"] == 400 and report["repeated_recipients"] == 0
    assert line["throttled"] == 0 and line["busiest_second"] <= STANDARD_CEILING, figures


def test_redis_that_stays_away_stops_the_campaign_gracefully(
        redis_server: RedisServer, start_sandbox_process: Callable[..., SandboxProcess],
        children: Children, tmp_path: Path) -> None:
    """Redis killed mid-campaign and not started again, with ``wait=2`` in the URL: past the
    bound the campaign stops like one whose journal failed, ``SharedStateError`` with the
    partial result on ``.bulk_result``: every message has its outcome, those sent are the ones
    the sandbox committed, and the error names the store without its password."""
    sandbox = standalone(start_sandbox_process, tmp_path)
    sender = SENDERS[0]
    assert redis_server.password is not None
    child = children.start("p0", spec(sandbox, "sync", shared=redis_server.url + "?wait=2",
                                      options={"pace": "auto", "concurrency": 16}),
                           rows(sender, 300))
    children.start_together([child])
    wait_for(lambda: of_sender(traffic(sandbox.base_url), sender)["accepted"] >= 60,
             "60 messages sent")
    redis_server.kill()
    record = child.result()
    report = traffic(sandbox.base_url)
    error = record["error"]
    assert error["type"] == "SharedStateError", record
    assert f"127.0.0.1:{redis_server.port}" in error["message"]
    assert redis_server.password not in json.dumps(record)
    counts = record["counts"]
    assert sum(counts.values()) == len(record["outcomes"]) == 300, counts
    assert counts["sent"] == of_sender(report, sender)["accepted"] < 300, (counts, report)
    assert counts["unknown"] == 0 and report["repeated_recipients"] == 0, counts
    assert record["stop_reason"] and "shared limits" in record["stop_reason"], record
    write_report("shared_limits_redis_gone", {"counts": counts, "error": error["message"],
                                              "stop_reason": record["stop_reason"]},
                 summary=(f"Redis killed mid-campaign and not restarted (wait=2): "
                          f"{error['type']}, outcomes {counts}"),
                 fallback_dir=tmp_path)


@pytest.mark.parametrize("pace_known", [True, False], ids=["pace_cached", "first_send"])
def test_a_single_send_waits_for_an_unreachable_store_no_longer_than_its_timeout(
        pace_known: bool, redis_server: RedisServer) -> None:
    """A web worker's single send while Redis is away (``wait=20`` in the URL, the call's
    ``timeout=2``): it is never sent unpaced, and it gives up within its own deadline, not the
    store's ``wait=``: a ``TimeoutError`` (or ``SharedStateError``) naming the store, and
    nothing sent. Both for a client that had looked its sender's pace up before Redis went
    away and for a fresh one (a worker started during the outage), whose first send must look
    the pace up in the store. (A bound on how long a call may block, with a wide margin: the
    contract under test is the deadline itself.)"""
    template = bizmsg.Template("promo", [], "en")
    with Sandbox(seed_data=seed_data()) as sandbox:
        url = redis_server.url + "?wait=20"
        with sandbox.client(shared_limits=url, timeout=2) as warm:
            warm.messages.send(to="8613800138000", from_=SENDERS[0], template=template)
            redis_server.kill()
            client = warm if pace_known else sandbox.client(shared_limits=url, timeout=2)
            started = time.monotonic()
            with pytest.raises((bizmsg.TimeoutError, bizmsg.SharedStateError)) as caught:
                client.messages.send(to="8613800138001", from_=SENDERS[0], template=template)
            waited = time.monotonic() - started
            client.close()
        assert len(sandbox.sent_messages()) == 1
    assert f"127.0.0.1:{redis_server.port}" in str(caught.value)
    assert waited < 10, f"waited {waited:.1f} s with timeout=2: {caught.value!r}"


# -- bad URLs, and passwords -----------------------------------------------------------------------


@pytest.mark.parametrize("url, says", [
    ("memcache://:s3cret@127.0.0.1:6379/0", "unknown scheme"),
    ("postgresql://u:s3cret@127.0.0.1:5432/db", "unknown scheme"),
    ("redis://:s3cret@127.0.0.1:notaport/0", "port"),
    ("redis://:s3cret@127.0.0.1:6379/zero", "database number"),
    ("redis://:s3cret@127.0.0.1:6379/0?clock=moon", "clock="),
    ("redis://:s3cret@127.0.0.1:6379/0?wait=-1", "wait="),
    ("redis://:s3cret@127.0.0.1:6379/0?pool=4", "unknown parameter"),
    ("redis://", "no host"),
    # Regression: without a scheme, ``u`` was read as one and the password shown.
    ("u:s3cret@127.0.0.1:6379", "unknown scheme"),
    (":s3cret@127.0.0.1:6379", "not a URL"),
])
def test_a_bad_shared_limits_url_is_a_validation_error_without_its_password(
        url: str, says: str, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    for make in (lambda: sandbox.client(shared_limits=url),
                 lambda: sandbox.async_client(shared_limits=url)):
        with pytest.raises(bizmsg.ValidationError, match=says) as caught:
            make()
        assert caught.value.field == "shared_limits"
        assert "s3cret" not in str(caught.value) and "s3cret" not in repr(caught.value)
    # The same from the environment.
    monkeypatch.setenv("BIZMSG_SHARED_LIMITS", url)
    with pytest.raises(bizmsg.ValidationError, match=says) as caught:
        sandbox.client()
    assert caught.value.field == "shared_limits" and "s3cret" not in str(caught.value)


def shown(*things: object) -> str:
    """Everything a user could see of ``things``: str and repr, and an exception's args."""
    parts: list[str] = []
    for thing in things:
        parts += [str(thing), repr(thing)]
        if isinstance(thing, BaseException):
            parts += [repr(a) for a in thing.args]
    return "\n".join(parts)


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records)


def test_the_redis_password_is_never_shown(
        bizmsg_logs: pytest.LogCaptureFixture, redis_server: RedisServer,
        start_redis: Callable[..., RedisServer]) -> None:
    """With every log level on (Rust's TRACE included): a campaign and a single send that work,
    a wrong password (percent-encoded, with ``@`` and ``:`` in it), and a store that died. The
    password is in no error, repr, result, outcome or log line; each error names the store."""
    password = redis_server.password
    assert password is not None
    wrong = "wr0ng:p@ss"
    wrong_url = redis_server.url.replace(password, "wr0ng%3Ap%40ss") + "?wait=1"
    gone = start_redis()
    assert gone.password is not None
    gone_url = gone.url + "?wait=1"
    gone.kill()
    seen: list[object] = []
    with Sandbox(seed_data=seed_data()) as sandbox:
        with sandbox.client(shared_limits=redis_server.url) as client:
            seen.append(client)
            result = client.messages.send_many(rows(SENDERS[0], 20), pace="auto")
            assert result.counts["sent"] == 20
            seen += [result, *result.outcomes, *result.to_records()]
            seen.append(client.messages.send(to="8613800138000", from_=SENDERS[0],
                                             template=bizmsg.Template("promo", [], "en")))
        for url, secret in ((wrong_url, wrong), (gone_url, gone.password)):
            with sandbox.client(shared_limits=url) as client:
                with pytest.raises(bizmsg.SharedStateError) as single:
                    client.messages.send(to="8613800138000", from_=SENDERS[0],
                                         template=bizmsg.Template("promo", [], "en"))
                with pytest.raises(bizmsg.SharedStateError) as campaign:
                    client.messages.send_many(rows(SENDERS[0], 5), pace="auto")
            partial = getattr(campaign.value, "bulk_result", None)
            assert partial is not None and partial.counts["sent"] == 0
            for error in (single.value, campaign.value):
                assert "127.0.0.1:" in str(error), error
                assert secret not in shown(error) and "p%40ss" not in shown(error)
            seen += [single.value, campaign.value, partial, *partial.outcomes]
        # A store that cannot be reached sends nothing, unpaced or otherwise.
        assert len(sandbox.sent_messages()) == 21
    text = shown(*seen) + logged(bizmsg_logs)
    assert len(bizmsg_logs.records) > 0
    assert "redis://:***@127.0.0.1:" in text  # the stores were named, masked
    for secret in (password, wrong, "p%40ss", gone.password):
        assert secret not in text
