"""Take-overs of a campaign's journal that must never send a message twice: a run that finishes what another run left (``resend_unknown=True``) against the SQLite
journal (one file, processes of one host) and the PostgreSQL journal, each run in an OS process
of its own (``shared_child.py``), with real faults: SIGKILL, SIGSTOP/SIGCONT, and
``pg_terminate_backend``.

- **The journal's key** (point 1): a message lost to a dead run's claim, then taken over on the
  "claim again" path, goes out with the key its journal row holds, not the taking run's own.
- **Fencing** (point 2): a run frozen past its lease, or whose PostgreSQL session was ended,
  while another run took its claims over, sends none of them once it goes on; and a run that
  meets a live run's claims waits for them, so a holder frozen and fenced loses none.
- **Liveness by the holder's own lease** (point 3): a run with a short lease does not take over
  a live run on the default lease.

What is judged is counted by the sandbox (messages it committed, recipients that got more than
one: ``Sandbox.traffic()``/``stats()``, the numbers ``GET /_sandbox/traffic`` answers), never a
duration. The faults are placed at a moment the test checks (between two of a run's sends, with
its last result recorded and no journal transaction open): a fault inside the window between a
request and its recorded result would leave that message in doubt, re-sent by design with its
key, and tell nothing about the defects tested here.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from bizmsg.testing import Fault, Sandbox
from services.postgres_server import PostgresServer
from shared_support import SENDERS, Child, Children, rows, seed_data, wait_for

TOKEN = "sandbox-token-acme"
#: Messages of the fencing and lease campaigns.
N = 40
#: The short lease of those tests (seconds): a request's deadline (the client's ``timeout``)
#: must be shorter.
LEASE = 3
TIMEOUT = 2.0


def spec(sandbox: Sandbox, *, barrier: bool = True, timeout: float | None = None,
         **options: Any) -> dict[str, Any]:
    """A ``shared_child.py`` spec: a sync client on ``sandbox``, ``send_many(**options)``."""
    made: dict[str, Any] = {"client": "sync", "base_url": sandbox.base_url, "token": TOKEN,
                            "barrier": barrier, "options": options}
    if timeout is not None:
        made["timeout"] = timeout
    return made


def accepted(request: dict[str, Any]) -> bool:
    """A send request that made a message go out (committed, not an idempotent replay)."""
    body = request.get("response_body")
    return (request.get("status") == 200 and not request.get("idempotent_replay")
            and isinstance(body, dict) and body.get("status") == "ACCEPTED")


def key_of(request: dict[str, Any]) -> str:
    return str(request["headers"].get("idempotency-key"))


def shown(figures: dict[str, Any]) -> str:
    """Figures as the failure message, whole (pytest shortens a dict)."""
    return json.dumps(figures, default=str)


def counts(sandbox: Sandbox) -> dict[str, Any]:
    """The sandbox's own figures: requests, accepted, replayed, recipients reached twice."""
    stats, traffic = sandbox.stats(), sandbox.traffic()
    return {"sends": stats["sends"], "accepted": stats["accepted"],
            "replayed": stats["replayed"],
            "repeated_recipients": traffic["repeated_recipients"],
            "most_to_one_recipient": traffic["most_to_one_recipient"]}


class Journal:
    """A test's journal (``where``: the SQLite file's path or the PostgreSQL URL) and what the
    test reads of it, from outside the runs."""

    def __init__(self, kind: str, campaign: str, *, path: Path | None = None,
                 server: PostgresServer | None = None) -> None:
        self.kind = kind
        self.campaign = campaign
        self.path = path
        self.server = server
        self.where = str(path) if server is None else server.url

    def sent(self) -> int:
        """Messages of the campaign recorded ``sent``."""
        if self.server is not None:
            return int(self.server.psql(
                "SELECT count(*) FROM bizmsg.messages m JOIN bizmsg.campaigns c "
                f"ON c.id = m.campaign WHERE c.name = '{self.campaign}' AND m.state = 'sent'"))
        with closing(sqlite3.connect(str(self.path), timeout=10)) as db:
            return int(db.execute(
                "SELECT count(*) FROM bizmsg_messages WHERE state = 'sent'").fetchone()[0])

    def idle(self) -> bool:
        """Whether no run holds a journal transaction open now (a run frozen inside one would
        hold its locks, and another run's claims would wait for them)."""
        if self.server is not None:
            busy = self.server.psql("SELECT count(*) FROM pg_stat_activity "
                                    "WHERE application_name = 'bizmsg' AND state <> 'idle'")
            return busy == "0"
        with closing(sqlite3.connect(str(self.path), timeout=0.2, isolation_level=None)) as db:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return False
            db.execute("ROLLBACK")
            return True


