"""CPU pinning and the lifetime of every process the suite starts.

Every child is started through :func:`spawn`, which remembers its PID until it has been reaped,
so that :func:`stop_all` (called on exit, Ctrl-C and SIGTERM) can end exactly the processes this
run started: never by name, since another nginx may well be running on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pinning:
    """Which CPU the clients and the server run on, or None for both when unpinned."""

    client_cpu: int | None
    server_cpu: int | None
    note: str

    @property
    def pinned(self) -> bool:
        return self.client_cpu is not None

    def prefix(self, role: str) -> list[str]:
        """The `taskset -c N` that goes in front of a command of this role."""
        cpu = self.client_cpu if role == "client" else self.server_cpu
        return [] if cpu is None else ["taskset", "-c", str(cpu)]


def choose_pinning() -> Pinning:
    # sched_getaffinity, not cpu_count: a container or cgroup may allow fewer CPUs than exist.
    allowed = sorted(os.sched_getaffinity(0))
    if shutil.which("taskset") is None:
        return Pinning(None, None, "UNPINNED: taskset not found (apt-get install util-linux)")
    if len(allowed) < 2:
        return Pinning(None, None, f"UNPINNED: only {len(allowed)} CPU available "
                                   f"({allowed}); client and server share it")
    client, server = allowed[0], allowed[1]
    return Pinning(client, server, f"client subprocesses on CPU {client}, server on CPU {server}")


_children: dict[int, subprocess.Popen[Any]] = {}


def spawn(argv: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """Popen, remembered until reaped. Each child gets its own session, so a Ctrl-C at the
    terminal reaches only this orchestrator, which then stops the children in order."""
    process: subprocess.Popen[Any] = subprocess.Popen(list(argv), start_new_session=True, **popen)
    _children[process.pid] = process
    return process


def reap(process: subprocess.Popen[Any]) -> None:
    _children.pop(process.pid, None)


def stop(process: subprocess.Popen[Any], sig: int = signal.SIGTERM, grace: float = 5.0) -> None:
    """Ends one child by its PID: `sig`, then SIGKILL after `grace` seconds."""
    if process.poll() is None:
        try:
            process.send_signal(sig)
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        except ProcessLookupError:
            pass
    reap(process)


def stop_all() -> None:
    for process in list(_children.values()):
        stop(process)


def children_of(pid: int) -> list[int]:
    """PIDs of the direct children of `pid` (nginx's workers), from /proc."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return found


def kill_leftovers(pids: Sequence[int], expected_name: str) -> None:
    """SIGKILLs those of `pids` that still run `expected_name` (the PID was not reused)."""
    deadline = time.monotonic() + 3
    for pid in pids:
        while _runs(pid, expected_name) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _runs(pid, expected_name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _runs(pid: int, name: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return name.encode() in f.read()
    except OSError:
        return False


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP become KeyboardInterrupt, so the same `finally` blocks clean up."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
