"""The real-server fixtures work: each server is started, really answers (through bizmsg where it
stands between bizmsg and the service), and behaves as configured (passwords, persistence,
kill -9 and restart, keep-alive timeouts, h2 and its GOAWAYs, proxying). Also the rules around
them: a missing server skips or fails, and a Ctrl-C of pytest leaves no server behind.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from services.availability import require_module, skip_or_fail
from services.celery_worker import CeleryWorker
from services.haproxy_server import HAProxyServer
from services.nginx_server import NginxServer
from services.postgres_server import PostgresServer
from services.redis_server import RedisServer
from services.sandbox_server import SandboxProcess
from services.squid_server import SquidServer
from services.tls import TLSFiles

TEMPLATE = bizmsg.Template(name="order_update", parameters=["A-1"], language="en_US")
TESTS_DIR = Path(__file__).resolve().parent.parent


def first_sender(client: bizmsg.Client) -> str:
    number = client.business_phone_numbers.list().data[0]
    assert number.status == "CONNECTED"
    return bizmsg_digits(number.display_phone_number or "")


def bizmsg_digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped by init counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] in (b"Z", b"X")


def wait_until_closed(sock: socket.socket, limit: float = 10.0) -> bool:
    """Reads until the server closes the connection (EOF or reset); False if it is still open
    after ``limit`` seconds."""
    sock.settimeout(limit)
    try:
        while sock.recv(4096):
            pass
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False
    return True


def eventually(check: Callable[[], bool], limit: float = 10.0) -> bool:
    """Whether ``check()`` becomes true within ``limit`` seconds. For logs: nginx writes its
    access log line just after the answer's last byte, and Squid logs a tunnel when it closes,
    so a client may be done before the line is there."""
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def read_answer(sock: socket.socket) -> bytes:
    """One HTTP/1.1 answer with a Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return head


def get_request(port: int, token: str) -> bytes:
    return (f"GET /v1/chat/businessAccounts HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n").encode()


# -- the rule for missing servers ------------------------------------------------------------


def test_a_missing_server_skips_without_the_ci_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIZMSG_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install x"):
        skip_or_fail("x is not installed: apt-get install x, or run .ci/run")


def test_a_missing_server_fails_under_the_ci_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIZMSG_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="BIZMSG_REQUIRE_SERVICES=1"):
        skip_or_fail("x is not installed: apt-get install x, or run .ci/run")


# -- Redis -----------------------------------------------------------------------------------


def test_redis_needs_its_password_and_loses_its_data_when_killed(redis_server: RedisServer) -> None:
    redis = require_module("redis", pip="redis")
    assert redis_server.password is not None
    assert redis_server.password not in repr(redis_server)
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(redis_server.url_without_password).ping()
    client = redis.Redis.from_url(redis_server.url)
    assert client.ping()
    major = int(client.info("server")["redis_version"].split(".")[0])
    assert major >= 7
    client.set("campaign", "c-1")
    pid = redis_server.process.pid if redis_server.process else 0

    redis_server.restart()

    assert gone(pid)
    # Same port, same URL; nothing persisted (save "", appendonly no): the key is gone.
    client = redis.Redis.from_url(redis_server.url)
    assert client.ping()
    assert client.get("campaign") is None


def test_durable_redis_keeps_its_data_across_kill_9(
        start_redis: Callable[..., RedisServer]) -> None:
    redis = require_module("redis", pip="redis")
    server = start_redis(durable=True)
    client = redis.Redis.from_url(server.url)
    client.set("campaign", "c-1")
    client.incrby("sent", 41)
    client.incr("sent")

    server.restart()

    client = redis.Redis.from_url(server.url)
    assert client.get("campaign") == b"c-1"
    assert client.get("sent") == b"42"


def test_redis_over_tls(redis_tls_server: RedisServer, tls_files: TLSFiles) -> None:
    redis = require_module("redis", pip="redis")
    assert redis_tls_server.url.startswith("rediss://")
    client = redis.Redis.from_url(redis_tls_server.url, ssl_ca_certs=str(tls_files.ca_path))
    assert client.ping()
    assert client.config_get("port")["port"] == "0"  # plain TCP is off: TLS only
    # Without the CA the server's certificate is not trusted: TLS is really spoken.
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(redis_tls_server.url, ssl_ca_certs=None,
                             ssl_cert_reqs="required").ping()


