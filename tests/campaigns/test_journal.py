"""The campaign journal (``journal="c.db"``): a campaign cut short by a killed process or by
Ctrl-C is run again with the same input and sends only what was never sent; what was in doubt
is listed (or re-sent with its key when asked); a journal refuses another campaign and changed
input.

The interrupted runs are child processes (``sys.executable -c``) sending to this process's
sandbox, slowed down (``sandbox.delay``) so that they can be stopped mid-way; the checks count
what the sandbox committed per recipient.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from campaign_support import commits_by_recipient, message, messages, recipient, settle
from conftest import DEFAULT_SIGINT, Number, committed

#: Messages of the interrupted campaigns.
TOTAL = 3000
#: Commits the sandbox has seen when the child is stopped.
STOP_AT = 300

CHILD = DEFAULT_SIGINT + textwrap.dedent(
    """
    import json, sys
    import bizmsg

    base_url, token, sender, journal, total = sys.argv[1:6]
    # The same dicts as campaign_support.message(sender, i).
    rows = ({"to": f"1415{i:07d}", "from": sender, "name": "n", "parameters": [str(i)],
             "language": "en"} for i in range(int(total)))
    client = bizmsg.Client(token, base_url=base_url)
    try:
        result = client.messages.send_many(rows, journal=journal, concurrency=16)
    except KeyboardInterrupt as interrupt:
        partial = getattr(interrupt, "bulk_result", None)
        if partial is None:  # a known bug, see test_campaign_interrupts.py
            print(json.dumps({"interrupted": True, "bulk_result": False}), flush=True)
        else:
            print(json.dumps({"interrupted": True, "bulk_result": True,
                              "counts": partial.counts, "stop_reason": partial.stop_reason,
                              "sent": [o.message["to"] for o in partial.sent()]}), flush=True)
    else:
        print(json.dumps({"interrupted": False, "counts": result.counts}), flush=True)
    """
)


def stop_child_mid_campaign(sandbox: Sandbox, sender: str, journal: Path,
                            signum: int) -> subprocess.CompletedProcess[str]:
    """Runs the campaign in a child process and sends it ``signum`` once the sandbox has
    committed ``STOP_AT`` messages; returns once it is gone and the sandbox has finished every
    request it had received."""
    sandbox.delay = 0.005
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, sandbox.base_url, sandbox.token, sender, str(journal),
         str(TOTAL)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while sandbox.stats()["accepted"] < STOP_AT:
            if child.poll() is not None:
                pytest.fail(f"the child ended before it was stopped:\n{child.communicate()[1]}")
            assert time.monotonic() < deadline, "the child sent nothing"
            time.sleep(0.002)
        child.send_signal(signum)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    settle(sandbox)
    sandbox.delay = 0
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def first_keys_by_recipient(sandbox: Sandbox) -> dict[str, dict[str, Any]]:
    """Each recipient's commit (there must be one at most)."""
    records = committed(sandbox)
    assert len(records) == len({r["body"]["to"] for r in records}), "a recipient got two"
    return {r["body"]["to"]: r for r in records}


