"""Helpers shared by the campaign tests (``campaigns/``: ``test_campaigns.py`` and the
``test_campaign_*.py`` beside it, ``test_campaigns_async.py``, ``test_journal.py``): numbered
messages, inputs that count how far they were read, and the sandbox-side checks that no message
went out twice."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import bizmsg
from bizmsg.testing import Fault, Sandbox
from conftest import committed


def recipient(i: int) -> str:
    """The recipient of message ``i``: 11 digits, one per ``i`` (``i`` below 10**7)."""
    return f"1415{i:07d}"


def message(sender: str, i: int, **changes: Any) -> dict[str, Any]:
    """Message ``i`` as a flat dict (``to``, ``from``, ``name``, ``parameters``, ``language``)."""
    return {"to": recipient(i), "from": sender, "name": "n", "parameters": [str(i)],
            "language": "en", **changes}


def messages(sender: str, count: int, start: int = 0) -> list[dict[str, Any]]:
    return [message(sender, i) for i in range(start, start + count)]


class Pulls:
    """An input of ``count`` messages made on demand, counting how many were taken."""

    def __init__(self, sender: str, count: int, start: int = 0) -> None:
        self.sender = sender
        self.count = count
        self.start = start
        self.pulled = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(self.start, self.start + self.count):
            self.pulled += 1
            yield message(self.sender, i)

    async def aiter(self) -> AsyncIterator[dict[str, Any]]:
        """The same messages as an async generator."""
        for i in range(self.start, self.start + self.count):
            self.pulled += 1
            yield message(self.sender, i)


def commits_by_recipient(sandbox: Sandbox) -> Counter[str]:
    """How many messages went out to each recipient (accepted, not an idempotent replay)."""
    return Counter(r["body"]["to"] for r in committed(sandbox))


def settle(sandbox: Sandbox, timeout: float = 20.0) -> None:
    """Waits until no request is still being handled by the sandbox (a request received before
    its client went away is processed to the end, and may commit a message late)."""
    deadline = time.monotonic() + timeout
    while any(r["status"] == 0 for r in sandbox.requests()):
        assert time.monotonic() < deadline, "the sandbox kept requests in flight"
        time.sleep(0.01)


#: Faults on "send" for the no-duplicates tests, each on ~2-3 % of requests, drawn from the
#: sandbox's seeded generator: two answered before processing (retried with the same key),
#: one cut after processing (the message went out: unknown) and one 500 (unknown, not sent).
NO_DUPLICATE_FAULTS = [
    Fault(status=503, headers={"Retry-After": "0"}, times=None, probability=0.03),
    Fault(status=429, headers={"Retry-After": "0"}, times=None, probability=0.03),
    Fault(cut_connection=True, times=None, probability=0.02),
    Fault(status=500, times=None, probability=0.02),
]


def check_no_duplicates_under_faults(sandbox: Sandbox, outcomes: list[bizmsg.SendOutcome],
                                     total: int) -> None:
    """What the sandbox received agrees with the outcomes: no recipient got two messages,
    each ``sent`` outcome is exactly one commit with its key, each ``unknown`` is a cut
    connection (committed once) or a 500 (not committed), each ``failed`` one was never
    committed, and every fault kind really happened."""
    assert [o.index for o in outcomes] == list(range(total))
    per_recipient = commits_by_recipient(sandbox)
    assert max(per_recipient.values()) == 1, per_recipient.most_common(3)
    commits_by_key: dict[str, list[dict[str, Any]]] = {}
    for record in committed(sandbox):
        commits_by_key.setdefault(record["headers"]["idempotency-key"], []).append(record)
    records_by_key: dict[str, list[dict[str, Any]]] = {}
    for record in sandbox.sent_messages():
        records_by_key.setdefault(record["headers"]["idempotency-key"], []).append(record)
    cut = five_hundred = 0
    for outcome in outcomes:
        key = outcome.idempotency_key
        assert key is not None
        commits = commits_by_key.get(key, [])
        to = outcome.message["to"]
        if outcome.status == "sent":
            [commit] = commits
            assert commit["body"]["to"] == to
            assert outcome.result is not None
            assert outcome.result.sms_id == commit["response_body"]["smsId"]
        elif outcome.status == "unknown":
            error = outcome.error
            assert isinstance(error, bizmsg.SendOutcomeUnknownError)
            assert error.idempotency_key == key
            if isinstance(error.__cause__, bizmsg.ServerError):
                assert error.__cause__.status_code == 500
                assert commits == [] and records_by_key[key][-1]["status"] == 500
                five_hundred += 1
            else:
                # Cut after processing: the message went out, exactly once.
                assert isinstance(error.__cause__, bizmsg.ConnectionBrokenError), error.__cause__
                assert len(commits) == 1
                cut += 1
        else:
            # Only 503/429 every time until the retries ran out: provably never sent.
            assert outcome.status == "failed", outcome
            assert isinstance(outcome.error, (bizmsg.ServerError, bizmsg.RateLimitError))
            assert commits == []
    statuses = Counter(r["status"] for r in sandbox.sent_messages())
    assert statuses[503] > 0 and statuses[429] > 0 and statuses[500] > 0, statuses
    assert cut > 0, "no connection was cut: the fault did not happen"
    assert five_hundred == statuses[500]
    assert len(committed(sandbox)) == sum(o.status == "sent" for o in outcomes) + cut