# -- PostgreSQL ------------------------------------------------------------------------------


def test_postgres_query_kill_9_and_restart(postgres_server: PostgresServer) -> None:
    psycopg = require_module("psycopg", pip="psycopg[binary]")
    assert postgres_server.password not in repr(postgres_server)
    with psycopg.connect(postgres_server.url, connect_timeout=10) as conn:
        version = conn.execute("show server_version_num").fetchone()[0]
        assert int(version) >= 150000
        conn.execute("create table journal (message text primary key, state text)")
        conn.execute("insert into journal values ('m-1', 'dispatched')")
        conn.commit()
    wrong = postgres_server.url.replace(postgres_server.password, "wrong-password")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(wrong, connect_timeout=10).close()

    holder = psycopg.connect(postgres_server.url, connect_timeout=10)
    pid = postgres_server.process.pid if postgres_server.process else 0
    postgres_server.kill()
    assert gone(pid)
    with pytest.raises(psycopg.OperationalError):
        holder.execute("select 1")
    holder.close()

    postgres_server.restart()

    with psycopg.connect(postgres_server.url, connect_timeout=10) as conn:
        rows = conn.execute("select message, state from journal").fetchall()
    assert rows == [("m-1", "dispatched")]
    assert postgres_server.psql("select count(*) from journal") == "1"


# -- the standalone sandbox ------------------------------------------------------------------


def test_sandbox_process_serves_and_reports_its_counts(sandbox_process: SandboxProcess) -> None:
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url) as client:
        sender = first_sender(client)
        result = client.messages.send(to="8613900000001", from_=sender, template=TEMPLATE)
    assert result.ok
    stats = sandbox_process.stop()
    assert stats is not None
    assert stats["accepted"] == 1
    assert stats["requests"] == 2


# -- nginx -----------------------------------------------------------------------------------


def test_nginx_serves_tls_with_its_own_ca(nginx_server: NginxServer,
                                         sandbox_process: SandboxProcess) -> None:
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url,
                       verify=str(nginx_server.ca_path)) as client:
        sender = first_sender(client)
        result = client.messages.send(to="8613900000002", from_=sender, template=TEMPLATE,
                                      idempotency_key="through-nginx-1")
    assert result.ok
    def sends() -> list[tuple[str, int, str | None]]:
        return [(e["protocol"], e["status"], e["idempotency_key"])
                for e in nginx_server.access_log() if e["method"] == "POST"]

    assert eventually(lambda: len(sends()) == 1)
    assert sends() == [("HTTP/1.1", 200, "through-nginx-1")]
    # The platform's trust store does not know the throwaway CA: the certificate is checked.
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url, max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError):
            client.business_phone_numbers.list()