def journal_of(kind: str, campaign: str, request: pytest.FixtureRequest,
               tmp_path: Path) -> Journal:
    if kind == "postgresql":
        return Journal(kind, campaign, server=request.getfixturevalue("postgres_server"))
    return Journal(kind, campaign, path=tmp_path / "campaign.db")


@contextmanager
def continued_at_the_end(*children: Child) -> Iterator[None]:
    """Whatever happens, every child still running is continued (SIGCONT), then killed."""
    try:
        yield
    finally:
        for child in children:
            if child.alive():
                os.kill(child.pid, signal.SIGCONT)
                child.kill()


def next_send(sandbox: Sandbox, what: str, timeout: float = 15.0) -> int:
    """Waits for the sandbox to accept one more message; returns the new count."""
    seen = sandbox.stats()["accepted"]

    def more() -> int:
        now = int(sandbox.stats()["accepted"])
        return now if now > seen else 0

    return int(wait_for(more, what, timeout=timeout, every=0.005))


def freeze_between_sends(child: Child, sandbox: Sandbox, journal: Journal,
                         attempts: int = 8) -> int:
    """SIGSTOPs ``child`` (a paced run, the only one sending) between two of its sends: just
    after a message went out, once its result is recorded, with no request of it at the
    sandbox unanswered and no journal transaction of it open. Checked after the stop (the
    sandbox's count did not move, every message it accepted is recorded sent, the journal is
    idle); otherwise the child is continued and stopped again after its next message.
    Returns the messages accepted when it was stopped."""
    for _ in range(attempts):
        next_send(sandbox, f"{child.name}'s next message")
        # Its result is recorded within milliseconds; its next paced send is 200 ms away.
        time.sleep(0.05)
        os.kill(child.pid, signal.SIGSTOP)
        before = sandbox.stats()["accepted"]
        time.sleep(0.3)
        now = sandbox.stats()["accepted"]
        if now == before == journal.sent() and journal.idle():
            return now
        os.kill(child.pid, signal.SIGCONT)
    raise AssertionError(f"setup: {child.name} was never stopped between two sends "
                         f"in {attempts} attempts")


def start_then_freeze(child: Child, sandbox: Sandbox, journal: Journal) -> int:
    """Starts ``child`` (a paced run, ready and waiting at its barrier), lets it send its first
    messages, and freezes it between two sends (``freeze_between_sends``)."""
    child.wait_ready()
    child.go()
    wait_for(lambda: sandbox.stats()["accepted"] >= 2, f"{child.name}'s first messages")
    return freeze_between_sends(child, sandbox, journal)


