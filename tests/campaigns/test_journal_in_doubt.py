"""What a killed campaign leaves in doubt (issue 24 item 6): a message's journal row is
`claimed` ahead of sending and becomes `dispatched` only just before its request is written, so
a campaign SIGKILLed mid-way leaves in doubt only the messages whose requests were being written,
not those claimed ahead or waiting for their pace; the next run sends every `claimed` one, once,
without ``resend_unknown``.

The killed run is a child process (``sys.executable -c``) sending to this process's sandbox,
which does not deduplicate by key (``honour_idempotency_keys=False``): a message sent twice is
two commits to one recipient. Nothing here is timed: the child is killed after a number of
commits, whenever they come.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bizmsg.testing import Sandbox
from campaign_support import commits_by_recipient, messages, settle
from conftest import Number

#: Messages of the killed campaign, its concurrency, and the commits seen before the kill.
TOTAL = 1000
CONCURRENCY = 32
KILL_AFTER = 150

CHILD = textwrap.dedent(
    """
    import sys
    import bizmsg

    base_url, token, sender, journal, total, concurrency, rate = sys.argv[1:8]
    # The same dicts as campaign_support.message(sender, i).
    rows = [{"to": f"1415{i:07d}", "from": sender, "name": "n", "parameters": [str(i)],
             "language": "en"} for i in range(int(total))]
    options = {} if rate == "none" else {"rate_limit": float(rate)}
    client = bizmsg.Client(token, base_url=base_url)
    client.messages.send_many(rows, journal=journal, campaign_id="in-doubt",
                              concurrency=int(concurrency), **options)
    """
)


@pytest.fixture
def forgetful() -> Iterator[Sandbox]:
    """A sandbox that sends every request it accepts, whatever its key (a message sent twice
    is two commits)."""
    with Sandbox(honour_idempotency_keys=False) as sandbox:
        yield sandbox


def journal_rows(journal: Path) -> list[tuple[str, str]]:
    """(state, idempotency key) of each row."""
    connection = sqlite3.connect(journal)
    try:
        return connection.execute("SELECT state, idempotency_key FROM bizmsg_messages").fetchall()
    finally:
        connection.close()


@pytest.mark.parametrize("rate", ["100", "none"])
def test_a_killed_campaign_leaves_in_doubt_only_what_it_was_writing(
    forgetful: Sandbox, sender: Number, tmp_path: Path, rate: str
) -> None:
    """Killed after 150 commits, paced (100 a second: most of its 32 sends in flight wait for
    their pace) or not: its rows in doubt that never reached the sandbox are at most its sends
    in flight, no `claimed` row had been sent, and a re-run without ``resend_unknown`` sends
    every message not in doubt exactly once (the `claimed` ones with their recorded keys),
    nobody twice. (Before `claimed`, every claimed message was in doubt: 126 after 200 sends at
    80 a second, none of which had been sent.)"""
    sandbox = forgetful
    digits = sender.digits
    journal = tmp_path / "c.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, sandbox.base_url, sandbox.token, digits, str(journal),
         str(TOTAL), str(CONCURRENCY), rate],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while sandbox.stats()["accepted"] < KILL_AFTER:
            if child.poll() is not None:
                pytest.fail(f"the child ended before it was killed:\n{child.communicate()[1]}")
            assert time.monotonic() < deadline, "the child sent too little"
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    settle(sandbox)
    received = {r["headers"].get("idempotency-key") for r in sandbox.sent_messages()}
    rows = journal_rows(journal)
    in_doubt = [key for state, key in rows if state in ("dispatched", "unknown")]
    never_written = [key for key in in_doubt if key not in received]
    claimed = {key for state, key in rows if state == "claimed"}
    report = (f"{len(rows)} rows: {len(in_doubt)} in doubt ({len(never_written)} never written), "
              f"{len(claimed)} claimed; the sandbox received {len(received)}")
    # In doubt: what was sent (its result not yet committed), and at most the messages whose
    # requests were about to be written, which are never more than the sends in flight.
    assert len(never_written) <= CONCURRENCY, report
    assert not claimed & received, f"a claimed message had been sent: {report}"
    before = commits_by_recipient(sandbox)
    assert max(before.values()) == 1, report

    with sandbox.client() as client:
        again = client.messages.send_many(messages(digits, TOTAL), journal=journal,
                                          campaign_id="in-doubt", concurrency=CONCURRENCY)
    commits = commits_by_recipient(sandbox)
    assert max(commits.values()) == 1, f"a recipient got two messages: {report}"
    assert again.counts["unknown"] == len(in_doubt), report
    sent_keys = {o.idempotency_key for o in again.sent()}
    # Every message claimed and never written is sent now, with the key its row held.
    assert claimed <= sent_keys, report
    # And every message is accounted for: sent once (before or now), or in doubt (reported
    # unknown, not sent again).
    assert len(commits) + len(never_written) == TOTAL, report
