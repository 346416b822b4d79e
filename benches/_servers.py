"""The loopback server every client talks to: nginx answering fixed bodies (preferred: its cost
per request is small and constant), or the embedded sandbox run as a subprocess when nginx is
not installed.

The fixtures are real sandbox answers, so bizmsg decodes exactly what it decodes in production:
one 20-number page for `list`, and 100 pages of 1,000 numbers for `iter`, made from one sandbox
page whose phoneNumberIds are rewritten so that every page holds different numbers (the client
stops with PaginationError if a page starts with the item the previous page started with).

The optional scenarios' servers (Squid for `proxy`, Redis for `shared_limits`, PostgreSQL for
`journal`) are below :class:`Server`: each is started only when its scenario is selected.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _procs
from _shared import (
    BODY, ITER_PAGE_SIZE, ITER_PAGES, ITER_TOTAL, LIST_PAGE_SIZE, LIST_PATH, SEND_ANSWER,
    SEND_PATH, TOKEN,
)


class ServerError(RuntimeError):
    """The server could not be started or does not answer what the clients expect."""


def find_nginx() -> str | None:
    # /usr/sbin is not on every user's PATH.
    found = shutil.which("nginx")
    if found is None and os.access("/usr/sbin/nginx", os.X_OK):
        found = "/usr/sbin/nginx"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def write_fixtures(root: Path) -> dict[str, int]:
    """Writes pages/<pageSize>/<pageNo>.json under `root`; returns their sizes in bytes."""
    # Imported here, not at the top: only the nginx server needs it, and the orchestrator
    # otherwise never loads bizmsg's native runtime.
    from bizmsg.testing import Sandbox

    with Sandbox(accounts_per_tenant=20) as sandbox, sandbox.client(max_retries=0) as client:
        small = client.business_phone_numbers.list(page_size=LIST_PAGE_SIZE, raw=True)
    if len(small["data"]) != LIST_PAGE_SIZE or small["current"] != 1:
        raise ServerError(f"the sandbox gave an unexpected page: {compact(small)[:200]}")
    # 200 accounts of exactly 5 numbers: one page of 1,000 real numbers as the template.
    with Sandbox(accounts_per_tenant=200, numbers_per_account=(5, 5)) as sandbox, \
            sandbox.client(max_retries=0) as client:
        template = client.business_phone_numbers.list(page_size=ITER_PAGE_SIZE, raw=True)
    items: list[dict[str, Any]] = template["data"]
    if len(items) < ITER_PAGE_SIZE:
        raise ServerError(f"the sandbox listed {len(items)} numbers, {ITER_PAGE_SIZE} needed")

    (root / "pages" / str(LIST_PAGE_SIZE)).mkdir(parents=True)
    (root / "pages" / str(ITER_PAGE_SIZE)).mkdir(parents=True)
    sizes = {"list_page": _write(root / "pages" / str(LIST_PAGE_SIZE) / "1.json", compact(small))}
    total_bytes = 0
    for page_no in range(1, ITER_PAGES + 1):
        data = copy.deepcopy(items[:ITER_PAGE_SIZE])
        for index, item in enumerate(data):
            # 15 digits like the real ids, unique across all 100,000 numbers.
            item["phoneNumberId"] = str(100_000_000_000_000 + (page_no - 1) * ITER_PAGE_SIZE + index)
        page = {"data": data, "total": ITER_TOTAL, "size": ITER_PAGE_SIZE, "current": page_no,
                "pages": ITER_PAGES}
        total_bytes += _write(root / "pages" / str(ITER_PAGE_SIZE) / f"{page_no}.json", compact(page))
    sizes["iter_page"] = total_bytes // ITER_PAGES
    return sizes


def _write(path: Path, text: str) -> int:
    data = text.encode()
    path.write_bytes(data)
    return len(data)


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60;
  sendfile on;
  # The fixtures never change: keep them open instead of open()ing per request.
  open_file_cache max=256 inactive=600s;
  open_file_cache_valid 600s;
  types {{ application/json json; }}
  default_type application/json;
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  server {{
    listen 127.0.0.1:{port};
    root {dir};
    location = {send_path} {{ return 200 '{send_answer}'; }}
    # pageSize and pageNo select the file, so an unexpected request is a 404, never a wrong page.
    location = {list_path} {{ try_files /pages/$arg_pageSize/$arg_pageNo.json =404; }}
  }}
}}
"""


