"""HAProxy (Debian's 2.6) in front of an upstream (a sandbox), with
``timeout http-keep-alive 500ms``: an idle client connection is closed after half a second, the
second keep-alive race. Plain HTTP by default; ``tls=TLSFiles`` terminates TLS
instead (HTTP/1.1 by ALPN). ``h2=True`` speaks HTTP/2 without TLS (h2c, by prior knowledge)
instead of HTTP/1.1, for the HTTP/2 transport. ``tcp=True`` relays bytes instead of HTTP: with
``tls``, TLS in front of a plain server, such as Squid, which then is an ``https://`` proxy.

Run in the foreground (``-db``), one process, stopped by its PID. HAProxy's own idle pool
toward the upstream is purged well under the sandbox's 60 s limit.
"""

from __future__ import annotations

import re
import subprocess

from .processes import ServerProcess, find_program
from .server import Server
from .tls import TLSFiles

_CONF = """\
global
  maxconn 4096
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive {keepalive}
  timeout http-request 10s
frontend front
  bind 127.0.0.1:{port}{ssl}
  default_backend sandbox
backend sandbox
  http-reuse safe
  server upstream {upstream} pool-purge-delay 5s
"""

_TCP_CONF = """\
global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend front
  bind 127.0.0.1:{port}{ssl}
  default_backend upstream
backend upstream
  server upstream {upstream}
"""


class HAProxyServer(Server):
    """``url`` (``http://``, or ``https://`` with ``tls``), ``port``, ``keepalive``, ``dir``;
    ``upstream`` is ``host:port``."""

    def __init__(self, upstream: str, *, keepalive: str = "500ms", tls: TLSFiles | None = None,
                 tcp: bool = False, h2: bool = False) -> None:
        self.program = find_program("haproxy", package="haproxy")
        self.upstream = upstream
        self.keepalive = keepalive
        self.tls = tls
        super().__init__("haproxy")
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.ca_path = tls.ca_path if tls else None
        ssl = f" ssl crt {tls.combined_path} alpn http/1.1" if tls else ""
        if h2:
            assert tls is None and not tcp, "h2=True is HTTP/2 without TLS"
            ssl = " proto h2"
        (self.dir / "haproxy.cfg").write_text((_TCP_CONF if tcp else _CONF).format(
            keepalive=keepalive, port=self.port, ssl=ssl, upstream=upstream))

    def version(self) -> str:
        out = subprocess.run([self.program, "-v"], capture_output=True, text=True, timeout=10).stdout
        found = re.search(r"version (\S+)", out)
        return found.group(1) if found else out.strip()

    # SIGUSR1 would wait for the sessions to end ("soft stop"); SIGTERM (the default) stops
    # at once.

    def launch(self) -> ServerProcess:
        return ServerProcess(
            "haproxy", [self.program, "-db", "-f", str(self.dir / "haproxy.cfg")],
            log=self.dir / "haproxy.log")

    def wait_ready(self, process: ServerProcess) -> None:
        process.wait_listening(self.port)