def test_nginx_closes_an_idle_connection_after_its_keepalive_timeout(
        nginx_server: NginxServer, sandbox_process: SandboxProcess) -> None:
    context = ssl.create_default_context(cafile=str(nginx_server.ca_path))
    with socket.create_connection(("127.0.0.1", nginx_server.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(get_request(nginx_server.port, sandbox_process.token))
            assert read_answer(sock).startswith(b"HTTP/1.1 200")
            assert wait_until_closed(sock), "nginx kept an idle connection open for 10 s"


def test_nginx_h2_through_the_http2_transport_with_goaway_every_50(
        nginx_server: NginxServer, sandbox_process: SandboxProcess,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIZMSG_TRANSPORT", "http2")
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.h2_url,
                       verify=str(nginx_server.ca_path)) as client:
        assert client._native.transport == "http2"
        for _ in range(110):
            assert len(client.business_phone_numbers.list(page_size=2).data) == 2
        sender = first_sender(client)
        assert client.messages.send(to="8613900000003", from_=sender, template=TEMPLATE).ok
    def entries() -> list[dict[str, Any]]:
        return [e for e in nginx_server.access_log() if e["server_port"] == nginx_server.h2_port]

    assert eventually(lambda: len(entries()) == 112), len(entries())
    entries_ = entries()
    assert {e["protocol"] for e in entries_} == {"HTTP/2.0"}
    # ALPN chose h2, and nginx ended each connection after 50 streams (GOAWAY): 50, 50, 12.
    per_connection = Counter(e["connection"] for e in entries_)
    assert sorted(per_connection.values(), reverse=True) == [50, 50, 12]


# -- HAProxy ---------------------------------------------------------------------------------


def test_haproxy_forwards_and_closes_idle_connections(
        haproxy_server: HAProxyServer, sandbox_process: SandboxProcess) -> None:
    with bizmsg.Client(sandbox_process.token, base_url=haproxy_server.url) as client:
        sender = first_sender(client)
        assert client.messages.send(to="8613900000004", from_=sender, template=TEMPLATE).ok
    with socket.create_connection(("127.0.0.1", haproxy_server.port), timeout=10) as sock:
        sock.sendall(get_request(haproxy_server.port, sandbox_process.token))
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        assert wait_until_closed(sock), "HAProxy kept an idle connection open for 10 s"
    stats = sandbox_process.stop()
    assert stats is not None and stats["accepted"] == 1 and stats["requests"] == 3


# -- Squid -----------------------------------------------------------------------------------


def test_squid_forwards_plain_http_and_tunnels_tls(
        squid_server: SquidServer, nginx_server: NginxServer,
        sandbox_process: SandboxProcess) -> None:
    """The HTTP/1.1 transport speaks to an http:// proxy itself: absolute-form requests for an
    http:// service, CONNECT tunnels for an https:// one."""
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url,
                       proxy=squid_server.proxy_url) as client:
        assert client._native.transport == "http1"
        sender = first_sender(client)
        assert client.messages.send(to="8613900000005", from_=sender, template=TEMPLATE).ok
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url,
                       verify=str(nginx_server.ca_path), proxy=squid_server.proxy_url) as client:
        assert client.messages.send(to="8613900000006", from_=sender, template=TEMPLATE,
                                    idempotency_key="through-squid-1").ok
    # The TLS send went through nginx (a CONNECT tunnel; Squid cannot see inside it)...
    assert eventually(lambda: any(e["method"] == "POST" for e in nginx_server.access_log()))
    assert [e["idempotency_key"] for e in nginx_server.access_log() if e["method"] == "POST"] == [
        "through-squid-1"]
    # ...and Squid logged both: the plain POST it forwarded and the tunnel.
    assert eventually(lambda: any("POST " in line for line in squid_server.access_log())
                      and any("CONNECT " in line for line in squid_server.access_log()))
    log = squid_server.access_log()
    assert any(f"POST {sandbox_process.base_url}/v1/chat/messages/send" in line for line in log), log
    assert any(f"TCP_TUNNEL/200" in line and f"CONNECT 127.0.0.1:{nginx_server.port}" in line
               for line in log), log
    stats = sandbox_process.stop()
    assert stats is not None and stats["accepted"] == 2