class Server:
    """A running server: `kind` is "nginx" or "sandbox"; `note` says what it serves."""

    def __init__(self, kind: str, pinning: _procs.Pinning, nginx: str | None = None) -> None:
        self.kind = kind
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="bizmsg-bench-"))
        # nginx's worker runs as "nobody" when started as root: it must be able to read here.
        self.dir.chmod(0o755)
        self.fixture_sizes: dict[str, int] = {}
        self._log = self.dir / "server.log"
        self._workers: list[int] = []
        self.process: subprocess.Popen[Any] | None = None
        try:
            if kind == "nginx":
                if nginx is None:
                    raise ServerError("nginx is not installed (run benches/setup.sh)")
                if not os.access(nginx, os.X_OK):
                    raise ServerError(f"{nginx} is not an executable file")
                self.note = "nginx serving fixed JSON bodies"
                self._start_nginx(nginx, pinning)
            else:
                self.note = ("FALLBACK: the embedded sandbox (`python -m bizmsg sandbox`), not nginx: "
                             "it does real work per request, so every client looks slower and "
                             "the ratios are compressed; iter 100k is not available")
                self._start_sandbox(pinning)
            self._wait_listening()
            self.check()
        except BaseException:
            self.close()
            raise

    def _start_nginx(self, nginx: str, pinning: _procs.Pinning) -> None:
        self.fixture_sizes = write_fixtures(self.dir)
        for path in self.dir.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        (self.dir / "tmp").mkdir()
        conf = self.dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(
            dir=self.dir, port=self.port, send_path=SEND_PATH, send_answer=SEND_ANSWER,
            list_path=LIST_PATH))
        with open(self._log, "wb") as log:
            self.process = _procs.spawn(
                [*pinning.prefix("server"), nginx, "-c", str(conf), "-p", str(self.dir)],
                stdout=log, stderr=subprocess.STDOUT)

    def _start_sandbox(self, pinning: _procs.Pinning) -> None:
        with open(self._log, "wb") as log:
            self.process = _procs.spawn(
                [*pinning.prefix("server"), sys.executable, "-m", "bizmsg", "sandbox",
                 "--port", str(self.port), "--accounts", "20"],
                stdout=log, stderr=subprocess.STDOUT)

    def _wait_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"{self.kind} exited with status {self.process.returncode} "
                                  f"at start:\n{self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise ServerError(f"{self.kind} did not listen on port {self.port} within 30 s:\n"
                              f"{self._tail()}")
        if self.kind == "nginx":
            self._workers = _procs.children_of(self.process.pid)

    def _tail(self) -> str:
        text = ""
        for log in (self._log, self.dir / "error.log"):
            if log.exists():
                text += log.read_text(errors="replace")[-2000:]
        return text.strip() or "(no output)"

    def get(self, path: str) -> dict[str, Any]:
        request = urllib.request.Request(self.base_url + path,
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)  # type: ignore[no-any-return]

    def check(self) -> None:
        """Asks what the clients will ask, once, and checks the answers."""
        try:
            request = urllib.request.Request(
                self.base_url + SEND_PATH, data=json.dumps(BODY).encode(),
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                sent = json.load(response)
            if sent.get("code") != "0":
                raise ServerError(f"send answered {sent}")
            page = self.get(f"{LIST_PATH}?pageNo=1&pageSize={LIST_PAGE_SIZE}")
            if page["current"] != 1 or len(page["data"]) != LIST_PAGE_SIZE:
                raise ServerError(f"the list page is wrong: {compact(page)[:200]}")
            if self.kind == "nginx":
                for page_no in (1, ITER_PAGES):
                    page = self.get(f"{LIST_PATH}?pageNo={page_no}&pageSize={ITER_PAGE_SIZE}")
                    if page["current"] != page_no or len(page["data"]) != ITER_PAGE_SIZE:
                        raise ServerError(f"iter page {page_no} is wrong")
        except ServerError:
            raise
        except Exception as error:  # urllib's and json's many errors: all mean "not usable"
            raise ServerError(f"{self.kind} does not answer as expected: {error!r}\n"
                              f"{self._tail()}") from error

    def version(self) -> str | None:
        if self.kind != "nginx":
            return None
        return nginx_version(find_nginx())

    def close(self) -> None:
        if self.process is not None:
            # SIGTERM: nginx's fast shutdown (the master ends its workers); the sandbox CLI
            # stops on SIGTERM too.
            _procs.stop(self.process, signal.SIGTERM)
            if self.kind == "nginx":
                _procs.kill_leftovers(self._workers, "nginx")
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


def nginx_version(nginx: str | None) -> str | None:
    if nginx is None:
        return None
    try:
        out = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return (out.stderr or out.stdout).strip().removeprefix("nginx version: ") or None


# --- The servers of the optional scenarios (proxy, shared_limits, journal) ----------------------
#
# Each is started only when a scenario that needs it is selected, on a free loopback port, in a
# temporary directory, pinned to the server CPU beside nginx (CPU 0 stays the client's alone),
# and stopped by its PID. One that is not installed makes the rows that need it "unavailable"
# instead of failing the run.


class ServiceMissing(Exception):
    """A server an optional scenario needs is not installed (the message says how to get it)."""


def find_program(name: str, package: str, dirs: Sequence[str] = ("/usr/sbin", "/usr/bin")) -> str:
    # /usr/sbin (squid) is not on every user's PATH.
    found = shutil.which(name)
    for folder in dirs:
        if found is not None:
            break
        if os.access(os.path.join(folder, name), os.X_OK):
            found = os.path.join(folder, name)
    if found is None:
        raise ServiceMissing(f"{name} is not installed (apt-get install {package})")
    return found


def running_as_root() -> bool:
    return os.geteuid() == 0


def as_user(user: str | None) -> list[str]:
    """What goes in front of a command to run it as `user` when this run is root's (PostgreSQL
    refuses root). setpriv execs the command, so the PID started is the server's own."""
    if user is None or not running_as_root():
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise ServiceMissing(f"setpriv is needed to run a server as {user} (apt-get install "
                             "util-linux)")
    return [setpriv, "--reuid", user, "--regid", user, "--init-groups", "--"]


def chown_tree(path: Path, user: str) -> None:
    """Gives `path` to `user` (as root): a server that runs as that user writes there."""
    import pwd

    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


def filesystem_of(path: Path) -> str:
    """The type of the filesystem `path` is on (ext4, tmpfs, overlay...): an fsync's cost, and
    so a journal's, depends on it."""
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1]
                inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


