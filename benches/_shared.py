"""What the orchestrator (run.py) and the client subprocesses (_scenarios.py) agree on: the
request every client makes, the answers the server gives, and the list of scenarios.

Kept free of third-party imports so that both sides can import it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOKEN = "sandbox-token-acme"  # the sandbox's first tenant; nginx ignores it
SEND_PATH = "/v1/chat/messages/send"
LIST_PATH = "/v1/chat/businessPhoneNumber"

TO = "8613800138000"
# The sandbox's first number of tenant "acme" (seed 0): the sandbox fallback only accepts sends
# from a number of the caller's tenant.
FROM = "8617771459397"
TEMPLATE_NAME = "order_update"
TEMPLATE_PARAMETERS = ["A-1042"]
LANGUAGE = "en_US"

# What bizmsg puts on the wire for send_template(...) above; the peers POST exactly this.
BODY: dict[str, Any] = {
    "to": TO,
    "from": FROM,
    "type": "template",
    "template": {"name": TEMPLATE_NAME, "parameters": '["A-1042"]', "language": LANGUAGE},
}
SEND_ANSWER = '{"smsId":"sms_1","status":"ACCEPTED","code":"0","msg":"success"}'

LIST_PAGE_SIZE = 20
ITER_PAGE_SIZE = 1000
ITER_TOTAL = 100_000
ITER_PAGES = ITER_TOTAL // ITER_PAGE_SIZE

# Ratios are bizmsg / peer; these are the clients whose names start with "bizmsg".
OURS = ("bizmsg", "bizmsg-raw")


@dataclass(frozen=True)
class Scenario:
    key: str  # what --only takes
    title: str
    unit: str
    clients: tuple[str, ...]
    # True: a fixed amount of work bounded by --timeout (iter, send_many); False: a rate
    # measured for --requests requests or --seconds seconds, whichever comes first.
    fixed_work: bool = False
    # Only with a flag (--million).
    optional: bool = False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("sequential", "sequential sync send", "sends/s",
             ("bizmsg", "pyreqwest", "httpx", "requests")),
    Scenario("threads", "8 threads sharing one client", "sends/s",
             ("bizmsg", "pyreqwest", "httpx", "requests")),
    Scenario("asyncio", "asyncio, 64 in flight", "sends/s",
             ("bizmsg", "pyreqwest", "aiohttp", "httpx")),
    # bizmsg twice: dataclasses (the default) and raw=True; the peers decode to dicts.
    Scenario("list", "list 20 numbers", "pages/s",
             ("bizmsg", "bizmsg-raw", "pyreqwest", "httpx", "requests")),
    Scenario("iter", "iter 100,000 numbers, page_size=1000", "items/s",
             ("bizmsg", "pyreqwest"), fixed_work=True),
    Scenario("send_many", "send_many_iter, concurrency 64", "messages/s",
             ("bizmsg",), fixed_work=True),
    Scenario("million", "send_many_iter, 1,000,000 messages", "messages/s",
             ("bizmsg",), fixed_work=True, optional=True),
    # Not Python: the load generators show what the server and one client core can do at all.
    Scenario("ceiling", "ceiling: load generator, 64 connections", "requests/s", ("wrk", "oha")),
)
SCENARIO_BY_KEY = {s.key: s for s in SCENARIOS}

# The Python module each peer needs (bizmsg itself is always tried).
PEER_MODULES = {"pyreqwest": "pyreqwest", "httpx": "httpx", "requests": "requests",
                "aiohttp": "aiohttp"}


@dataclass(frozen=True)
class Row:
    """One line of the summary table: bizmsg's `client` in `scenario` against the peers."""

    scenario: str
    client: str
    title: str
    # bizmsg / pyreqwest must reach this (or, with vs_ceiling, bizmsg / wrk).
    target: float | None
    vs_ceiling: bool = False


ROWS: tuple[Row, ...] = (
    Row("sequential", "bizmsg", "sequential sync send", 1.3),
    Row("threads", "bizmsg", "8 threads, one client", 1.2),
    Row("asyncio", "bizmsg", "asyncio, 64 in flight", 1.5),
    Row("list", "bizmsg", "list 20 numbers (dataclasses)", 1.0),
    Row("list", "bizmsg-raw", "list 20 numbers (raw=True)", 1.5),
    Row("iter", "bizmsg", "iter 100k numbers, page_size=1000", None),
    Row("send_many", "bizmsg", "send_many_iter, concurrency 64", 0.6, vs_ceiling=True),
)
