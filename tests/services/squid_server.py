"""Squid (Debian's 5.7) as a forward proxy on a free loopback port: plain HTTP requests are
forwarded (absolute-form, ``http://127.0.0.1:SANDBOX/...``) and ``CONNECT`` opens tunnels (to
nginx's TLS port). Only loopback clients, only loopback destinations: nothing it is asked can
leave the machine.

A minimal configuration in a temporary folder: no cache at all, its own pid file and logs, no
ICP/HTCP/SNMP ports, no pinger, DNS pointed at loopback (destinations are IP literals; nothing is
resolved). ``-N`` keeps it in the foreground as one process (no SMP kids, no daemon), so the PID
started is the one stopped. Started as root, Squid drops to its ``cache_effective_user``
(Debian's ``proxy``), which must own the folder; started as another user, it stays that user.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .processes import ServerProcess, chown_to, find_program, running_as_root
from .server import Server

_CONF = """\
http_port 127.0.0.1:{port}
pid_filename {dir}/squid.pid
cache_log {dir}/cache.log
access_log stdio:{dir}/access.log squid
cache_store_log none
coredump_dir {dir}
cache deny all
cache_mem 8 MB
memory_pools off
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
dns_nameservers 127.0.0.1
shutdown_lifetime 0 seconds
{user}
acl from_loopback src 127.0.0.0/8
acl to_loopback dst 127.0.0.0/8
{idle}
{auth}
http_access allow from_loopback to_loopback {authenticated}
http_access deny all
"""

_AUTH = """\
auth_param basic program {helper} {dir}/passwd
auth_param basic realm bizmsg-tests
acl authenticated proxy_auth REQUIRED
"""


class SquidServer(Server):
    """``proxy_url`` (``http://127.0.0.1:PORT``, for ``proxy=``; with the user and password
    when ``credentials`` are asked for), ``port``, ``dir``, :meth:`access_log` (Squid's native
    log lines).

    ``credentials=(user, password)``: Basic proxy authentication (Squid's ``basic_ncsa_auth``
    over an htpasswd file, its hash made by ``openssl passwd -apr1``); without them a request
    gets ``407``. ``client_idle``: how long Squid keeps an idle client connection
    (``client_idle_pconn_timeout``, default 2 minutes), for the keep-alive race."""

    def __init__(self, credentials: tuple[str, str] | None = None,
                 client_idle: str | None = None) -> None:
        self.program = find_program("squid", package="squid")
        super().__init__("squid")
        self.proxy_url = f"http://127.0.0.1:{self.port}"
        self._user = "proxy" if running_as_root() else None
        auth = ""
        if credentials is not None:
            user, password = credentials
            helper = Path(self.program).resolve().parent.parent / "lib" / "squid" / "basic_ncsa_auth"
            if not helper.exists():
                helper = Path("/usr/lib/squid/basic_ncsa_auth")
            openssl = find_program("openssl", package="openssl")
            hashed = subprocess.run([openssl, "passwd", "-apr1", password], capture_output=True,
                                    text=True, check=True, timeout=10).stdout.strip()
            (self.dir / "passwd").write_text(f"{user}:{hashed}\n")
            auth = _AUTH.format(helper=helper, dir=self.dir)
            self.proxy_url = f"http://{user}:{password}@127.0.0.1:{self.port}"
        (self.dir / "squid.conf").write_text(_CONF.format(
            port=self.port, dir=self.dir,
            user=f"cache_effective_user {self._user}" if self._user else "",
            idle=f"client_idle_pconn_timeout {client_idle}" if client_idle else "",
            auth=auth, authenticated="authenticated" if credentials else ""))
        if self._user is not None:
            chown_to(self.dir, self._user)

    def version(self) -> str:
        out = subprocess.run([self.program, "-v"], capture_output=True, text=True, timeout=10).stdout
        return out.splitlines()[0].removeprefix("Squid Cache: Version ").strip() if out else "?"

    def launch(self) -> ServerProcess:
        return ServerProcess(
            "squid", [self.program, "-N", "-f", str(self.dir / "squid.conf")],
            log=self.dir / "squid.out")

    def wait_ready(self, process: ServerProcess) -> None:
        process.wait_listening(self.port, extra_logs=[self.dir / "cache.log"])

    def access_log(self) -> list[str]:
        path = self.dir / "access.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []
