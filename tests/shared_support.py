"""Helpers of the multi-process tests (``test_shared_limits.py``, ``test_shared_journal.py``,
``test_celery.py``): the sandbox's accounts as seed data, numbered messages, child processes
(``shared_child.py``) started together and read back, and the standalone sandbox's traffic.

What these tests judge is counted by the sandbox (messages committed per recipient, the busiest
second per sender, throughput refusals) or read from the journal: never a duration.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parent
CHILD = TESTS_DIR / "campaigns" / "shared_child.py"

#: The sandbox's numbers in these tests: STANDARD (80/s at the sandbox, paced at 60/s by
#: ``pace="auto"``), one account with a tier no test reaches unless it means to.
SENDERS = ("14155550100", "14155550101", "14155550102", "14155550103")
#: The platform's ceiling for a STANDARD number, which ``--enforce-limits`` applies.
STANDARD_CEILING = 80


def seed_data(senders: Sequence[str] = SENDERS, *, tier: str = "TIER_100K") -> dict[str, Any]:
    """One tenant (acme, token ``sandbox-token-acme``) with one account holding ``senders``,
    all CONNECTED, GREEN and STANDARD."""
    return {"tenants": {"acme": [{
        "bizAccountId": "100", "name": "Acme", "chatBusinessManagerMessagingLimit": tier,
        "businessPhoneNumbers": [
            {"phoneNumberId": str(200 + i), "displayPhoneNumber": f"+{sender}"}
            for i, sender in enumerate(senders)],
    }]}}


def write_seed_data(folder: Path, senders: Sequence[str] = SENDERS, **options: Any) -> Path:
    path = folder / "seed.json"
    path.write_text(json.dumps(seed_data(senders, **options)))
    return path


def recipient(group: int, i: int) -> str:
    """Recipient ``i`` of group ``group`` (a child, a shard): 13 digits, one per pair."""
    return f"86{group:03d}{i:08d}"


def rows(sender: str, count: int, *, group: int = 0, start: int = 0) -> list[dict[str, Any]]:
    """``count`` messages from ``sender``, each to a recipient of its own."""
    return [{"to": recipient(group, i), "from": sender, "name": "promo",
             "parameters": [f"{group}-{i}"], "language": "en"}
            for i in range(start, start + count)]


def child_env() -> dict[str, str]:
    """The environment of a child: this one's without any ``BIZMSG_`` setting, so that a
    child gets its store and journal from its spec only."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}