def test_resume_after_the_process_was_killed(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    """A campaign of 3,000 is SIGKILLed after ~300 commits. Run again with the same journal
    and input: what the journal knows as sent is skipped (with its recorded result), what was
    in flight is listed ``unknown`` (never re-sent blindly), the rest is sent: no recipient
    gets two messages, and nothing the journal knew was sent again. A third run with
    ``resend_unknown=True`` re-sends the ones in doubt with their keys: the sandbox answers
    those that had gone out with the original result, and every message is then delivered
    exactly once."""
    journal = tmp_path / "c.db"
    killed = stop_child_mid_campaign(sandbox, sender.digits, journal, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before_kill = first_keys_by_recipient(sandbox)
    assert STOP_AT <= len(before_kill) < TOTAL

    stats = sandbox.stats()
    with sandbox.client() as client:
        resumed = client.messages.send_many(messages(sender.digits, TOTAL), journal=journal)
    after = sandbox.stats()
    commits = commits_by_recipient(sandbox)

    skipped = {o.message["to"]: o for o in resumed.skipped()}
    unknown = {o.message["to"]: o for o in resumed.unknown()}
    sent = {o.message["to"]: o for o in resumed.sent()}
    doubt_went_out = set(unknown) & set(before_kill)
    report = (f"{len(before_kill)} went out before the kill; on resume {len(skipped)} skipped "
              f"as sent, {len(unknown)} in doubt ({len(doubt_went_out)} of which had gone "
              f"out), {len(sent)} sent")
    assert len(resumed) == TOTAL and resumed.counts["rejected"] == resumed.counts["failed"] == 0
    assert len(skipped) + len(unknown) + len(sent) == TOTAL, report
    assert max(commits.values()) == 1, report
    assert after["replayed"] == stats["replayed"], "a message the journal knew was sent again"
    assert set(before_kill) <= set(skipped) | set(unknown), report
    assert len(unknown) > 0, report  # the messages in flight (and marked ahead) at the kill
    for to, outcome in skipped.items():
        assert outcome.reason == "already sent by an earlier run (journal)"
        record = before_kill[to]
        assert outcome.idempotency_key == record["headers"]["idempotency-key"]
        assert outcome.result is not None
        assert outcome.result.sms_id == record["response_body"]["smsId"]
    for to, outcome in unknown.items():
        assert "in doubt since an earlier run" in (outcome.reason or "")
        assert isinstance(outcome.error, bizmsg.SendOutcomeUnknownError)
        assert outcome.error.idempotency_key == outcome.idempotency_key
        assert commits[to] == (1 if to in before_kill else 0), report
        if to in before_kill:
            assert outcome.idempotency_key == before_kill[to]["headers"]["idempotency-key"]
    for to in sent:
        assert to not in before_kill and commits[to] == 1, report
    assert after["accepted"] - stats["accepted"] == len(sent), report

    with sandbox.client() as client:
        again = client.messages.send_many(messages(sender.digits, TOTAL), journal=journal,
                                          resend_unknown=True)
    final = sandbox.stats()
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(TOTAL)}, report
    assert again.counts["sent"] == len(unknown) and again.counts["unknown"] == 0, report
    assert again.counts["skipped"] == TOTAL - len(unknown)
    for to, outcome in unknown.items():
        resent = again.outcomes[outcome.index]
        assert resent.status == "sent" and resent.idempotency_key == outcome.idempotency_key
    assert final["replayed"] - after["replayed"] == len(doubt_went_out), report
    assert final["accepted"] - after["accepted"] == len(unknown) - len(doubt_went_out), report


def test_resume_with_resend_unknown_delivers_each_message_exactly_once(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    """Killed mid-way, then resumed at once with ``resend_unknown=True``: the messages in doubt
    go out again with the same keys, and the sandbox ends with exactly one commit per
    recipient (commits counted as accepted sends that were not idempotent replays)."""
    journal = tmp_path / "c.db"
    killed = stop_child_mid_campaign(sandbox, sender.digits, journal, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before_kill = first_keys_by_recipient(sandbox)
    stats = sandbox.stats()
    with sandbox.client() as client:
        resumed = client.messages.send_many(messages(sender.digits, TOTAL), journal=journal,
                                            resend_unknown=True)
    after = sandbox.stats()
    replays = [r for r in sandbox.sent_messages() if r["idempotent_replay"]]
    report = (f"{len(before_kill)} went out before the kill; on resume "
              f"{resumed.counts['skipped']} skipped, {resumed.counts['sent']} sent, of which "
              f"{len(replays)} were replays of messages in doubt that had gone out")
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(TOTAL)}, report
    assert resumed.counts["unknown"] == 0 and resumed.counts["sent"] + resumed.counts[
        "skipped"] == TOTAL, report
    assert after["replayed"] - stats["replayed"] == len(replays), report
    assert after["accepted"] - stats["accepted"] == TOTAL - len(before_kill), report
    for record in replays:
        # A replay answers with what the first run's message got.
        assert record["response_body"] == before_kill[record["body"]["to"]]["response_body"]


def test_ctrl_c_leaves_a_consistent_journal(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    """Ctrl-C (SIGINT) in a child running a sync campaign: ``KeyboardInterrupt`` carries the
    partial result (no message left in doubt), and the journal is complete: the resumed run
    skips exactly what went out, sends the rest, and nothing goes out twice."""
    journal = tmp_path / "c.db"
    interrupted = stop_child_mid_campaign(sandbox, sender.digits, journal, signal.SIGINT)
    assert interrupted.returncode == 0, interrupted.stderr
    report = json.loads(interrupted.stdout)
    assert report["interrupted"] is True and report["bulk_result"] is True, report
    assert report["stop_reason"] == "interrupted"
    assert report["counts"]["unknown"] == 0 and report["counts"]["failed"] == 0
    before = first_keys_by_recipient(sandbox)
    assert sorted(report["sent"]) == sorted(before)  # every message that went out, reported

    stats = sandbox.stats()
    with sandbox.client() as client:
        resumed = client.messages.send_many(messages(sender.digits, TOTAL), journal=journal)
    assert resumed.counts["unknown"] == 0
    assert {o.message["to"] for o in resumed.skipped()} == set(before)
    assert resumed.counts["sent"] == TOTAL - len(before)
    assert commits_by_recipient(sandbox) == {recipient(i): 1 for i in range(TOTAL)}
    assert sandbox.stats()["replayed"] == stats["replayed"]


# --- what a journal refuses ---------------------------------------------------------------------


def test_a_journal_of_another_campaign_is_refused(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    """A journal keeps the campaign id it was made with (the one given, or its own): running
    it with another id raises ``CampaignError`` before anything is read or sent. With its own
    id it keys messages exactly like ``campaign_id=`` alone."""
    journal = tmp_path / "spring.db"
    items = messages(sender.digits, 5)
    first = client.messages.send_many(items, journal=journal, campaign_id="spring")
    assert first.campaign_id == "spring"
    sandbox.clear_requests()
    with pytest.raises(bizmsg.CampaignError) as caught:
        client.messages.send_many(items, journal=journal, campaign_id="summer")
    assert 'belongs to campaign "spring", not "summer"' in str(caught.value)
    assert str(journal) in str(caught.value)
    assert sandbox.requests() == []

    unnamed = tmp_path / "unnamed.db"
    own = client.messages.send_many(items, journal=unnamed)
    assert own.campaign_id is not None
    with pytest.raises(bizmsg.CampaignError, match="belongs to campaign"):
        client.messages.send_many(items, journal=unnamed, campaign_id="spring")
    rerun = client.messages.send_many(items, journal=unnamed)
    assert rerun.campaign_id == own.campaign_id

    with Sandbox() as other, other.client() as fresh:
        plain = fresh.messages.send_many(items, campaign_id="spring")
    assert [o.idempotency_key for o in plain] == [o.idempotency_key for o in first]


def test_a_changed_message_is_a_new_message_and_the_others_are_done(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    """The journal knows a message by what it is, not by its position: a message changed in
    the input is a new message, sent; the others are skipped as done, and nothing stops.
    (Before journal format 2, the first position that no longer matched stopped the run.)"""
    journal = tmp_path / "c.db"
    client.messages.send_many(messages(sender.digits, 5), journal=journal)
    changed = messages(sender.digits, 5)
    changed[2] = message(sender.digits, 2, parameters=["other"])
    sandbox.clear_requests()
    result = client.messages.send_many(changed, journal=journal)
    assert [o.status for o in result] == ["skipped", "skipped", "sent", "skipped", "skipped"]
    assert result.stopped_by is None and result.stop_reason is None
    assert [r["body"]["template"]["parameters"] for r in sandbox.sent_messages()] == \
        ['["other"]']


def test_an_unusable_journal_file_is_a_campaign_error(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("these are my notes, not a journal\n" * 100)
    with pytest.raises(bizmsg.CampaignError, match="is not usable"):
        client.messages.send_many(messages(sender.digits, 3), journal=not_sqlite)
    with pytest.raises(bizmsg.CampaignError):
        client.messages.send_many(messages(sender.digits, 3), journal=tmp_path / "no" / "dir.db")
    assert sandbox.sent_messages() == []


# --- re-running a finished campaign -------------------------------------------------------------


def test_rerunning_a_finished_campaign_sends_nothing(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, globex_sender: Number,
    tmp_path: Path,
) -> None:
    """Every message of a finished campaign is skipped on a re-run, sent and rejected alike,
    with the result the journal recorded; invalid ones fail again; nothing is requested."""
    journal = tmp_path / "c.db"
    items: list[Any] = [message(sender.digits, 0), message(globex_sender.digits, 1), 42,
                        message(sender.digits, 3)]
    first = client.messages.send_many(items, journal=journal)
    assert [o.status for o in first] == ["sent", "rejected", "failed", "sent"]
    sandbox.clear_requests()
    again = client.messages.send_many(items, journal=journal)
    assert [o.status for o in again] == ["skipped", "skipped", "failed", "skipped"]
    assert again.outcomes[0].reason == "already sent by an earlier run (journal)"
    assert again.outcomes[1].reason == "already rejected by an earlier run (journal)"
    for before, after in zip(first.outcomes, again.outcomes):
        if after.status == "skipped":
            assert after.idempotency_key == before.idempotency_key
            assert after.result is not None and before.result is not None
            assert after.result.sms_id == before.result.sms_id
            assert after.result.code == before.result.code
    assert again.outcomes[0].result is not None and again.outcomes[0].result.ok
    assert again.outcomes[1].result is not None and not again.outcomes[1].result.ok
    assert sandbox.requests() == []


def test_rerunning_does_not_send_what_the_first_run_skipped_as_a_duplicate(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    """A duplicate the first run skipped is skipped again by a re-run, never sent (it was,
    with a new key, before this was fixed)."""
    journal = tmp_path / "c.db"
    items = [message(sender.digits, 0), message(sender.digits, 1), message(sender.digits, 0)]
    first = client.messages.send_many(items, journal=journal)
    assert [o.status for o in first] == ["sent", "sent", "skipped"]
    again = client.messages.send_many(items, journal=journal)
    assert commits_by_recipient(sandbox) == {recipient(0): 1, recipient(1): 1}
    assert [o.status for o in again] == ["skipped"] * 3
    assert again.outcomes[2].duplicate_of == 0


def test_a_campaign_stopped_early_is_finished_by_a_rerun(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, globex_sender: Number,
    tmp_path: Path,
) -> None:
    """Messages left ``skipped`` because the campaign stopped (``stop_on_error``) are sent by
    the next run with the same journal; what was done is not redone."""
    journal = tmp_path / "c.db"
    items = [message(globex_sender.digits if i == 0 else sender.digits, i) for i in range(300)]
    first = client.messages.send_many(items, journal=journal, stop_on_error=True,
                                      concurrency=4)
    assert first.stopped_by is not None and first.counts["skipped"] > 0
    done = {o.message["to"] for o in first.sent()}
    second = client.messages.send_many(items, journal=journal)
    assert second.outcomes[0].status == "skipped"  # rejected before: not retried
    assert {o.message["to"] for o in second.sent()}.isdisjoint(done)
    commits = commits_by_recipient(sandbox)
    assert commits == Counter({recipient(i): 1 for i in range(1, 300)})


def journal_states(journal: Path) -> Counter[str]:
    """How many rows of the journal are in each state."""
    import sqlite3

    connection = sqlite3.connect(journal)
    try:
        return Counter(dict(connection.execute(
            "SELECT state, count(*) FROM bizmsg_messages GROUP BY state").fetchall()))
    finally:
        connection.close()


def journal_runs(journal: Path) -> Counter[str]:
    """How many runs of the journal are in each state (read with Python's own SQLite)."""
    import sqlite3

    connection = sqlite3.connect(journal)
    try:
        return Counter(dict(connection.execute(
            "SELECT state, count(*) FROM bizmsg_runs GROUP BY state").fetchall()))
    finally:
        connection.close()


#: Runs campaigns on one journal, reading it with Python's sqlite3 after each; prints the runs'
#: states seen each time. Run on one CPU, where the race it checks showed at once.
READ_AFTER_EACH_RUN = textwrap.dedent(
    """
    import asyncio, json, sqlite3, sys
    import bizmsg

    base_url, token, sender, journal, mode = sys.argv[1:6]
    rows = [{"to": f"1415{i:07d}", "from": sender, "name": "n", "parameters": [str(i)],
             "language": "en"} for i in range(5)]

    def runs():
        connection = sqlite3.connect(journal)
        try:
            return dict(connection.execute(
                "SELECT state, count(*) FROM bizmsg_runs GROUP BY state").fetchall())
        finally:
            connection.close()

    def new(i):
        return rows + [{**rows[0], "to": f"1416{i:07d}"}]

    seen = []
    if mode == "async":
        async def main():
            client = bizmsg.AsyncClient(token, base_url=base_url)
            for i in range(30):
                result = await client.messages.send_many(new(i), journal=journal)
                seen.append([result.counts["sent"], runs()])
        asyncio.run(main())
    else:
        client = bizmsg.Client(token, base_url=base_url)
        for i in range(30):
            result = client.messages.send_many(new(i), journal=journal)
            seen.append([result.counts["sent"], runs()])
    print(json.dumps(seen))
    """
)


def on_one_cpu() -> None:
    """Pins a child process (every thread it starts) to one CPU where the platform can."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_run_has_ended_and_closed_the_journal_when_send_many_returns(
    sandbox: Sandbox, sender: Number, tmp_path: Path, mode: str
) -> None:
    """Read with another copy of SQLite (Python's sqlite3) right after each run, the journal
    shows every run ended and stays sound. (Regression: the run was recorded ended, and its
    connection closed, after the caller had the result; sqlite3 closing its connection in
    between took itself for the last one, checkpointed and deleted the WAL ours still wrote
    to, and the next run found "database disk image is malformed", seen under qemu. On one
    CPU the previous wheel showed a run still `running` in the first rounds.)"""
    journal = tmp_path / "c.db"
    child = subprocess.run(
        [sys.executable, "-c", READ_AFTER_EACH_RUN, sandbox.base_url, sandbox.token,
         sender.digits, str(journal), mode],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        preexec_fn=on_one_cpu,
    )
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout)
    assert seen == [[6 if i == 0 else 1, {"ended": i + 1}] for i in range(30)]


@pytest.mark.usefixtures("sigint_handler")
def test_a_ctrl_c_while_the_input_is_read_leaves_what_was_sent_alone(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    """A re-run interrupted while it reads its input reports the items it had not taken as
    skipped, and must not write that over the journal's ``sent`` rows: the next run would
    send those messages again. (A regression test: 512 sent rows became skipped, and the next
    run re-sent them, saved from duplicates only by the sandbox honouring the keys.)"""
    journal = tmp_path / "c.db"
    items = messages(sender.digits, 1500)
    first = client.messages.send_many(items, journal=journal)
    assert first.counts["sent"] == 1500

    def interrupted() -> Any:
        for i, item in enumerate(items):
            if i == 700:
                signal.raise_signal(signal.SIGINT)
            yield item

    with pytest.raises(KeyboardInterrupt) as caught:
        client.messages.send_many(interrupted(), journal=journal)
    partial: bizmsg.BulkResult = caught.value.bulk_result  # type: ignore[attr-defined]
    assert partial.counts["sent"] == 0 and partial.counts["skipped"] == len(partial)
    assert journal_states(journal) == Counter({"sent": 1500})

    sandbox.clear_requests()
    third = client.messages.send_many(items, journal=journal)
    assert third.counts["skipped"] == 1500 and sandbox.sent_messages() == []


def test_a_reordered_or_grown_input_sends_nothing_twice(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    """A row inserted at the top, the input reversed, then the original input: every message
    already sent is skipped whatever its position, the new one is sent once, and the journal's
    records of the first run are untouched. (Regression: with positions, a row inserted at the
    top would have sent the last message a second time.)"""
    journal = tmp_path / "c.db"
    items = messages(sender.digits, 100)
    first = client.messages.send_many(items + [items[0]], journal=journal)
    assert first.counts["sent"] == 100 and first.counts["skipped"] == 1
    before = journal_states(journal)

    shifted = [message(sender.digits, 999)] + items
    second = client.messages.send_many(shifted, journal=journal)
    assert second.counts["sent"] == 1 and second.counts["skipped"] == 100
    assert second.outcomes[0].ok and second.stopped_by is None

    backwards = client.messages.send_many(list(reversed(items)), journal=journal)
    assert backwards.counts["skipped"] == 100
    third = client.messages.send_many(items, journal=journal)
    assert third.counts["skipped"] == 100
    assert journal_states(journal) == before + Counter({"sent": 1})
    expected = Counter({recipient(i): 1 for i in range(100)}) + Counter({recipient(999): 1})
    assert commits_by_recipient(sandbox) == expected


def test_a_message_in_doubt_stays_in_doubt_when_this_run_does_not_send_it(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path
) -> None:
    """A message left in doubt by a killed run and taken again with ``resend_unknown=True``
    keeps its doubt in the journal if this run stops before sending it: the next run still
    lists it ``unknown`` instead of sending it as if it never left."""
    journal = tmp_path / "c.db"
    killed = stop_child_mid_campaign(sandbox, sender.digits, journal, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    in_doubt = journal_states(journal)["dispatched"]
    assert in_doubt > 0
    # An invalid item closes the first chunk the engine reads (512 items, taken in one go):
    # the messages in doubt are queued to be re-sent, then the stop reports them skipped
    # before any is sent.
    items: list[Any] = messages(sender.digits, TOTAL)
    stopped = client.messages.send_many(items[:511] + [{"to": "12"}] + items[512:],
                                        journal=journal, resend_unknown=True,
                                        stop_on_error=True)
    assert stopped.counts["sent"] == 0 and stopped.stopped_by is not None
    assert journal_states(journal)["dispatched"] == in_doubt
    again = client.messages.send_many(items, journal=journal)
    assert again.counts["unknown"] == in_doubt
    assert max(commits_by_recipient(sandbox).values()) == 1


def test_a_retry_key_is_journaled_before_it_is_used(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    """A failed commit with a temporary platform code is sent again with a new key
    (``<key>.r1``); the journal records that key before the retry leaves, so a process killed
    during the retry leaves the key the message may have gone out with. (A regression test:
    the row kept the first key, and a resume would have re-sent with a key the service had
    answered with a failure, not the one of the retry.)"""
    journal = tmp_path / "c.db"
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": None, "status": "FAILED", "code": "130429", "msg": "throughput"}))
    sandbox.inject("send", delay=30.0)  # the retry: processed, answered late
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, sandbox.base_url, sandbox.token, sender.digits,
         str(journal), "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while len(sandbox.sent_messages()) < 2:
            assert child.poll() is None, child.communicate()[1]
            assert time.monotonic() < deadline, "the retry never came"
            time.sleep(0.01)
        child.kill()
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    first, retry = sandbox.sent_messages()[:2]
    key = first["headers"]["idempotency-key"]
    assert retry["headers"]["idempotency-key"] == key + ".r1"
    import sqlite3

    connection = sqlite3.connect(journal)
    try:
        rows = connection.execute(
            "SELECT occurrence, state, idempotency_key FROM bizmsg_messages").fetchall()
    finally:
        connection.close()
    assert rows == [(0, "dispatched", key + ".r1")]


@pytest.mark.parametrize("first", ["another message", "an invalid item"])
def test_a_message_moved_by_changed_input_is_not_sent_again(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Path, first: str
) -> None:
    """A row inserted at the top of the input moves every message one position down: none is
    sent again, and a duplicate the first run skipped keeps its original. Only the new message
    goes (or fails, when invalid). (Regression tests: both sent a second message to someone
    while the journal knew messages by position.)"""
    journal = tmp_path / "c.db"
    items: list[Any] = messages(sender.digits, 10)
    client.messages.send_many(items, journal=journal)
    new: Any = message(sender.digits, 999) if first == "another message" else {"to": "12"}
    moved = client.messages.send_many([new] + items, journal=journal)
    assert moved.counts["sent"] == (1 if first == "another message" else 0)
    assert moved.counts["skipped"] == 10 and moved.stopped_by is None

    journal_dup = tmp_path / "dup.db"
    a = message(sender.digits, 20)
    client.messages.send_many([a, a], journal=journal_dup)
    other: Any = message(sender.digits, 998) if first == "another message" else {"to": "12"}
    again = client.messages.send_many([other, a], journal=journal_dup)
    assert again.outcomes[1].status == "skipped"
    assert max(commits_by_recipient(sandbox).values()) == 1