class _Service:
    """One server process of an optional scenario: its port, directory and log, how it is
    started (pinned to the server CPU) and how it is stopped (by its PID, then whatever it had
    started, such as PostgreSQL's backends, by their PIDs)."""

    name = "service"
    # The signal of the server's own quick, clean shutdown.
    stop_signal = signal.SIGTERM

    def __init__(self, pinning: _procs.Pinning) -> None:
        self.pinning = pinning
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"bizmsg-bench-{self.name}-"))
        self.log = self.dir / f"{self.name}.out"
        self.process: subprocess.Popen[Any] | None = None
        self.version: str | None = None
        self.note = ""

    def _spawn(self, argv: Sequence[str], user: str | None = None) -> None:
        with open(self.log, "ab") as log:
            self.process = _procs.spawn(
                [*self.pinning.prefix("server"), *as_user(user), *argv],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def _wait(self, ready: Callable[[], bool], what: str, seconds: float = 60.0,
              logs: Sequence[Path] = ()) -> None:
        assert self.process is not None
        deadline = time.monotonic() + seconds
        while not ready():
            if self.process.poll() is not None:
                raise ServerError(f"{self.name} exited with status {self.process.returncode} "
                                  f"at start:\n{self.tail(*logs)}")
            if time.monotonic() > deadline:
                raise ServerError(f"{self.name} did not {what} within {seconds:.0f} s:\n"
                                  f"{self.tail(*logs)}")
            time.sleep(0.05)

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def _logged(self, text: str) -> Callable[[], bool]:
        def ready() -> bool:
            return self.log.exists() and text in self.log.read_text(errors="replace")
        return ready

    def tail(self, *logs: Path) -> str:
        text = ""
        for path in (self.log, *logs):
            if path.exists():
                text += path.read_text(errors="replace")[-2000:]
        return text.strip() or "(no output)"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self) -> None:
        if self.process is not None:
            # Its children (PostgreSQL's backends and helpers) are read before it is told to
            # stop: once it has exited they are no longer listed under it.
            children = _procs.children_of(self.process.pid)
            _procs.stop(self.process, self.stop_signal, grace=20)
            _procs.kill_leftovers(children, self.name)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


SQUID_CONF = """\
http_port 127.0.0.1:{port}
pid_filename {dir}/squid.pid
cache_log {dir}/cache.log
# One short line per forwarded request: run.py counts them to show that a client's requests
# really went through the proxy.
logformat bench %>Hs %rm %ru
access_log stdio:{dir}/access.log bench
cache_store_log none
coredump_dir {dir}
# A forward proxy that forwards everything: nothing is cached, every send reaches nginx.
cache deny all
cache_mem 8 MB
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
# The destinations are IP literals: nothing is resolved.
dns_nameservers 127.0.0.1
shutdown_lifetime 0 seconds
{user}
acl to_loopback dst 127.0.0.0/8
http_access allow localhost to_loopback
http_access deny all
"""