# -- 1. the journal's key, on the "claim again" path ----------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_message_taken_over_after_a_lost_claim_goes_out_with_the_key_its_journal_row_holds(
        kind: str, request: pytest.FixtureRequest, children: Children, tmp_path: Path) -> None:
    """Caller-supplied keys that differ between runs (``b-i`` for run B, ``a-66`` for run A),
    against a sandbox that honours ``Idempotency-Key``. Run B (``resend_unknown=True``,
    concurrency 4) looks its 70 messages up (no record of #66 yet) and claims the first 64;
    its answers are held. Run A then claims #66 and sends it with ``a-66``: the sandbox
    commits it, and A is SIGKILLed before the answer reaches it (its row stays dispatched, its
    run dead). The answers are let go: B's claim of #66 loses to A's dead claim, B re-queues it
    in doubt and takes it over ("claim again"). It must go out with ``a-66``, the key the
    journal recorded (a replay), never with B's ``b-66``: 70 messages, 70 accepted. Before the
    fix: 71 accepted, #66's recipient reached twice."""
    journal = journal_of(kind, "claim-again", request, tmp_path)
    m = 66
    b_rows = [dict(row, idempotency_key=f"b-{i}") for i, row in enumerate(rows(SENDERS[0], 70))]
    a_rows = [dict(b_rows[m], idempotency_key=f"a-{m}")]
    target = b_rows[m]["to"]
    with Sandbox(seed_data=seed_data()) as sandbox:
        # Every send is processed (and committed) at once, its answer held 3 s: B cannot get
        # further than its first four requests until the fault is cleared.
        sandbox.inject("send", Fault(delay=3.0, times=None))
        b = children.start("b", spec(sandbox, journal=journal.where, campaign_id="claim-again",
                                     resend_unknown=True, concurrency=4), b_rows)
        a = children.start("a", spec(sandbox, journal=journal.where, campaign_id="claim-again"),
                           a_rows)
        with continued_at_the_end(a, b):
            b.wait_ready()
            a.wait_ready()
            b.go()
            # B's first requests arrived: it has looked all 70 up and claimed #0-#63.
            wait_for(lambda: len([r for r in sandbox.sent_messages() if accepted(r)]) >= 4,
                     "B's first four messages")
            a.go()
            wait_for(lambda: any(accepted(r) and key_of(r) == f"a-{m}"
                                 for r in sandbox.sent_messages()),
                     "A's message #66 committed by the sandbox")
            a.kill()            # before its answer: #66's row stays dispatched by a dead run
            sandbox.clear_faults()
            record = b.result(timeout=60)
        figures = counts(sandbox)
        to_target = [(key_of(r), accepted(r), r.get("idempotent_replay"))
                     for r in sandbox.sent_messages() if r["body"]["to"] == target]
        per_recipient = Counter(r["body"]["to"] for r in sandbox.sent_messages() if accepted(r))
    b_on_target = [o for o in record.get("outcomes", []) if o[0] == target]
    figures.update({"requests_to_66": to_target, "b_outcome_of_66": b_on_target,
                    "b_counts": record.get("counts"), "b_error": record.get("error")})
    # The sandbox honours keys: one message per recipient however often it was asked.
    assert figures["accepted"] == 70 and figures["repeated_recipients"] == 0, shown(figures)
    assert per_recipient == Counter({row["to"]: 1 for row in b_rows}), shown(figures)
    # Every request for #66 carried the key its journal row holds, A's.
    assert {key for key, _, _ in to_target} == {f"a-{m}"}, shown(figures)
    assert "error" not in record, shown(figures)


# -- 2. fencing: a run frozen past its lease ------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_run_frozen_past_its_lease_sends_none_of_the_claims_a_taker_took_over(
        kind: str, request: pytest.FixtureRequest, children: Children, tmp_path: Path) -> None:
    """Run A (``rate_limit=5``, ``lease=3``) claims the 40 messages of a campaign and sends a
    few; it is frozen (SIGSTOP) between two sends, past its lease. Run B
    (``resend_unknown=True``, ``lease=3``) takes A's claims over and sends them (started again
    every 2 s, as long as it finds them still held, should the journal wait some margin past A's
    lease). A is then continued (SIGCONT). Against a sandbox that does not honour
    ``Idempotency-Key``: every recipient is reached exactly once, A requests nothing once
    continued, and A ends telling that it stopped (an error or a stop reason). Before the fix:
    A sent all it had claimed and not sent, each a second time."""
    campaign = f"freeze-{kind}"
    journal = journal_of(kind, campaign, request, tmp_path)
    every = rows(SENDERS[0], N)
    takers: list[dict[str, Any]] = []
    with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
        a = children.start("a", spec(sandbox, timeout=TIMEOUT, journal=journal.where,
                                     campaign_id=campaign, rate_limit=5, lease=LEASE), every)
        with continued_at_the_end(a):
            sent_by_a = start_then_freeze(a, sandbox, journal)
            frozen_at = time.monotonic()
            time.sleep(LEASE + 1.5)         # A's last sign of life is older than its lease
            while True:
                b = children.start(f"b{len(takers)}",
                                   spec(sandbox, barrier=False, timeout=TIMEOUT,
                                        journal=journal.where, campaign_id=campaign,
                                        resend_unknown=True, lease=LEASE), every)
                takers.append(b.result(timeout=60))
                if takers[-1].get("counts", {}).get("sent", 0) > 0:
                    break
                assert time.monotonic() - frozen_at < 25, (
                    f"setup: no run took A's claims over within 25 s of A's freeze: {takers}")
                time.sleep(2)
            before_continue = counts(sandbox)
            os.kill(a.pid, signal.SIGCONT)
            a_record = a.result(timeout=45)
        figures = counts(sandbox)
    figures.update({"a_sent_before_freeze": sent_by_a, "after_takeover": before_continue,
                    "takers": [t.get("counts") for t in takers],
                    "a_counts": a_record.get("counts"), "a_error": a_record.get("error"),
                    "a_stop_reason": a_record.get("stop_reason")})
    # Precondition of the test: B took over all that A had not sent, and sent it.
    assert before_continue["accepted"] == N and before_continue["repeated_recipients"] == 0, (
        shown(figures))
    # No recipient twice: A, continued, sent none of the claims B took over.
    assert figures["repeated_recipients"] == 0 and figures["accepted"] == N, shown(figures)
    assert figures["sends"] == before_continue["sends"], shown(figures)
    # A was told: it ends with an error or a stop reason, not as a campaign that went well.
    assert a_record.get("error") or a_record.get("stop_reason"), shown(figures)


