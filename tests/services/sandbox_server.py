"""The standalone sandbox, ``python -m bizmsg sandbox --port N``, as a process of its own: the
service every process of a multi-process test talks to, and the upstream of nginx, HAProxy and
Squid.

It is ready when it prints its banner (``bizmsg sandbox on http://127.0.0.1:N; ...``), which it
does once listening. SIGTERM stops it, and it then prints its counts, which :meth:`stop` reads
back (``stats``), the same numbers as ``Sandbox.stats()``.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Sequence

from .processes import ServerProcess, ServiceStartError
from .server import Server

_BANNER = r"^bizmsg sandbox on http://127\.0\.0\.1:\d+;"
_STOPPED = re.compile(
    r"stopped after ([\d,]+) requests: ([\d,]+) sends, ([\d,]+) accepted, ([\d,]+) failed "
    r"commits, ([\d,]+) replayed, ([\d,]+) throttled")


class SandboxProcess(Server):
    """``python -m bizmsg sandbox`` on a free loopback port; ``args`` are added to its command
    line (``["--enforce-limits"]``, ``["--max-logged-requests", "0"]``...)."""

    def __init__(self, args: Sequence[str] = (), *, port: int | None = None) -> None:
        self.args = list(args)
        super().__init__("sandbox", port=port)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.token = "sandbox-token-acme"
        self.stats: dict[str, int] | None = None

    def launch(self) -> ServerProcess:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        return ServerProcess(
            "bizmsg sandbox",
            [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(self.port), *self.args],
            log=self.dir / "sandbox.log", env=env)

    def wait_ready(self, process: ServerProcess) -> None:
        process.wait_for_line(_BANNER, timeout=60)

    def stop(self) -> dict[str, int] | None:
        """Stops it (SIGTERM) and returns the counts it printed, if it printed them."""
        if self.process is None:
            return self.stats
        self.process.stop(signal.SIGTERM)
        found = _STOPPED.search(self.process.tail(2000))
        if found is not None:
            names = ("requests", "sends", "accepted", "failed_commits", "replayed", "throttled")
            self.stats = {n: int(v.replace(",", "")) for n, v in zip(names, found.groups())}
        self.process = None
        return self.stats

    def check_running(self) -> None:
        if self.process is None or not self.process.alive():
            raise ServiceStartError("the sandbox process is not running")
