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

# Ratios are bizmsg / peer; these are the clients whose names start with "bizmsg". The last
# four are bizmsg's bulk send with one option more, compared with plain "bizmsg" in the same
# round (the shared_limits and journal scenarios).
OURS = ("bizmsg", "bizmsg-raw", "bizmsg-rate", "bizmsg-redis", "bizmsg-sqlite", "bizmsg-postgres")

# Far above what one client core reaches: the rate is kept (in Redis, with shared_limits) but
# never waited for, so the figure is the bookkeeping's cost, not a pace.
SHARED_RATE_LIMIT = 1_000_000

# What each of those variants adds to `send_many_iter(messages, concurrency=64)`; a fresh
# campaign_id per sample, so no sample can find another's messages.
VARIANTS = {
    "bizmsg": "nothing (as in send_many)",
    "bizmsg-rate": f"campaign_id, rate_limit={SHARED_RATE_LIMIT:,}/s, no store",
    "bizmsg-redis": f"campaign_id, rate_limit={SHARED_RATE_LIMIT:,}/s, shared_limits=redis://",
    "bizmsg-sqlite": "campaign_id, journal=<fresh SQLite file>",
    "bizmsg-postgres": "campaign_id, journal=postgresql://",
}
# The journal scenario's job (or --messages, if smaller): a PostgreSQL journal commits its
# claims and results as it goes, at about a tenth of the rate without a journal (fsync on), and
# a sample must stay within --timeout.
JOURNAL_MESSAGES = 50_000

# The server besides nginx that an optional scenario's client needs (run.py starts it only when
# the scenario is selected): (scenario, client) -> server; client "*": every client.
NEEDS = {("proxy", "*"): "squid", ("shared_limits", "bizmsg-redis"): "redis",
         ("journal", "bizmsg-postgres"): "postgres"}


def needed_server(scenario: str, client: str) -> str | None:
    return NEEDS.get((scenario, client)) or NEEDS.get((scenario, "*"))


@dataclass(frozen=True)
class Scenario:
    key: str  # what --only takes
    title: str
    unit: str
    clients: tuple[str, ...]
    # True: a fixed amount of work bounded by --timeout (iter, send_many); False: a rate
    # measured for --requests requests or --seconds seconds, whichever comes first.
    fixed_work: bool = False
    # Only when named in --only (million also with --million): they need servers or time that
    # the default run does without.
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
    # The sequential scenario with every client configured with proxy="http://127.0.0.1:PORT"
    # (a Squid run.py starts): what a forward proxy in the path costs each client.
    Scenario("proxy", "sequential sync send through a forward proxy (Squid)", "sends/s",
             ("bizmsg", "pyreqwest", "httpx", "requests"), optional=True),
    # The send_many job without and with its campaign's rate kept in Redis, same round.
    Scenario("shared_limits", "send_many_iter, concurrency 64, campaign rate through Redis",
             "messages/s", ("bizmsg", "bizmsg-rate", "bizmsg-redis"), fixed_work=True,
             optional=True),
    # The send_many job (JOURNAL_MESSAGES) without a journal, with SQLite's, with PostgreSQL's.
    Scenario("journal", "send_many_iter, concurrency 64, with a journal", "messages/s",
             ("bizmsg", "bizmsg-sqlite", "bizmsg-postgres"), fixed_work=True, optional=True),
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
    # The ratio is `client` / this client of the same scenario and round instead (a variant
    # of bizmsg against plain bizmsg: with / without).
    vs_client: str | None = None


ROWS: tuple[Row, ...] = (
    Row("sequential", "bizmsg", "sequential sync send", 1.3),
    Row("threads", "bizmsg", "8 threads, one client", 1.2),
    Row("asyncio", "bizmsg", "asyncio, 64 in flight", 1.5),
    Row("list", "bizmsg", "list 20 numbers (dataclasses)", 1.0),
    Row("list", "bizmsg-raw", "list 20 numbers (raw=True)", 1.5),
    Row("iter", "bizmsg", "iter 100k numbers, page_size=1000", None),
    Row("send_many", "bizmsg", "send_many_iter, concurrency 64", 0.6, vs_ceiling=True),
    Row("proxy", "bizmsg", "sequential sync send through Squid", None),
    Row("shared_limits", "bizmsg-redis", "send_many_iter, campaign rate in Redis", None,
        vs_client="bizmsg"),
    Row("journal", "bizmsg-sqlite", "send_many_iter, SQLite journal", None, vs_client="bizmsg"),
    Row("journal", "bizmsg-postgres", "send_many_iter, PostgreSQL journal", None,
        vs_client="bizmsg"),
)
