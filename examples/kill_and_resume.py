"""A campaign whose process is killed mid-way (SIGKILL: no cleanup at all), resumed from its
journal: every message is delivered exactly once.

The campaign runs in a child process (this script with ``--child``) against the embedded
sandbox, which is slowed down a little so that the kill lands mid-way. The parent then runs the
same input with the same journal twice: first as a plain re-run (what went out is skipped, what
was in flight when the process died is listed as unknown, never re-sent blindly), then with
``resend_unknown=True`` (the messages in doubt go out again with their own idempotency keys, so
the service answers those that had gone out with their original result). The sandbox counts
what it delivered to each recipient.

    python examples/kill_and_resume.py [MESSAGES]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bizmsg
from bizmsg.testing import Sandbox


def rows(sender: str, total: int) -> Iterator[dict[str, Any]]:
    """The campaign's input, made on demand: the same rows on every run, as a job that reads
    the same CSV or query would produce them."""
    for i in range(total):
        yield {"to": f"1415{i:07d}", "from": sender, "name": "order_update",
               "parameters": [f"A-{i}"], "language": "en"}


def child(base_url: str, token: str, sender: str, journal: str, total: int) -> None:
    with bizmsg.Client(token, base_url=base_url) as client:
        client.messages.send_many(rows(sender, total), journal=journal, concurrency=16)


def delivered(sandbox: Sandbox) -> Counter[str]:
    """Messages that went out, per recipient: accepted sends that were not replays of an
    idempotency key the sandbox had already seen."""
    return Counter(
        r["body"]["to"] for r in sandbox.sent_messages()
        if r["status"] == 200 and not r["idempotent_replay"]
        and isinstance(r["response_body"], dict) and r["response_body"].get("status") == "ACCEPTED"
    )


def main(total: int) -> None:
    with Sandbox() as sandbox, sandbox.client() as client, \
            tempfile.TemporaryDirectory() as tmp:
        sender = next(n for n in client.business_phone_numbers.iter() if n.status == "CONNECTED")
        assert sender.display_phone_number is not None
        journal = str(Path(tmp) / "campaign.db")

        sandbox.delay = 0.002
        env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
        process = subprocess.Popen(
            [sys.executable, __file__, "--child", sandbox.base_url, sandbox.token,
             sender.display_phone_number, journal, str(total)], env=env)
        deadline = time.monotonic() + 60
        while sandbox.stats()["accepted"] < total // 4:
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit("the campaign ended before it could be killed")
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        process.wait()
        # Requests the sandbox had received when the process died are still processed to the
        # end (status 0 until answered): wait for them, as a real service would finish them.
        while any(r["status"] == 0 for r in sandbox.requests()):
            time.sleep(0.01)
        sandbox.delay = 0
        before = sum(delivered(sandbox).values())
        print(f"killed with SIGKILL after {before:,} of {total:,} messages had gone out")

        rerun = client.messages.send_many(rows(sender.display_phone_number, total),
                                          journal=journal)
        print(f"re-run:            {rerun.counts['skipped']:,} skipped (journal: already sent), "
              f"{rerun.counts['unknown']:,} in doubt (listed, not re-sent), "
              f"{rerun.counts['sent']:,} sent")
        resend = client.messages.send_many(rows(sender.display_phone_number, total),
                                           journal=journal, resend_unknown=True)
        print(f"resend_unknown:    {resend.counts['sent']:,} in doubt re-sent with their keys, "
              f"{resend.counts['skipped']:,} skipped")

        per_recipient = delivered(sandbox)
        replays = sum(1 for r in sandbox.sent_messages() if r["idempotent_replay"])
        print(f"the sandbox delivered {sum(per_recipient.values()):,} messages to "
              f"{len(per_recipient):,} recipients, at most {max(per_recipient.values())} each; "
              f"{replays:,} re-sent keys were answered with their original result")
        if len(per_recipient) != total or max(per_recipient.values()) != 1:
            sys.exit("a message was lost or sent twice")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        base_url, token, sender, journal, count = sys.argv[2:7]
        child(base_url, token, sender, journal, int(count))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