def test_the_http2_transport_tunnels_through_squid_and_refuses_plain_http_behind_it(
        start_squid: Callable[..., SquidServer], nginx_server: NginxServer,
        sandbox_process: SandboxProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """``BIZMSG_TRANSPORT=http2`` (reqwest, HTTP/2 only) reaches an https:// service through
    an HTTP proxy's CONNECT tunnel (Squid with Basic credentials), h2 by ALPN inside it; without
    the credentials the tunnel is refused before anything is sent. A plain http:// service
    behind a proxy is refused when the client is made: an HTTP proxy forwards HTTP/1.1, which
    this transport does not speak. The password is never shown."""
    monkeypatch.setenv("BIZMSG_TRANSPORT", "http2")
    squid = start_squid(credentials=("bizmsg", "pr0xy-s3cret"))
    anonymous = squid.proxy_url.replace("bizmsg:pr0xy-s3cret@", "")
    with pytest.raises(bizmsg.ConfigurationError, match="HTTP/2 only") as refused:
        bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url,
                      proxy=squid.proxy_url)
    assert "pr0xy-s3cret" not in str(refused.value)
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.h2_url,
                       verify=str(nginx_server.ca_path), proxy=squid.proxy_url) as client:
        assert client._native.transport == "http2"
        assert "pr0xy-s3cret" not in repr(client)
        sender = first_sender(client)
        for n in range(3):
            assert client.messages.send(to=f"861390000005{n}", from_=sender, template=TEMPLATE,
                                        idempotency_key=f"h2-through-squid-{n}").ok
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.h2_url, max_retries=0,
                       verify=str(nginx_server.ca_path), proxy=anonymous) as client:
        with pytest.raises(bizmsg.ConnectError) as tunnel_refused:
            client.messages.send(to="8613900000059", from_=sender, template=TEMPLATE)
    assert "pr0xy-s3cret" not in str(tunnel_refused.value)

    def posts() -> list[dict[str, Any]]:
        return [e for e in nginx_server.access_log()
                if e["method"] == "POST" and e["server_port"] == nginx_server.h2_port]

    assert eventually(lambda: len(posts()) == 3)
    assert [(e["protocol"], e["idempotency_key"]) for e in posts()] == [
        ("HTTP/2.0", f"h2-through-squid-{n}") for n in range(3)]
    # One tunnel, and one h2 connection inside it for the four requests.
    assert len({e["connection"] for e in posts()}) == 1
    tunnelled = f"CONNECT 127.0.0.1:{nginx_server.h2_port}"
    assert eventually(lambda: any(tunnelled in line for line in squid.access_log()))
    tunnels = [line for line in squid.access_log() if tunnelled in line]
    assert sum("TCP_TUNNEL/200" in line for line in tunnels) == 1, tunnels
    stats = sandbox_process.stop()
    # nginx's one upstream connection: nothing of the refused tunnel reached the service.
    assert stats is not None and stats["requests"] == 4, stats


def test_an_https_proxy_is_spoken_by_the_http1_transport(
        start_squid: Callable[..., SquidServer], start_haproxy: Callable[..., HAProxyServer],
        tls_files: TLSFiles, nginx_server: NginxServer,
        sandbox_process: SandboxProcess) -> None:
    """A proxy reached over TLS (Squid behind HAProxy terminating TLS: an ``https://`` proxy
    with Basic credentials): the HTTP/1.1 transport forwards a plain ``http://`` send inside TLS
    with the proxy, tunnels an ``https://`` one (TLS with nginx inside TLS with the proxy),
    checks the proxy's certificate with ``verify``, and never shows the password."""
    squid = start_squid(credentials=("bizmsg", "pr0xy-s3cret"))
    front = start_haproxy(f"127.0.0.1:{squid.port}", tls=tls_files, tcp=True)
    proxy = f"https://bizmsg:pr0xy-s3cret@127.0.0.1:{front.port}"
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url, proxy=proxy,
                       verify=str(tls_files.ca_path)) as client:
        assert client._native.transport == "http1"
        sender = first_sender(client)
        for n in range(3):
            assert client.messages.send(to=f"861390000002{n}", from_=sender,
                                        template=TEMPLATE).ok
        assert "pr0xy-s3cret" not in repr(client)
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url, proxy=proxy,
                       verify=str(tls_files.ca_path)) as client:
        assert client._native.transport == "http1"
        for n in range(3):
            assert client.messages.send(to=f"861390000003{n}", from_=sender, template=TEMPLATE,
                                        idempotency_key=f"through-https-proxy-{n}").ok
    assert eventually(lambda: len([e for e in nginx_server.access_log()
                                   if e["method"] == "POST"]) == 3)
    # Squid logs a tunnel when it closes: the client closed it with its pool.
    assert eventually(lambda: any("CONNECT " in line for line in squid.access_log()))
    log = squid.access_log()
    forwarded = f"POST {sandbox_process.base_url}/v1/chat/messages/send"
    assert any(forwarded in line for line in log), log
    # One tunnel for the three sends: the connection (TLS inside TLS) was pooled and reused.
    tunnels = [line for line in log if f"CONNECT 127.0.0.1:{nginx_server.port}" in line]
    assert len(tunnels) == 1, log
    # Without the credentials, the proxy's 407 is a configuration error, forwarded or
    # tunnelled, and nothing reaches the service.
    anonymous = f"https://127.0.0.1:{front.port}"
    for base_url in (sandbox_process.base_url, nginx_server.url):
        with bizmsg.Client(sandbox_process.token, base_url=base_url, proxy=anonymous,
                           verify=str(tls_files.ca_path), max_retries=0) as client:
            with pytest.raises(bizmsg.ConfigurationError, match="407"):
                client.messages.send(to="8613900000041", from_=sender, template=TEMPLATE)
    # The proxy's certificate is checked: with the system's roots it is refused, naming the
    # proxy, before anything is sent.
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url, proxy=proxy,
                       max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError) as refused:
            client.messages.send(to="8613900000040", from_=sender, template=TEMPLATE)
    message = str(refused.value)
    assert f"the proxy 127.0.0.1:{front.port}" in message and "TLS" in message, message
    assert "pr0xy-s3cret" not in message
    stats = sandbox_process.stop()
    # The sender lookup, three plain sends, three through nginx: nothing of the refused one.
    assert stats is not None and stats["requests"] == 7, stats


