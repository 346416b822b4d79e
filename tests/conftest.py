"""Shared fixtures. Every test talks over real HTTP to the embedded sandbox; nothing in the
HTTP layer is mocked.

The test files are in subfolders by subject (CONTRIBUTING.md's tree lists them). This file,
``shared_support.py``, ``campaign_support.py`` and ``services/`` stay at the top of ``tests/``,
which pyproject's pytest ``pythonpath`` puts on ``sys.path``: every test file imports them by
plain name (``from conftest import Number``).

- ``sandbox`` / ``client`` / ``aclient``: a fresh sandbox (seed 0, tenants acme and globex) per
  test, and clients on it for the first tenant (closed afterwards).
- ``module_sandbox``: one sandbox per module, for hypothesis tests that hit the network (its
  request log accumulates: read the last entries only).
- ``sender`` / ``globex_sender``: the first number of each tenant of a seed-0 sandbox (always
  CONNECTED, see docs/sandbox.md "Demo guarantee"), read once per session from a sandbox of its
  own so that no test's request log holds the look-up.
- The real servers (Redis, PostgreSQL, the standalone sandbox, nginx, HAProxy, Squid, a Celery
  worker) come from the ``services`` package, whose fixtures are loaded below as a plugin; see
  ``services/fixtures.py``.
- ``children``: child processes of a multi-process test (``shared_support.Children``), killed
  at teardown if still running.
- ``sigint_handler``: Python's own SIGINT handler (``KeyboardInterrupt``) installed for the test,
  for tests that interrupt their own process; ``DEFAULT_SIGINT`` does the same at the top of a
  child's script. Neither may be taken for granted: a run started with SIGINT ignored (``nohup``,
  ``cmd &`` in a script, many CI runners, cron) starts Python without its handler, and children
  inherit the ignored disposition.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import bizmsg
from bizmsg.testing import Sandbox
from shared_support import Children

# The real-server fixtures (services/fixtures.py): redis_server, postgres_server, nginx_server...
pytest_plugins = ("services.fixtures",)

settings.register_profile(
    "bizmsg",
    max_examples=60,
    # Loopback round trips on a loaded 2-core machine vary too much for a per-example deadline.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("bizmsg")


#: Put first in a child's script that relies on Ctrl-C (SIGINT) raising KeyboardInterrupt: a child
#: inherits an ignored SIGINT, and Python then installs no handler of its own.
DEFAULT_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


@dataclass(frozen=True)
class Number:
    """A business phone number of a seed-0 sandbox: as displayed, as digits, and its status."""

    display: str
    digits: str
    status: str
    phone_number_id: str


def digits_of(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def compact(value: Any) -> str:
    """JSON the way the client and serde_json write it: no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def number_wire(**overrides: Any) -> dict[str, Any]:
    """A business phone number as the service sends it (every field, two offset forms of
    timestamps), with ``overrides``: the sample of the model, display and frame tests."""
    wire = {
        "bizAccountId": "100000000000001",
        "phoneNumberId": "200000000000001",
        "displayPhoneNumber": "+86 138 0013 8000",
        "verifiedName": "Acme Support",
        "status": "CONNECTED",
        "qualityRating": "GREEN",
        "codeVerificationStatus": "VERIFIED",
        "throughput": "STANDARD",
        "messagingLimitTier": "TIER_2K",
        "createTime": "2024-03-05T10:15:30.123+0800",
        "updateTime": "2024-03-06T10:15:30.456+08:00",
    }
    wire.update(overrides)
    return wire


def committed(sandbox: Sandbox) -> list[dict[str, Any]]:
    """Send requests that made a message go out: accepted and not an idempotent replay."""
    return [
        r
        for r in sandbox.sent_messages()
        if r["status"] == 200
        and not r["idempotent_replay"]
        and isinstance(r["response_body"], dict)
        and r["response_body"].get("status") == "ACCEPTED"
    ]


def free_port() -> int:
    """A loopback port nobody listens on (bound and released at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Seed0:
    acme: list[Number]
    globex: list[Number]


@pytest.fixture(scope="session")
def seed0() -> Seed0:
    def numbers(client: bizmsg.Client) -> list[Number]:
        page = client.business_phone_numbers.list(page_size=1000)
        return [
            Number(
                display=n.display_phone_number or "",
                digits=digits_of(n.display_phone_number or ""),
                status=n.status or "",
                phone_number_id=n.phone_number_id,
            )
            for n in page
        ]

    with Sandbox() as sb:
        with sb.client() as acme, sb.client(token=sb.tenant_tokens["globex"]) as globex:
            return Seed0(acme=numbers(acme), globex=numbers(globex))


@pytest.fixture(scope="session")
def sender(seed0: Seed0) -> Number:
    first = seed0.acme[0]
    assert first.status == "CONNECTED"
    return first


@pytest.fixture(scope="session")
def globex_sender(seed0: Seed0) -> Number:
    first = seed0.globex[0]
    assert first.status == "CONNECTED"
    return first


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def module_sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def client(sandbox: Sandbox) -> Iterator[bizmsg.Client]:
    with sandbox.client() as c:
        yield c


@pytest.fixture
def aclient(sandbox: Sandbox) -> Iterator[bizmsg.AsyncClient]:
    c = sandbox.async_client()
    yield c
    c.close()


@pytest.fixture
def bizmsg_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Everything logged, at every level (Rust TRACE included), captured for the test."""
    caplog.set_level(1)
    caplog.set_level(1, logger="bizmsg")
    bizmsg.refresh_logging()
    # Tier warnings are logged once a day per process: a test reading them starts afresh.
    from bizmsg import _logging

    _logging.forget_logged()
    yield caplog
    # caplog restores the levels after this teardown; the Rust side re-reads them lazily.
    logging.getLogger("bizmsg").setLevel(logging.NOTSET)
    bizmsg.refresh_logging()


@pytest.fixture
def children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Children]:
    started = Children(tmp_path_factory.mktemp("children"))
    yield started
    started.close()


@pytest.fixture
def sigint_handler() -> Iterator[None]:
    """Installs ``signal.default_int_handler`` for SIGINT during the test (as a terminal start
    would have it) and restores whatever was there before, ``SIG_IGN`` included."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        # None: a handler not installed from Python, which cannot be put back; leave Python's.
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