# -- 2. fencing: a frozen holder's claims are waited for, never lost ------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_run_that_meets_a_live_runs_claims_waits_and_takes_them_over_when_it_freezes(
        kind: str, request: pytest.FixtureRequest, children: Children, tmp_path: Path) -> None:
    """Run A (``rate_limit=5``, ``lease=3``) claims the 40 messages of a campaign, sends a few
    and is frozen (SIGSTOP) between two sends. Run B (``resend_unknown=True``, ``lease=3``)
    starts at once, while A still counts as alive: A's claims are A's to send, so B waits for
    them; once A is past its lease B takes them over and sends them. A is then continued, and
    sends nothing more (its fence). Against a sandbox that does not honour
    ``Idempotency-Key``: every recipient is reached exactly once, and B accounts for every
    message (sent by it, or already sent by A). Before the fix: B reported A's messages
    "being sent by another run" and finished at once; A, continued, was fenced and sent none
    of them either: every message A had claimed and not sent was sent by nobody."""
    campaign = f"wait-{kind}"
    journal = journal_of(kind, campaign, request, tmp_path)
    every = rows(SENDERS[0], N)
    with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
        a = children.start("a", spec(sandbox, timeout=TIMEOUT, journal=journal.where,
                                     campaign_id=campaign, rate_limit=5, lease=LEASE), every)
        b = children.start("b", spec(sandbox, timeout=TIMEOUT, journal=journal.where,
                                     campaign_id=campaign, resend_unknown=True, lease=LEASE),
                           every)
        with continued_at_the_end(a, b):
            a.wait_ready()
            b.wait_ready()
            a.go()
            wait_for(lambda: sandbox.stats()["accepted"] >= 2, "A's first messages")
            sent_by_a = freeze_between_sends(a, sandbox, journal)
            b.go()
            b_record = b.result(timeout=60)
            after_b = counts(sandbox)
            os.kill(a.pid, signal.SIGCONT)
            a_record = a.result(timeout=45)
        figures = counts(sandbox)
        per_recipient = Counter(r["body"]["to"] for r in sandbox.sent_messages() if accepted(r))
    b_outcomes = b_record.get("outcomes", [])
    unaccounted = [o for o in b_outcomes
                   if not (o[1] == "sent" or (o[1] == "skipped" and (o[3] or "").startswith(
                       "already sent")))]
    figures.update({"a_sent_before_freeze": sent_by_a, "after_b": after_b,
                    "b_counts": b_record.get("counts"), "b_error": b_record.get("error"),
                    "a_counts": a_record.get("counts"), "a_error": a_record.get("error"),
                    "b_unaccounted": unaccounted[:3],
                    "never_reached": sorted(row["to"] for row in every
                                            if row["to"] not in per_recipient)})
    # B waited for A's claims and sent every message A had not: none is left unsent.
    assert after_b["accepted"] == N and after_b["repeated_recipients"] == 0, shown(figures)
    assert b_record.get("counts", {}).get("sent") == N - sent_by_a, shown(figures)
    assert len(b_outcomes) == N and not unaccounted, shown(figures)
    # A, continued, sent nothing more, and says it stopped.
    assert figures["sends"] == after_b["sends"] and figures["repeated_recipients"] == 0, (
        shown(figures))
    assert a_record.get("error") or a_record.get("stop_reason"), shown(figures)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_run_frozen_past_its_lease_that_nobody_took_over_sends_its_claims_when_it_resumes(
        kind: str, request: pytest.FixtureRequest, children: Children, tmp_path: Path) -> None:
    """Run A (``rate_limit=5``, ``lease=3``) claims the 40 messages of a campaign, sends a few,
    and is frozen (SIGSTOP) between two sends for twice its lease. No other run takes its
    claims over. Continued, A asks its journal whether it was taken over, learns it was not,
    and sends the rest: all 40 reached, once each, and A ends without an error. Before the
    fix: A took itself for lost after 1.25 leases without a confirmation, sent none of the
    rest and reported them "this run no longer holds its claims" (a hostile review's loss:
    the runs that met A's claims had given up waiting, so nobody sent them)."""
    campaign = f"resume-{kind}"
    journal = journal_of(kind, campaign, request, tmp_path)
    every = rows(SENDERS[0], N)
    with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
        a = children.start("a", spec(sandbox, timeout=TIMEOUT, journal=journal.where,
                                     campaign_id=campaign, rate_limit=5, lease=LEASE), every)
        with continued_at_the_end(a):
            sent_by_a = start_then_freeze(a, sandbox, journal)
            time.sleep(2 * LEASE)
            os.kill(a.pid, signal.SIGCONT)
            a_record = a.result(timeout=45)
        figures = counts(sandbox)
    figures.update({"a_sent_before_freeze": sent_by_a, "a_counts": a_record.get("counts"),
                    "a_error": a_record.get("error"),
                    "a_stop_reason": a_record.get("stop_reason")})
    assert figures["accepted"] == N and figures["repeated_recipients"] == 0, shown(figures)
    assert a_record.get("counts", {}).get("sent") == N, shown(figures)
    assert not a_record.get("error") and not a_record.get("stop_reason"), shown(figures)