def test_a_proxy_that_wants_credentials_gets_them_from_the_proxy_url(
        start_squid: Callable[..., SquidServer], nginx_server: NginxServer,
        sandbox_process: SandboxProcess) -> None:
    """Squid with Basic authentication: with the user and password in the proxy URL both the
    forwarded and the tunnelled send go through; without them, the tunnel is refused and a
    forwarded request is answered 407 by the proxy, each a configuration error naming the
    407: neither reached the service, and the password is never shown."""
    squid = start_squid(credentials=("bizmsg", "pr0xy-s3cret"))
    anonymous = squid.proxy_url.replace("bizmsg:pr0xy-s3cret@", "")
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url,
                       proxy=squid.proxy_url) as client:
        sender = first_sender(client)
        assert client.messages.send(to="8613900000011", from_=sender, template=TEMPLATE).ok
        assert "pr0xy-s3cret" not in repr(client)
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url,
                       verify=str(nginx_server.ca_path), proxy=squid.proxy_url) as client:
        assert client.messages.send(to="8613900000012", from_=sender, template=TEMPLATE).ok
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url, max_retries=0,
                       verify=str(nginx_server.ca_path), proxy=anonymous) as client:
        with pytest.raises(bizmsg.ConfigurationError) as refused:
            client.messages.send(to="8613900000013", from_=sender, template=TEMPLATE)
        assert "407" in str(refused.value) and "credentials" in str(refused.value)
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url,
                       proxy=anonymous, max_retries=0) as client:
        with pytest.raises(bizmsg.ConfigurationError) as answered:
            client.messages.send(to="8613900000014", from_=sender, template=TEMPLATE)
        assert "407" in str(answered.value)
    stats = sandbox_process.stop()
    assert stats is not None and stats["accepted"] == 2


