"""Redis (>= 7, Debian's ``redis-server``) on a free loopback port in a temporary folder.

Everything is in a config file in that folder (mode 0600), not on the command line, so the
password is not in ``ps`` output either. By default nothing is persisted (``save ""``,
``appendonly no``): a :meth:`RedisServer.kill` then loses every key, as a Redis without
persistence does. ``durable=True`` writes every command to the append-only file before
answering it (``appendfsync always``), so a kill -9 and :meth:`RedisServer.restart` keep the data:
the fault tests choose which of the two worlds they test.

``maxmemory_policy="allkeys-lru"`` gives it a memory limit and that eviction policy, as a shared
cache has.

``tls=TLSFiles`` serves TLS only (``tls-port``, ``port 0``): its URL is ``rediss://`` and a client
trusts ``tls.ca_path``.
"""

from __future__ import annotations

import re
import secrets
import subprocess

from .processes import ServerProcess, ServiceStartError, find_program
from .server import Server
from .tls import TLSFiles


class RedisServer(Server):
    """``url`` (``redis://:PASSWORD@127.0.0.1:PORT/0``, or ``rediss://``), ``url_without_password``,
    ``password`` (``None`` with ``password=False``), ``port``, ``dir``, ``tls``."""

    def __init__(self, *, password: bool = True, durable: bool = False,
                 tls: TLSFiles | None = None, maxmemory_policy: str | None = None) -> None:
        self.program = find_program("redis-server", package="redis-server")
        super().__init__("redis")
        self.password = f"pw-{secrets.token_hex(12)}" if password else None
        self.durable = durable
        self.tls = tls
        self.maxmemory_policy = maxmemory_policy
        scheme = "rediss" if tls is not None else "redis"
        self.url_without_password = f"{scheme}://127.0.0.1:{self.port}/0"
        auth = f":{self.password}@" if self.password is not None else ""
        self.url = f"{scheme}://{auth}127.0.0.1:{self.port}/0"
        self._write_config()

    def version(self) -> tuple[int, int, int]:
        out = subprocess.run([self.program, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
        found = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
        if found is None:
            raise ServiceStartError(f"cannot read redis-server's version from {out!r}")
        major, minor, patch = (int(g) for g in found.groups())
        return major, minor, patch

    def _write_config(self) -> None:
        lines = [
            "bind 127.0.0.1",
            "protected-mode yes",
            "daemonize no",
            f"dir {self.dir}",
            'logfile ""',
            "loglevel notice",
            'save ""',
            "databases 16",
        ]
        if self.maxmemory_policy is not None:
            # A memory limit and a policy, as a shared cache has.
            lines += ["maxmemory 64mb", f"maxmemory-policy {self.maxmemory_policy}"]
        if self.durable:
            lines += ["appendonly yes", "appendfsync always"]
        else:
            lines += ["appendonly no"]
        if self.tls is not None:
            lines += [
                "port 0",
                f"tls-port {self.port}",
                f"tls-cert-file {self.tls.cert_path}",
                f"tls-key-file {self.tls.key_path}",
                f"tls-ca-cert-file {self.tls.ca_path}",
                "tls-auth-clients no",
            ]
        else:
            lines += [f"port {self.port}"]
        if self.password is not None:
            lines += [f"requirepass {self.password}"]
        conf = self.dir / "redis.conf"
        conf.write_text("\n".join(lines) + "\n")
        conf.chmod(0o600)

    def launch(self) -> ServerProcess:
        major = self.version()[0]
        if major < 7:
            raise ServiceStartError(f"redis-server {major}.x is too old: 7 or later is needed")
        return ServerProcess("redis-server", [self.program, str(self.dir / "redis.conf")],
                             log=self.dir / "redis.log")

    def wait_ready(self, process: ServerProcess) -> None:
        # "Ready to accept connections" comes after the data is loaded (the AOF replayed).
        process.wait_for_line(r"Ready to accept connections", timeout=30)

    # (SIGTERM, Redis's own shutdown, stops it; SIGKILL, as a crash, loses the data unless
    # ``durable``.)

    def __repr__(self) -> str:
        # Never the password: reprs end up in assertion messages and logs.
        return f"RedisServer({self.url_without_password}, durable={self.durable})"