class Child:
    """``shared_child.py`` with ``spec`` (see there) and ``messages``, in a process of its own,
    started in ``cwd`` (default: ``folder``), after ``prefix`` (``ip netns exec NAME``: on
    another host). ``folder`` holds its spec, rows and stderr."""

    def __init__(self, name: str, spec: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                 *, folder: Path, cwd: Path | None = None, prefix: Sequence[str] = ()) -> None:
        self.name = name
        folder.mkdir(parents=True, exist_ok=True)
        rows_path = folder / f"{name}.rows.json"
        rows_path.write_text(json.dumps(list(messages)))
        spec_path = folder / f"{name}.spec.json"
        spec_path.write_text(json.dumps({**spec, "rows": str(rows_path)}))
        spec_path.chmod(0o600)
        self.stderr_path = folder / f"{name}.stderr"
        self.barrier = bool(spec.get("barrier"))
        if cwd is not None:
            cwd.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [*prefix, sys.executable, str(CHILD), str(spec_path)], cwd=cwd or folder,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=child_env(),
                text=True)
        self.pid = self.process.pid
        self.record: dict[str, Any] | None = None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Returns once the child printed ``ready`` (it waits for :meth:`go`)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"{self.name} never got ready:\n{self.stderr()}"
            readable, _, _ = select.select([self.process.stdout], [], [], min(left, 0.5))
            if readable:
                line = self.process.stdout.readline()
                assert line, f"{self.name} ended before it was ready:\n{self.stderr()}"
                if line.strip() == "ready":
                    return

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def alive(self) -> bool:
        return self.process.poll() is None

    def result(self, timeout: float = 90.0) -> dict[str, Any]:
        """Its printed record, once it ended (it must end well within ``timeout``)."""
        if self.record is None:
            try:
                stdout, _ = self.process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"{self.name} did not end within {timeout:.0f} s:\n"
                                     f"{self.stderr()}") from None
            lines = [line for line in stdout.splitlines() if line.startswith("{")]
            assert self.process.returncode == 0 and lines, (
                f"{self.name} exited with {self.process.returncode}:\n{stdout}\n{self.stderr()}")
            self.record = json.loads(lines[-1])
        return self.record

    def kill(self) -> None:
        """SIGKILL, as a crash; returns once it is gone."""
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class Children:
    """The children of one test: started by :meth:`start`, killed at :meth:`close` if still
    running (the fixture ``children`` closes it at teardown)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[Child] = []

    def start(self, name: str, spec: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
              *, cwd: Path | None = None, prefix: Sequence[str] = ()) -> Child:
        child = Child(name, spec, messages, folder=self.folder, cwd=cwd, prefix=prefix)
        self.started.append(child)
        return child

    def start_together(self, children: Sequence[Child]) -> None:
        """Waits until every one of ``children`` (started with ``barrier``) is ready, then
        lets them all go at once."""
        for child in children:
            child.wait_ready()
        for child in children:
            child.go()

    def close(self) -> None:
        for child in self.started:
            child.kill()


def traffic(base_url: str) -> dict[str, Any]:
    """The standalone sandbox's counts and per-sender traffic (``GET /_sandbox/traffic``)."""
    with urllib.request.urlopen(f"{base_url}/_sandbox/traffic", timeout=10) as answer:
        report: dict[str, Any] = json.load(answer)
    return report


def of_sender(report: Mapping[str, Any], sender: str) -> dict[str, Any]:
    """One sender's line of a traffic report (zeros when it sent nothing)."""
    for line in report["senders"]:
        if line["sender"] == sender:
            return dict(line)
    return {"sender": sender, "accepted": 0, "busiest_second": 0, "throttled": 0}


def wait_for(check: Any, what: str, timeout: float = 60.0, every: float = 0.02) -> Any:
    """Polls ``check()`` until it returns something true, and returns it; fails naming
    ``what`` after ``timeout`` seconds (a bound on a hang, not a measurement)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened within {timeout:.0f} s: {what}"
        time.sleep(every)


def outcomes_by_status(record: Mapping[str, Any]) -> dict[str, list[list[Any]]]:
    """A child's outcomes (``[to, status, key, reason, error]``) grouped by status."""
    grouped: dict[str, list[list[Any]]] = {}
    for outcome in record.get("outcomes", []):
        grouped.setdefault(outcome[1], []).append(outcome)
    return grouped


def iter_outcomes(records: Sequence[Mapping[str, Any]]) -> Iterator[list[Any]]:
    for record in records:
        yield from record.get("outcomes", [])


ROOT = TESTS_DIR.parent


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, as written."""
    text = path.read_text(encoding="utf-8")
    blocks: list[str] = []
    inside: list[str] | None = None
    for line in text.splitlines():
        if inside is None and line.strip() == "```python":
            inside = []
        elif inside is not None and line.strip() == "```":
            blocks.append("\n".join(inside) + "\n")
            inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def block_starting(path: Path, first_line: str, containing: str = "") -> str:
    """The one ```python block of ``path`` whose first line is ``first_line`` (and which
    contains ``containing``)."""
    found = [b for b in python_blocks(path)
             if b.splitlines()[0] == first_line and containing in b]
    assert len(found) == 1, f"{path.name}: {len(found)} blocks start with {first_line!r}"
    return found[0]