# -- 2. fencing: a run whose PostgreSQL session was ended ----------------------------------------


def terminate_between_sends(sandbox: Sandbox, server: PostgresServer, a: Child,
                            campaign: str) -> tuple[int, int]:
    """Ends A's PostgreSQL session (``pg_terminate_backend``) just after one of its messages
    went out and was recorded; returns the sandbox's accepted counts just before and just
    after."""
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(server.url, autocommit=True, connect_timeout=10) as admin:
        backends = [row[0] for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'bizmsg' "
            "AND pid <> pg_backend_pid()").fetchall()]
        # Only A has a journal open (B waits before its send_many); A's run is recorded with
        # its process id.
        assert len(backends) == 1, f"setup: bizmsg sessions {backends}"
        runs = admin.execute("SELECT r.pid FROM bizmsg.runs r JOIN bizmsg.campaigns c "
                             "ON c.id = r.campaign WHERE c.name = %s", (campaign,)).fetchall()
        assert [row[0] for row in runs] == [a.pid], f"setup: runs {runs}, A is {a.pid}"
        next_send(sandbox, "A's next message")
        time.sleep(0.05)        # its result recorded; its next paced send is 200 ms away
        before = sandbox.stats()["accepted"]
        admin.execute("SELECT pg_terminate_backend(%s)", (backends[0],))
        after = sandbox.stats()["accepted"]
    return before, after


@pytest.mark.timeout(150)
def test_a_run_whose_postgres_session_was_ended_sends_none_of_the_claims_a_taker_took_over(
        postgres_server: PostgresServer, children: Children) -> None:
    """Run A (``rate_limit=5``, default lease) claims the 40 messages of a campaign on the
    PostgreSQL journal and sends a few; its session is ended by ``pg_terminate_backend`` (a
    failover, a DBA) between two of its sends. Its run is dead for the journal at once (its
    session's lock is gone): run B (``resend_unknown=True``) takes its claims over and sends
    them. Against a sandbox that does not honour ``Idempotency-Key``: each message is
    requested once and every recipient reached exactly once; A, its claims no longer
    confirmed, sends none of them. Before the fix: A went on sending them for seconds.
    (The session is ended between two sends, checked: a message A had sent and not yet
    recorded would be in doubt, re-sent by B by design.)"""
    for attempt in range(3):
        campaign = f"terminate-{attempt}"
        journal = Journal("postgresql", campaign, server=postgres_server)
        every = rows(SENDERS[0], N, group=attempt)
        with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
            a = children.start(f"a{attempt}", spec(sandbox, journal=journal.where,
                                                   campaign_id=campaign, rate_limit=5), every)
            b = children.start(f"b{attempt}", spec(sandbox, journal=journal.where,
                                                   campaign_id=campaign, resend_unknown=True),
                               every)
            with continued_at_the_end(a, b):
                a.wait_ready()
                b.wait_ready()
                a.go()
                wait_for(lambda: sandbox.stats()["accepted"] >= 2, "A's first messages")
                before, after = terminate_between_sends(sandbox, postgres_server, a, campaign)
                recorded = journal.sent()
                if not before == after == recorded:
                    continue        # ended inside a send's window: try again, afresh
                b.go()
                b_record = b.result(timeout=60)
                after_takeover = counts(sandbox)
                # A ends by itself: it stops at once (fixed), or once its queue is sent.
                a_record = a.result(timeout=60)
            figures = counts(sandbox)
        break
    else:
        raise AssertionError("setup: A's session was never ended between two of its sends")
    figures.update({"a_sent_before_terminate": before, "after_takeover": after_takeover,
                    "b_counts": b_record.get("counts"), "a_counts": a_record.get("counts"),
                    "a_error": a_record.get("error"),
                    "a_stop_reason": a_record.get("stop_reason")})
    # Precondition of the test: B took over all that A had not sent, and sent it.
    assert after_takeover["accepted"] == N, shown(figures)
    # No recipient twice: A sent nothing once its session was gone.
    assert figures["repeated_recipients"] == 0 and figures["accepted"] == N, shown(figures)
    assert figures["sends"] == N, shown(figures)