class Squid(_Service):
    """Squid as a forward proxy for the `proxy` scenario: `proxy_url` is what the clients get.

    `-N` keeps it in the foreground as one process (no daemon, no SMP kids), so the PID started
    is the one stopped. Started as root it drops to Debian's `proxy` user, which must own the
    directory."""

    name = "squid"

    def __init__(self, pinning: _procs.Pinning) -> None:
        program = find_program("squid", "squid")
        super().__init__(pinning)
        try:
            self.proxy_url = f"http://127.0.0.1:{self.port}"
            self.access_log = self.dir / "access.log"
            user = "proxy" if running_as_root() else None
            conf = self.dir / "squid.conf"
            conf.write_text(SQUID_CONF.format(
                port=self.port, dir=self.dir,
                user=f"cache_effective_user {user}" if user else ""))
            if user is not None:
                chown_tree(self.dir, user)
            self.version = _first_line([program, "-v"]).removeprefix("Squid Cache: Version ")
            self._spawn([program, "-N", "-f", str(conf)])
            self._wait(self._listening, "listen", logs=[self.dir / "cache.log"])
            self.note = (f"Squid {self.version} on {self.proxy_url}, pinned with the server, no "
                         "cache, one access-log line per request")
        except BaseException:
            self.close()
            raise

    def requests_forwarded(self, path: str = SEND_PATH) -> int:
        """Requests for `path` that Squid forwarded with a 200 so far (its access log's lines)."""
        if not self.access_log.exists():
            return 0
        with open(self.access_log, "rb") as log:
            return sum(1 for line in log if line.startswith(b"200 ") and path.encode() in line)


class Redis(_Service):
    """redis-server for the `shared_limits` scenario, without persistence: `url` for
    `shared_limits=`."""

    name = "redis-server"

    def __init__(self, pinning: _procs.Pinning) -> None:
        program = find_program("redis-server", "redis-server")
        super().__init__(pinning)
        try:
            self.url = f"redis://127.0.0.1:{self.port}/0"
            self.version = _first_line([program, "--version"]).split(" v=")[-1].split()[0]
            # Everything on the command line: no configuration file to write. Logs to stdout.
            self._spawn([program, "--bind", "127.0.0.1", "--port", str(self.port),
                         "--dir", str(self.dir), "--save", "", "--appendonly", "no",
                         "--daemonize", "no", "--protected-mode", "yes", "--logfile", ""])
            self._wait(self._logged("Ready to accept connections"), "become ready")
            self.note = (f"Redis {self.version} on {self.url}, pinned with the server, no "
                         "persistence")
        except BaseException:
            self.close()
            raise

    def commands_processed(self) -> int:
        """Redis's count of the commands it has run (INFO stats), this question included."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as conn:
            conn.sendall(b"INFO stats\r\n")
            answer = b""
            # A bulk string: "$<length>\r\n<text>\r\n".
            while b"\r\n" not in answer or len(answer) < answer.index(b"\r\n") + 2 + \
                    int(answer[1:answer.index(b"\r\n")]):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                answer += chunk
        for line in answer.decode(errors="replace").splitlines():
            if line.startswith("total_commands_processed:"):
                return int(line.split(":", 1)[1])
        raise ServerError(f"no total_commands_processed in Redis's INFO: {answer[:200]!r}")


def find_postgres_bin() -> str:
    """PostgreSQL 15's binaries, else the newest installed."""
    candidates = ["/usr/lib/postgresql/15/bin"] + sorted(
        (str(p) for p in Path("/usr/lib/postgresql").glob("*/bin")),
        key=lambda p: int("".join(c for c in p.split("/")[-2] if c.isdigit()) or 0), reverse=True)
    for folder in candidates:
        if all(os.access(os.path.join(folder, n), os.X_OK) for n in ("initdb", "postgres", "psql")):
            return folder
    raise ServiceMissing("PostgreSQL is not installed (no /usr/lib/postgresql/15/bin: apt-get "
                         "install postgresql-15)")