def test_the_environments_proxy_is_used_and_no_proxy_is_honoured(
        squid_server: SquidServer, nginx_server: NginxServer,
        sandbox_process: SandboxProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS_PROXY sends an https:// service's requests through a CONNECT tunnel, on the HTTP/1.1
    transport; NO_PROXY naming the host takes them past the proxy."""
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
                 "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", squid_server.proxy_url)
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url,
                       verify=str(nginx_server.ca_path)) as client:
        assert client._native.transport == "http1"
        sender = first_sender(client)
        assert client.messages.send(to="8613900000021", from_=sender, template=TEMPLATE).ok
    tunnels = lambda: [line for line in squid_server.access_log() if "CONNECT " in line]
    assert eventually(lambda: len(tunnels()) == 1), squid_server.access_log()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with bizmsg.Client(sandbox_process.token, base_url=nginx_server.url,
                       verify=str(nginx_server.ca_path)) as client:
        assert client.messages.send(to="8613900000022", from_=sender, template=TEMPLATE).ok
    time.sleep(0.5)
    assert len(tunnels()) == 1, squid_server.access_log()


# -- Celery ----------------------------------------------------------------------------------


def test_celery_worker_runs_a_task_in_its_prefork_pool(
        start_celery_worker: Callable[..., CeleryWorker]) -> None:
    celery = require_module("celery", pip="celery[redis]")
    worker = start_celery_worker("services.celery_check_app")
    pool = worker.pool_pids()
    assert len(pool) == 4
    app = celery.Celery("bizmsg_celery_check_caller", broker=worker.broker_url,
                        backend=worker.result_backend)
    try:
        results = [app.send_task("bizmsg_check.add", args=(i, 1)) for i in range(8)]
        answers = [r.get(timeout=30) for r in results]
    finally:
        app.close()
    assert [a["sum"] for a in answers] == [i + 1 for i in range(8)]
    assert {a["pid"] for a in answers} <= set(pool)


# -- no server outlives pytest ---------------------------------------------------------------


def test_ctrl_c_of_pytest_stops_the_servers_it_started(tmp_path: Path) -> None:
    """A pytest run interrupted with SIGINT (Ctrl-C) while a test holds Redis and the sandbox
    process: the teardown stops both by PID before pytest exits."""
    require_module("redis", pip="redis")
    pids = tmp_path / "pids"
    (tmp_path / "test_held.py").write_text(textwrap.dedent(f"""
        import time

        def test_held(redis_server, sandbox_process):
            with open({str(pids)!r}, "w") as f:
                f.write(f"{{redis_server.process.pid}} {{sandbox_process.process.pid}}")
            time.sleep(120)
    """))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), *filter(None, [env.get("PYTHONPATH")])])
    # A child inherits an ignored SIGINT (nohup, CI): install Python's handler before pytest.
    script = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler);"
              "sys.exit(pytest.main(['-q', '-p', 'services.fixtures', '-p', 'no:cacheprovider',"
              f" '--rootdir', {str(tmp_path)!r}, '-c', '/dev/null', {str(tmp_path / 'test_held.py')!r}]))")
    child = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and len(pids.read_text().split()) == 2):
            assert child.poll() is None, child.communicate()[0].decode(errors="replace")
            assert time.monotonic() < deadline, "the inner test never started its servers"
            time.sleep(0.05)
        started = [int(p) for p in pids.read_text().split()]
        assert not any(gone(pid) for pid in started)
        child.send_signal(signal.SIGINT)
        output = child.communicate(timeout=60)[0].decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "KeyboardInterrupt" in output, output
    assert all(gone(pid) for pid in started), output


def test_an_explicit_proxy_is_never_gone_around_and_socks_is_refused(
        squid_server: SquidServer, sandbox_process: SandboxProcess) -> None:
    """A proxy URL whose credentials hold characters a URI refuses as they are (``^``, a space,
    non-ASCII) still sends every request through the proxy (it was once dropped, and the service
    reached directly); a SOCKS proxy, which no transport speaks, is a ConfigurationError that
    does not show its password, never taken for an HTTP proxy."""
    odd = squid_server.proxy_url.replace("http://", "http://user:p^ss w%C3%B6rd@")
    before = len(squid_server.access_log())
    with bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url,
                       proxy=odd) as client:
        assert client._native.transport == "http1"
        sender = first_sender(client)
        assert client.messages.send(to="8613900000031", from_=sender, template=TEMPLATE).ok
    # Squid writes its log as transactions end, a moment after the answer.
    deadline = time.monotonic() + 10
    while len(squid_server.access_log()) < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(squid_server.access_log()) >= before + 2, squid_server.access_log()[before:]
    for transport in ("http1", "http2"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("BIZMSG_TRANSPORT", transport)
            with pytest.raises(bizmsg.ConfigurationError) as refused:
                bizmsg.Client(sandbox_process.token, base_url=sandbox_process.base_url,
                              proxy="socks5://user:s3cret@127.0.0.1:1080")
            assert "SOCKS" in str(refused.value) and "s3cret" not in str(refused.value)