# -- 3. liveness judged by the holder's own lease -------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_run_with_a_short_lease_does_not_take_over_a_live_run_on_the_default_lease(
        kind: str, request: pytest.FixtureRequest, children: Children, tmp_path: Path) -> None:
    """Run A, on the default lease (300 s), alive and never frozen, sends one message every
    6.7 s (``rate_limit=0.15``): it claimed all 40 at its start. 4 s after its first message
    was recorded (longer than B's lease, far shorter than A's), run B (``lease=3``,
    ``resend_unknown=True``) runs the same campaign: A's claims are held by a live run, so B
    waits for them its patience (about 10 s on its lease), then reports them skipped, held by
    another run, and sends none. A goes on and sends its next
    message. Against a sandbox that does not honour ``Idempotency-Key``, no recipient is
    reached twice. Before the fix: B judged A's liveness by B's own lease, took all A's claims
    over and sent them, and A's next message reached its recipient a second time."""
    campaign = f"lease-{kind}"
    journal = journal_of(kind, campaign, request, tmp_path)
    every = rows(SENDERS[0], N)
    with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
        a = children.start("a", spec(sandbox, journal=journal.where, campaign_id=campaign,
                                     rate_limit=0.15), every)
        b = children.start("b", spec(sandbox, timeout=TIMEOUT, journal=journal.where,
                                     campaign_id=campaign, resend_unknown=True, lease=LEASE),
                           every)
        with continued_at_the_end(a, b):
            a.wait_ready()
            b.wait_ready()
            a.go()
            wait_for(lambda: sandbox.stats()["accepted"] >= 1 and journal.sent() >= 1,
                     "A's first message, recorded")
            first = time.monotonic()
            went_out = {r["body"]["to"] for r in sandbox.sent_messages() if accepted(r)}
            # B's lease passes since A's last journal round trip; A's next send is 6.7 s after
            # its first.
            time.sleep(max(0.0, first + LEASE + 1.0 - time.monotonic()))
            assert a.alive(), a.stderr()
            b.go()
            b_record = b.result(timeout=60)
            after_b = counts(sandbox)
            # A, alive all along, goes on at its pace: its next message.
            wait_for(lambda: sandbox.stats()["sends"] > after_b["sends"],
                     "A's next message after B", timeout=20)
            time.sleep(0.5)
            a.kill()
        figures = counts(sandbox)
        per_recipient = Counter(r["body"]["to"] for r in sandbox.sent_messages() if accepted(r))
    b_outcomes = {o[0]: o for o in b_record.get("outcomes", [])}
    held = [row["to"] for row in every if row["to"] not in went_out]
    # Skipped: held by A when B gave up waiting, or sent by A meanwhile (A's result).
    not_skipped = {to: b_outcomes.get(to) for to in held
                   if b_outcomes.get(to) is None or b_outcomes[to][1] != "skipped"
                   or not ("another run" in (b_outcomes[to][3] or "")
                           or (b_outcomes[to][3] or "").startswith("already sent"))}
    figures.update({"a_sent_before_b": sorted(went_out), "after_b": after_b,
                    "b_counts": b_record.get("counts"), "b_error": b_record.get("error"),
                    "twice": sorted(to for to, n in per_recipient.items() if n > 1),
                    "b_did_not_skip": len(not_skipped)})
    # No recipient twice: B did not take over the live run's claims.
    assert figures["repeated_recipients"] == 0, shown(figures)
    assert b_record.get("counts", {}).get("sent") == 0, shown(figures)
    # B says why: each message A held is skipped, held by another run (or sent by it).
    assert not not_skipped, shown({**figures, "b_outcomes": dict(list(not_skipped.items())[:3])})
