"""What a SIGKILLed campaign leaves in doubt (issue 24 item 6): a child process runs
`send_many` with an SQLite journal against this process's embedded sandbox; once the journal
holds `--kill-after` sent messages it is SIGKILLed, and the journal's rows are counted by state.
In doubt: `dispatched` (and `unknown`) rows without a result, of which "arrived" reached the
sandbox (by idempotency key) and "never written" did not. `claimed` rows were certainly never
written: the next run sends them without `resend_unknown`. A measurement, not a test.

    python benches/in_doubt.py                       # rate 80, 1000 and unpaced, 3 runs each
    python benches/in_doubt.py --rates 80 --runs 1

Before `claimed` (a claim wrote `dispatched`), every claimed message, the ones waiting for their
pace included, was in doubt after a kill.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter

CHILD = r'''
import sys, bizmsg
url, token, sender, journal, rate, conc = sys.argv[1:7]
c = bizmsg.Client(token, base_url=url)
t = bizmsg.Template("order_update", ["A-1"], "en_US")
msgs = [bizmsg.Message(to=f"86139{i:08d}", from_=sender, template=t) for i in range(20000)]
kw = {} if rate == "none" else {"rate_limit": float(rate)}
c.messages.send_many(msgs, journal=journal, campaign_id="indoubt", concurrency=int(conc), **kw)
'''


def sent_rows(journal: str) -> int:
    try:
        connection = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=1)
        try:
            return int(connection.execute(
                "SELECT count(*) FROM bizmsg_messages WHERE state = 'sent'").fetchone()[0])
        finally:
            connection.close()
    except sqlite3.Error:
        return 0


def once(rate: str, concurrency: int, kill_after: int) -> tuple[Counter[str], int, int]:
    """One killed campaign: its journal's states, its rows in doubt, and how many of those
    reached the sandbox."""
    from bizmsg.testing import Sandbox

    with Sandbox() as sandbox:
        with sandbox.client() as client:
            sender = next(n for n in client.business_phone_numbers.iter()
                          if n.status == "CONNECTED")
        journal = os.path.join(tempfile.mkdtemp(prefix="bizmsg-in-doubt-"), "j.db")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
        child = subprocess.Popen([sys.executable, "-c", CHILD, sandbox.base_url, sandbox.token,
                                  sender.display_phone_number, journal, rate,
                                  str(concurrency)], env=env)
        try:
            while sent_rows(journal) < kill_after and child.poll() is None:
                time.sleep(0.01)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        time.sleep(0.3)  # requests the sandbox received before the kill are finished
        keys = {r["headers"].get("idempotency-key") for r in sandbox.requests()
                if r["path"].endswith("/send")}
    connection = sqlite3.connect(journal)
    try:
        rows = connection.execute("SELECT state, idempotency_key FROM bizmsg_messages").fetchall()
    finally:
        connection.close()
    states = Counter(state for state, _ in rows)
    doubt = [key for state, key in rows if state in ("dispatched", "unknown")]
    return states, len(doubt), sum(1 for key in doubt if key in keys)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rates", default="80,1000,none",
                        help="rate_limit values ('none': unpaced), comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--kill-after", type=int, default=200)
    args = parser.parse_args()
    for rate in args.rates.split(","):
        for _ in range(args.runs):
            states, doubt, arrived = once(rate, args.concurrency, args.kill_after)
            print(f"rate_limit={rate} concurrency={args.concurrency}: in doubt {doubt}, of which "
                  f"arrived {arrived}, never written {doubt - arrived}; claimed (never sent, "
                  f"sent by the next run) {states.get('claimed', 0)}; states {dict(states)}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