class Postgres(_Service):
    """PostgreSQL for the `journal` scenario: a fresh cluster in a temporary directory, trust
    authentication on 127.0.0.1, a database `bench`; `url` for `journal=`.

    Its settings are the defaults (fsync and synchronous_commit on): a journal's commit costs
    what it costs on a stock server. `postgres` itself is the process started (no pg_ctl), so
    its PID is the one stopped; run as the `postgres` user when this run is root's."""

    name = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown; SIGTERM would wait for every session to end
    DATABASE = "bench"

    def __init__(self, pinning: _procs.Pinning) -> None:
        self.bin = find_postgres_bin()
        self.os_user = "postgres" if running_as_root() else None
        if self.os_user is not None:
            import pwd

            try:
                pwd.getpwnam(self.os_user)
            except KeyError:
                raise ServiceMissing("running as root and there is no 'postgres' user to run "
                                     "PostgreSQL as (apt-get install postgresql-15)") from None
        as_user(self.os_user)  # ServiceMissing now if setpriv is missing
        super().__init__(pinning)
        try:
            self.data = self.dir / "data"
            self.socket_dir = self.dir / "sock"
            self.socket_dir.mkdir()
            if self.os_user is not None:
                chown_tree(self.dir, self.os_user)
            # --no-sync: only initdb's own files are not flushed; the server below runs with
            # fsync on, as PostgreSQL's default is.
            self._run([os.path.join(self.bin, "initdb"), "-D", str(self.data), "-U", "postgres",
                       "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"], "initdb")
            self._spawn([os.path.join(self.bin, "postgres"), "-D", str(self.data),
                         "-p", str(self.port), "-k", str(self.socket_dir),
                         "-c", "listen_addresses=127.0.0.1", "-c", "logging_collector=off"],
                        user=self.os_user)
            self._wait(self._logged("database system is ready to accept connections"),
                       "become ready")
            self.query(f"CREATE DATABASE {self.DATABASE}", database="postgres")
            self.version = self.query("SHOW server_version").split()[0]
            fsync = self.query("SHOW fsync")
            commit = self.query("SHOW synchronous_commit")
            # Plain TCP (sslmode=disable): a loopback server has no TLS to offer anyway.
            self.url = (f"postgresql://postgres@127.0.0.1:{self.port}/{self.DATABASE}"
                        "?sslmode=disable")
            self.note = (f"PostgreSQL {self.version} on 127.0.0.1:{self.port}, pinned with the "
                         f"server, default settings: fsync={fsync}, synchronous_commit={commit}, "
                         f"data on {filesystem_of(self.dir)}")
        except BaseException:
            self.close()
            raise

    def _run(self, argv: Sequence[str], what: str) -> str:
        """A short command (initdb, psql) run to its end as the server's user."""
        try:
            done = subprocess.run([*as_user(self.os_user), *argv], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired as error:
            raise ServerError(f"{what} did not finish within 120 s") from error
        if done.returncode != 0:
            raise ServerError(f"{what} failed with status {done.returncode}:\n"
                              f"{(done.stdout + done.stderr).strip()[-2000:]}")
        return done.stdout

    def commits(self) -> int:
        """Transactions committed in the benchmark's database so far. The statistics a
        backend keeps are flushed when its session ends (a campaign's journal session has ended
        by the time this is asked) or within a second: the wait makes sure."""
        time.sleep(1.1)
        return int(self.query("SELECT xact_commit FROM pg_stat_database "
                              f"WHERE datname = '{self.DATABASE}'"))

    def query(self, sql: str, database: str | None = None) -> str:
        """`sql` through psql over the unix socket; its output (unaligned, tuples only)."""
        return self._run([os.path.join(self.bin, "psql"), "-h", str(self.socket_dir),
                          "-p", str(self.port), "-U", "postgres", "-d", database or self.DATABASE,
                          "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         "psql").strip()


def _first_line(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)
    except OSError:
        return "?"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0].strip() if lines else "?"


# Which server each optional scenario's client needs, by the name in _shared.NEEDS.
SERVICE_CLASSES: dict[str, Callable[[_procs.Pinning], _Service]] = {
    "squid": Squid, "redis": Redis, "postgres": Postgres}


class Services:
    """The servers the selected optional scenarios need, started together before the first
    round. A server that is not installed is in `missing` (its rows: "unavailable: why"); one
    that is installed but did not start is in `failed` (its rows fail, and the run says so)."""

    def __init__(self, names: set[str], pinning: _procs.Pinning) -> None:
        self.running: dict[str, _Service] = {}
        self.missing: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        try:
            for name in sorted(names):
                try:
                    self.running[name] = SERVICE_CLASSES[name](pinning)
                except ServiceMissing as why:
                    self.missing[name] = str(why)
                except ServerError as why:
                    self.failed[name] = f"{name} did not start: {why}"
        except BaseException:
            self.close()
            raise

    def dead(self) -> list[str]:
        return [name for name, service in self.running.items() if not service.alive()]

    def close(self) -> None:
        for service in self.running.values():
            service.close()
