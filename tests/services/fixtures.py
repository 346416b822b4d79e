"""pytest fixtures for the real servers (loaded by ``tests/conftest.py`` as a plugin).

Every fixture starts its server on free loopback ports in a temporary folder and stops it by PID
at teardown, which pytest runs after a failure and after Ctrl-C too. A server that is not
installed skips the test with the way to install it, or fails it under
``BIZMSG_REQUIRE_SERVICES=1`` (``.ci/run``); see ``availability.py``.

| fixture | gives |
|---|---|
| ``tls_files`` (session) | a throwaway CA and a cert for 127.0.0.1/localhost (``TLSFiles``) |
| ``redis_server`` | Redis with a password, nothing persisted (``RedisServer``) |
| ``redis_tls_server`` | the same over TLS only, ``rediss://`` |
| ``start_redis`` | ``start_redis(durable=True, password=False, tls=...)``: more Redis servers |
| ``postgres_server`` | PostgreSQL 15, user and database ``bizmsg`` with a password (``PostgresServer``) |
| ``start_pgbouncer`` | ``start_pgbouncer(postgres_server, pool_mode="transaction")``: PgBouncer before it |
| ``sandbox_process`` | ``python -m bizmsg sandbox`` as a process (``SandboxProcess``) |
| ``start_sandbox_process`` | ``start_sandbox_process(["--enforce-limits"])``: more of them |
| ``nginx_server`` | nginx with TLS (keep-alive 1 s) and h2 (GOAWAY every 50) before ``sandbox_process`` |
| ``start_nginx`` | ``start_nginx("127.0.0.1:PORT", keepalive_timeout="2s")``: before any upstream |
| ``haproxy_server`` | HAProxy (keep-alive 500 ms) before ``sandbox_process`` |
| ``start_haproxy`` | ``start_haproxy("127.0.0.1:PORT", tls=tls_files)``: before any upstream |
| ``squid_server`` | Squid as a forward proxy (``proxy=squid_server.proxy_url``) |
| ``start_squid`` | ``start_squid(credentials=("u", "p"), client_idle="1 second")``: more of them |
| ``start_celery_worker`` | ``start_celery_worker("module", env={...})``: a prefork worker, |
| | its broker and backend ``redis_server`` (or ``redis=``) |
| ``hosts`` | two other hosts: network namespaces (``Hosts``), loopback ports relayed to them |
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from .availability import ServiceUnavailable, skip_or_fail
from .celery_worker import CeleryWorker
from .haproxy_server import HAProxyServer
from .hosts import Hosts
from .nginx_server import NginxServer
from .pgbouncer_server import PgBouncerServer
from .postgres_server import PostgresServer
from .processes import ServiceStartError, still_running, stop_all
from .redis_server import RedisServer
from .reports import add_summary_line, summary_lines
from .sandbox_server import SandboxProcess
from .squid_server import SquidServer
from .tls import TLSFiles, make_tls_files


@contextmanager
def installed() -> Iterator[None]:
    """Turns a missing server into a skip (or a failure under BIZMSG_REQUIRE_SERVICES=1)."""
    try:
        yield
    except ServiceUnavailable as missing:
        skip_or_fail(str(missing))


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    with installed():
        return make_tls_files(tmp_path_factory.mktemp("tls"))
    raise AssertionError("unreachable")  # for the type checker: skip_or_fail never returns


@pytest.fixture
def start_redis() -> Iterator[Callable[..., RedisServer]]:
    with ExitStack() as stack:
        def start(**options: Any) -> RedisServer:
            with installed():
                return stack.enter_context(RedisServer(**options))
            raise AssertionError("unreachable")

        yield start


@pytest.fixture
def redis_server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    return start_redis()


@pytest.fixture
def redis_tls_server(start_redis: Callable[..., RedisServer], tls_files: TLSFiles) -> RedisServer:
    return start_redis(tls=tls_files)


@pytest.fixture
def postgres_server() -> Iterator[PostgresServer]:
    with installed():
        server = PostgresServer()
    with server:
        yield server


@pytest.fixture
def start_pgbouncer() -> Iterator[Callable[..., PgBouncerServer]]:
    with ExitStack() as stack:
        def start(postgres: PostgresServer, **options: Any) -> PgBouncerServer:
            with installed():
                server = PgBouncerServer(postgres, **options)
            return stack.enter_context(server)

        yield start


@pytest.fixture
def start_sandbox_process() -> Iterator[Callable[..., SandboxProcess]]:
    with ExitStack() as stack:
        def start(args: Sequence[str] = (), **options: Any) -> SandboxProcess:
            return stack.enter_context(SandboxProcess(args, **options))

        yield start


@pytest.fixture
def sandbox_process(start_sandbox_process: Callable[..., SandboxProcess]) -> SandboxProcess:
    return start_sandbox_process()


@pytest.fixture
def start_nginx(tls_files: TLSFiles) -> Iterator[Callable[..., NginxServer]]:
    with ExitStack() as stack:
        def start(upstream: str, **options: Any) -> NginxServer:
            with installed():
                server = NginxServer(upstream, tls_files, **options)
            return stack.enter_context(server)

        yield start


@pytest.fixture
def nginx_server(start_nginx: Callable[..., NginxServer],
                 sandbox_process: SandboxProcess) -> NginxServer:
    return start_nginx(f"127.0.0.1:{sandbox_process.port}")


@pytest.fixture
def start_haproxy() -> Iterator[Callable[..., HAProxyServer]]:
    with ExitStack() as stack:
        def start(upstream: str, **options: Any) -> HAProxyServer:
            with installed():
                server = HAProxyServer(upstream, **options)
            return stack.enter_context(server)

        yield start


@pytest.fixture
def haproxy_server(start_haproxy: Callable[..., HAProxyServer],
                   sandbox_process: SandboxProcess) -> HAProxyServer:
    return start_haproxy(f"127.0.0.1:{sandbox_process.port}")


@pytest.fixture
def squid_server() -> Iterator[SquidServer]:
    with installed():
        server = SquidServer()
    with server:
        yield server


@pytest.fixture
def start_squid() -> Iterator[Callable[..., SquidServer]]:
    """``start_squid(credentials=("user", "password"), client_idle="1 second")``: more Squid
    proxies, each stopped at teardown."""
    with ExitStack() as stack:
        def start(**options: Any) -> SquidServer:
            with installed():
                server = SquidServer(**options)
            return stack.enter_context(server)

        yield start


@pytest.fixture
def start_celery_worker(request: pytest.FixtureRequest) -> Iterator[Callable[..., CeleryWorker]]:
    """``start_celery_worker(app, *, redis=None, env=None, cwd=None, concurrency=4, ...)``: a
    started worker whose broker is ``redis`` (default: this test's ``redis_server``) database 0
    and result backend database 1; every worker is stopped at teardown."""
    with installed():
        import importlib.util

        if importlib.util.find_spec("celery") is None:
            raise ServiceUnavailable("the Python package 'celery[redis]' is not installed: "
                                     "pip install -e \".[dev]\", or run .ci/run")
    with ExitStack() as stack:
        def start(app: str, *, redis: RedisServer | None = None, **options: Any) -> CeleryWorker:
            server = redis if redis is not None else request.getfixturevalue("redis_server")
            assert server.url.endswith("/0")
            worker = CeleryWorker(app, broker_url=server.url,
                                  result_backend=server.url[:-2] + "/1", **options)
            return stack.enter_context(worker)

        yield start


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    """Two network namespaces joined to this machine (``hosts.hosts``), each a host of its
    own for the processes run in it; ``hosts.expose(port)`` relays a loopback server to them.
    The test is optional (``.ci/run`` does not set up for it): where namespaces cannot be made
    (not root, a container without CAP_SYS_ADMIN, no iproute2) it skips, even under
    ``BIZMSG_REQUIRE_SERVICES=1``."""
    import os

    if os.geteuid() != 0:
        pytest.skip("two hosts need network namespaces, which need root")
    try:
        made = Hosts(2)
    except ServiceUnavailable as missing:
        pytest.skip(str(missing))
    except ServiceStartError as refused:
        if "netns add" not in str(refused):
            raise
        pytest.skip(f"network namespaces are not permitted here: {refused}")
    with made:
        yield made


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No orphans: every server a test started must have been stopped by its teardown. One
    still running is stopped here, and fails the run."""
    left = still_running()
    if left:
        stop_all()
        add_summary_line(f"FAILED: servers left running after their tests, now stopped: {', '.join(left)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.section("bizmsg reports")
        for line in lines:
            terminalreporter.write_line(line)
