"""nginx terminating TLS in front of an upstream (a sandbox), on two free loopback ports:

- ``url``: HTTPS with HTTP/1.1 only and a short ``keepalive_timeout`` (1 s by default): the
  keep-alive race happens here, where a client reuses a connection just as nginx
  closes it;
- ``h2_url``: HTTPS offering h2 by ALPN (and HTTP/1.1), ``keepalive_requests 50``: nginx sends a
  graceful GOAWAY after every 50th stream (nginx >= 1.19.7 took ``http2_max_requests``'s place
  with ``keepalive_requests``).

The certificate is the throwaway CA's (``ca_path``: pass it as ``verify=``). The access log
records, per request, the port the client came from, nginx's connection number and its request
count on that connection, the protocol, the status and the ``Idempotency-Key``: what tests read
to prove h2 was spoken or a connection was reused (:meth:`NginxServer.access_log`).

nginx runs in the foreground as one process (``daemon off``, ``master_process off``): the PID
started is the one serving, so a kill of pytest takes it along (a worker whose master is killed
would live on). It serves connections exactly as a worker would. nginx to the upstream keeps connections
alive for 20 s, under the sandbox's 60 s idle limit, so nginx itself never meets that race.
"""

from __future__ import annotations

import subprocess
from typing import Any

from .processes import ServerProcess, find_program, free_port
from .server import Server
from .tls import TLSFiles

_CONF = """\
daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 2048; }}
http {{
  log_format bizmsg '$remote_port $connection $connection_requests $server_port '
                    '$server_protocol $request_method $status "$http_idempotency_key"';
  access_log {dir}/access.log bizmsg;
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  ssl_certificate {cert};
  ssl_certificate_key {key};
  ssl_protocols TLSv1.2 TLSv1.3;
  upstream sandbox {{
    server {upstream};
    keepalive 32;
    keepalive_timeout 20s;
  }}
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_set_header Host $http_host;
  server {{
    listen 127.0.0.1:{port} ssl;
    keepalive_timeout {keepalive_timeout};
    keepalive_requests {keepalive_requests};
    location / {{ proxy_pass http://sandbox; }}
  }}
  server {{
    listen 127.0.0.1:{h2_port} ssl http2;
    keepalive_timeout {keepalive_timeout};
    keepalive_requests {h2_max_requests};
    location / {{ proxy_pass http://sandbox; }}
  }}
}}
"""


class NginxServer(Server):
    """``url`` (HTTP/1.1, short keep-alive), ``h2_url`` (h2, GOAWAY every ``h2_max_requests``),
    ``ca_path``, ``port``, ``h2_port``, ``dir``; ``upstream`` is ``host:port``."""

    def __init__(self, upstream: str, tls: TLSFiles, *, keepalive_timeout: str = "1s",
                 keepalive_requests: int = 1000, h2_max_requests: int = 50) -> None:
        self.program = find_program("nginx", package="nginx-light")
        self.upstream = upstream
        self.tls = tls
        self.ca_path = tls.ca_path
        self.keepalive_timeout = keepalive_timeout
        super().__init__("nginx")
        self.h2_port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.h2_url = f"https://127.0.0.1:{self.h2_port}"
        (self.dir / "tmp").mkdir()
        (self.dir / "nginx.conf").write_text(_CONF.format(
            dir=self.dir, cert=tls.cert_path, key=tls.key_path, upstream=upstream,
            port=self.port, h2_port=self.h2_port, keepalive_timeout=keepalive_timeout,
            keepalive_requests=keepalive_requests, h2_max_requests=h2_max_requests))

    def version(self) -> str:
        out = subprocess.run([self.program, "-v"], capture_output=True, text=True, timeout=10)
        return (out.stderr or out.stdout).strip().removeprefix("nginx version: ")

    # SIGTERM (the default): nginx's fast shutdown.

    def launch(self) -> ServerProcess:
        return ServerProcess(
            "nginx", [self.program, "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir),
                      # -e: not even the first message to the packaged /var/log/nginx.
                      "-e", str(self.dir / "error.log")],
            log=self.dir / "nginx.log")

    def wait_ready(self, process: ServerProcess) -> None:
        error_log = self.dir / "error.log"
        process.wait_listening(self.port, extra_logs=[error_log])
        process.wait_listening(self.h2_port, extra_logs=[error_log])

    def access_log(self) -> list[dict[str, Any]]:
        """One dict per request logged so far: ``client_port``, ``connection`` (nginx's serial
        number), ``connection_requests`` (1 for the first on its connection), ``server_port``,
        ``protocol`` (``HTTP/1.1``, ``HTTP/2.0``), ``method``, ``status``, ``idempotency_key``."""
        entries: list[dict[str, Any]] = []
        path = self.dir / "access.log"
        if not path.exists():
            return entries
        for line in path.read_text(errors="replace").splitlines():
            head, _, key = line.partition(' "')
            parts = head.split()
            if len(parts) != 7:
                continue
            entries.append({
                "client_port": int(parts[0]), "connection": int(parts[1]),
                "connection_requests": int(parts[2]), "server_port": int(parts[3]),
                "protocol": parts[4], "method": parts[5], "status": int(parts[6]),
                "idempotency_key": key.rstrip('"') if key.rstrip('"') != "-" else None,
            })
        return entries
