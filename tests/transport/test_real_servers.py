"""The transports against real servers: the keep-alive race.

nginx (TLS, ``keepalive_timeout 1s``) and HAProxy (plain HTTP, ``timeout http-keep-alive
500ms``) stand in front of a sandbox, and Squid between the client and it; each speaks HTTP/1.1
to the HTTP/1.1 transport and HTTP/2 to the HTTP/2 one (``http2``). An ``AsyncClient`` keeps
64 sends in flight in bursts of 128, then stays idle for about the server's keep-alive timeout (x0.97 to x1.03), so that the
next burst reuses pooled connections just as the server closes them: the race in which a send
can end ``SendOutcomeUnknownError`` although the service never received it. The gaps cover that
range evenly (a golden-ratio sequence rather than random draws: with 16 bursts, chance could
leave half of the range untried). Only gaps a little under the timeout hit the race: the
connections then expire while the burst is taking them.

What is asserted, always (correctness, never timing):

- no answer is ever attributed to the wrong request: each send that returned ``sms_id`` S was
  answered S by the sandbox for that send's own ``Idempotency-Key`` (and recipient), as the
  sandbox's request log shows, and no two sends share an ``sms_id``;
- a send reported as never sent (``ConnectError``) had indeed not reached the sandbox;
- after each unknown is reconciled as a user would (re-sent with its own key), every message
  went out exactly once, and the sandbox's idempotency replay agrees with its log about which
  unknowns had arrived.

What is reported: the number of unknowns, and how many of them had never arrived (printed in
the terminal summary, and written as JSON to ``$BIZMSG_REPORT_DIR`` or the test's temporary
folder). It is asserted too (``UNKNOWN_LIMIT_PER_12800``), on both transports; each learns the
server's idle limit (``src/client/idle_limit.rs``): the HTTP/1.1 pool from the first connection
it finds closed, the HTTP/2 transport, which sees its calls and not its connection's close,
from the first burst lost to it (``src/client/http2/idleness.rs``); see
``UNKNOWN_LIMIT_PER_12800`` for what remains. Squid (``client_idle_pconn_timeout 1 second``) stands for a corporate forward proxy.

Size: 2,000 sends per server and transport by default (16 bursts, about 17 s through nginx and
8 s through HAProxy), so the eleven runs take about two and a half minutes on 2 cores. The race is a matter of
microseconds, so its count varies from run to run (via nginx, HTTP/1.1: 0 to 21 per 2,000 on the
same machine, 14 in one CI run): 2,000 sends show it, the issue's full figure judges it.
``BIZMSG_RACE_SENDS=12800`` runs that (about 110 s per nginx run, 55 s per HAProxy run).

The sandbox runs in this process (``bizmsg.testing.Sandbox`` on a loopback port) so that its
request log, with every key and answer, can be read; nginx and HAProxy are real processes.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from services.fixtures import installed
from services.haproxy_server import HAProxyServer
from services.nginx_server import NginxServer
from services.squid_server import SquidServer
from services.reports import write_report
from services.tls import TLSFiles

#: Sends per server and transport; the issue's figure is 12,800.
RACE_SENDS = int(os.environ.get("BIZMSG_RACE_SENDS", "2000"))
IN_FLIGHT = 64
BURST = 128
#: At most this many SendOutcomeUnknownError in a run of up to 12,800 sends, per transport
#: and server: what remains is the cost of learning the server's idle limit, the sends in
#: flight when its first close comes, and it does not shrink with the run.
#:
#: The default transport (HTTP/1.1): before learning, it loses the sends written on
#: connections whose server closes them in the same instant: the server's timer fires while
#: the request is on its way (our reading of nginx: it runs its expired timers once per pass
#: of its event loop, so a request that arrives during the pass on a connection due in it is
#: closed unread, and a loaded machine lengthens the pass). The pool learns from the first close it sees (`src/client/idle_limit.rs`), so the
#: loss is at most the sends then in flight, ``IN_FLIGHT``. Measured via nginx, per 2,000: 0 in
#: most runs on a quiet machine, up to 21; 14 in one CI run (where the bound was once 8: it
#: was an aim, 10x fewer than the 89 via nginx and 56 via HAProxy measured before the
#: transports learned idle limits, and not a bound). Squid checks its idle timeouts once a
#: second and then closes every connection past its limit at once: if that tick falls as a
#: burst takes its connections, the sends in flight on them are lost together (0, 18 and 25 in
#: runs of 2,000, 1 in 12,800).
#:
#: The HTTP/2 transport (``http2``, forced): nginx closes an idle h2 connection gracefully
#: (a GOAWAY, then it waits), and the streams it refuses are sent again at once (0 in 12,800).
#: HAProxy and Squid's tunnel close it under the burst's streams, which fail with a broken
#: pipe. The transport sees its calls, not its connection's close, so it learns the server's
#: idle limit from the first such loss, not before it: the sends in flight then, at most
#: ``IN_FLIGHT``, are lost once (in 12,800: 56 via HAProxy, 34 through Squid, each in one
#: burst; 0 in most runs of 2,000).
UNKNOWN_LIMIT_PER_12800 = {
    "http1": {"nginx": IN_FLIGHT, "haproxy": IN_FLIGHT, "squid": IN_FLIGHT},
    "http2": {"nginx": 8, "haproxy": IN_FLIGHT, "squid": IN_FLIGHT},
}

#: Servers whose idle timer closes a connection at its limit, so that what the pool learns
#: from its first close (at most ¾ of the gaps between bursts) ends the losses. Not Squid,
#: which closes at its next once-a-second tick: a first close seen after up to 2 s of idleness
#: teaches a limit above the gaps, and a later tick can take another burst.
ONE_BURST_OF_LEARNING = ("nginx", "haproxy")
NGINX_KEEPALIVE = 1.0
HAPROXY_KEEPALIVE = 0.5
#: Squid's idle limit for client connections (``client_idle_pconn_timeout``), whole seconds.
SQUID_KEEPALIVE = 1.0
TEMPLATE = bizmsg.Template(name="order_update", parameters=["A-1042"], language="en_US")

_BURSTS = math.ceil(RACE_SENDS / BURST)
# Bounded: each burst is well under 5 s even on a loaded machine, plus the idle gap.
_TIMEOUT = 60 + _BURSTS * (NGINX_KEEPALIVE * 1.03 + 5)


@dataclass
class Stack:
    sandbox: Sandbox
    nginx: NginxServer
    haproxy: HAProxyServer
    haproxy_h2: HAProxyServer
    squid: SquidServer
    sender: str


@pytest.fixture(scope="module")
def stack(tls_files: TLSFiles) -> Iterator[Stack]:
    with Sandbox() as sandbox:
        upstream = f"127.0.0.1:{sandbox.port}"
        with installed():
            nginx = NginxServer(upstream, tls_files, keepalive_timeout=f"{int(NGINX_KEEPALIVE * 1000)}ms")
            haproxy = HAProxyServer(upstream, keepalive=f"{int(HAPROXY_KEEPALIVE * 1000)}ms")
            haproxy_h2 = HAProxyServer(upstream, keepalive=f"{int(HAPROXY_KEEPALIVE * 1000)}ms",
                                       h2=True)
            squid = SquidServer(client_idle=f"{int(SQUID_KEEPALIVE)} second")
        with nginx, haproxy, haproxy_h2, squid, sandbox.client() as client:
            number = client.business_phone_numbers.list().data[0]
            assert number.status == "CONNECTED"
            sender = "".join(c for c in number.display_phone_number or "" if c.isdigit())
            yield Stack(sandbox, nginx, haproxy, haproxy_h2, squid, sender)


@dataclass
class Outcome:
    key: str
    to: str
    kind: str  # "sent", "unknown" or the exception's class name
    sms_id: str | None = None
    detail: str = ""


@dataclass
class Race:
    outcomes: list[Outcome] = field(default_factory=list[Outcome])
    seconds: float = 0.0


async def run_race(client: bizmsg.AsyncClient, sender: str, label: str, offset: int,
                   idle: float) -> Race:
    race = Race([Outcome(key=f"race-{label}-{i}", to=f"86135{offset + i:08d}", kind="pending")
                 for i in range(RACE_SENDS)])
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(outcome: Outcome) -> None:
        async with gate:
            try:
                result = await client.messages.send(to=outcome.to, from_=sender, template=TEMPLATE,
                                                    idempotency_key=outcome.key)
            except bizmsg.SendOutcomeUnknownError as error:
                assert error.idempotency_key == outcome.key
                outcome.kind, outcome.detail = "unknown", repr(error.__cause__)
            except bizmsg.BizmsgError as error:
                outcome.kind, outcome.detail = type(error).__name__, str(error)[:300]
            else:
                outcome.kind, outcome.sms_id = "sent", str(result.sms_id)

    started = time.monotonic()
    for burst, start in enumerate(range(0, RACE_SENDS, BURST)):
        await asyncio.gather(*(one(o) for o in race.outcomes[start:start + BURST]))
        # x0.97 to x1.03 of the timeout, evenly covered (the fractional parts of k * golden ratio).
        await asyncio.sleep(idle * (0.97 + 0.06 * ((burst * 0.6180339887) % 1.0)))
    race.seconds = time.monotonic() - started
    return race


def judge(sandbox: Sandbox, sender: str, race: Race, label: str) -> dict[str, Any]:
    """Checks the race's answers against the sandbox's log, reconciles the unknowns by re-sending
    them with their own keys, and returns the figures. Fails on any misattribution."""
    prefix = f"race-{label}-"
    by_key: dict[str, list[dict[str, Any]]] = {}
    owner_of_sms: dict[str, str] = {}
    for record in sandbox.sent_messages():
        key = record["headers"].get("idempotency-key", "")
        if not key.startswith(prefix):
            continue
        by_key.setdefault(key, []).append(record)
        body = record["response_body"]
        if isinstance(body, dict) and body.get("smsId"):
            sms_id = str(body["smsId"])
            owner = owner_of_sms.setdefault(sms_id, key)
            assert owner == key, f"the sandbox answered {sms_id} to two keys: {owner} and {key}"

    wrong: list[str] = []
    sent = [o for o in race.outcomes if o.kind == "sent"]
    for o in sent:
        answers = {str(r["response_body"].get("smsId")) for r in by_key.get(o.key, [])
                   if isinstance(r["response_body"], dict)}
        tos = {r["body"].get("to") for r in by_key.get(o.key, []) if isinstance(r["body"], dict)}
        if o.sms_id not in answers or tos != {o.to}:
            wrong.append(f"{o.key} (to {o.to}) returned {o.sms_id}; the sandbox answered that key "
                         f"{sorted(answers)} for {sorted(map(str, tos))}; "
                         f"{o.sms_id} belongs to {owner_of_sms.get(str(o.sms_id))}")
    duplicates = [s for s, n in Counter(o.sms_id for o in sent).items() if n > 1]
    assert not wrong, f"{len(wrong)} answers attributed to the wrong request:\n" + "\n".join(wrong[:20])
    assert not duplicates, f"sms_ids returned to more than one send: {duplicates[:20]}"

    never_sent = [o for o in race.outcomes if o.kind == "ConnectError" and o.key in by_key]
    assert not never_sent, ("sends reported ConnectError (never reached the service) had reached "
                            f"it: {[o.key for o in never_sent[:20]]}")

    # Reconcile as a user would: re-send each unknown with its own key, directly to the service.
    unknown = [o for o in race.outcomes if o.kind == "unknown"]
    arrived = {o.key for o in unknown if o.key in by_key}
    with sandbox.client() as direct:
        for o in unknown:
            direct.messages.send(to=o.to, from_=sender, template=TEMPLATE, idempotency_key=o.key)
    replayed: dict[str, bool] = {}
    committed = Counter[str]()
    for record in sandbox.sent_messages():
        key = record["headers"].get("idempotency-key", "")
        if not key.startswith(prefix):
            continue
        replayed[key] = bool(record["idempotent_replay"])  # the last record: the re-send's
        body = record["response_body"]
        if (record["status"] == 200 and not record["idempotent_replay"] and isinstance(body, dict)
                and body.get("status") == "ACCEPTED"):
            committed[record["body"]["to"]] += 1
    for o in unknown:
        assert replayed[o.key] == (o.key in arrived), (
            f"{o.key}: the sandbox's replay ({replayed[o.key]}) disagrees with its log "
            f"({o.key in arrived}) about whether it had arrived")
    reconciled = {o.to for o in race.outcomes if o.kind in ("sent", "unknown")}
    assert {to: n for to, n in committed.items() if n != 1} == {}, "a message went out twice"
    assert reconciled <= set(committed), "a reconciled message never went out"

    kinds = Counter(o.kind for o in race.outcomes)
    return {
        "sends": RACE_SENDS,
        "sent": kinds["sent"],
        "unknown": len(unknown),
        "unknown_never_arrived": len(unknown) - len(arrived),
        "unknown_had_arrived": len(arrived),
        "other_errors": {k: n for k, n in kinds.items() if k not in ("sent", "unknown")},
        "unknown_causes": dict(Counter(o.detail.split("(")[0] for o in unknown)),
        # Which bursts lost sends: the learning of the server's idle limit shows as the first.
        "unknown_by_burst": dict(Counter(i // BURST for i, o in enumerate(race.outcomes)
                                         if o.kind == "unknown")),
        "examples": [f"{o.kind}: {o.detail}" for o in race.outcomes
                     if o.kind != "sent"][:5],
        "wrong_attributions": 0,
    }


TARGETS = [
    # "http2": the HTTP/2 transport (reqwest, when forced), on the same servers speaking h2:
    # nginx by ALPN (its h2 port also ends each connection after 50 streams), HAProxy without
    # TLS (h2c).
    pytest.param("nginx", "http1", False, id="nginx-http1"),
    pytest.param("nginx", "http2", False, id="nginx-http2"),
    pytest.param("haproxy", "http1", False, id="haproxy-http1"),
    pytest.param("haproxy", "http2", False, id="haproxy-http2"),
    # Behind a forward proxy: the HTTP/1.1 transport speaks to it itself (a plain-http service,
    # forwarded); the HTTP/2 transport goes through a CONNECT tunnel to nginx's h2 port.
    pytest.param("squid", "http1", False, id="squid-http1"),
    pytest.param("squid", "http2", False, id="squid-http2"),
    # The opt-in for services that deduplicate by Idempotency-Key (the sandbox does): a send
    # lost to the race goes again once, with its key; no unknown is left.
    pytest.param("nginx", "http1", True, id="nginx-http1-idempotent"),
    pytest.param("haproxy", "http1", True, id="haproxy-http1-idempotent"),
    pytest.param("squid", "http1", True, id="squid-http1-idempotent"),
    pytest.param("haproxy", "http2", True, id="haproxy-http2-idempotent"),
    pytest.param("squid", "http2", True, id="squid-http2-idempotent"),
]


@pytest.mark.timeout(_TIMEOUT)
@pytest.mark.parametrize(("server", "transport", "idempotent"), TARGETS)
async def test_keepalive_race_never_misattributes_and_reports_unknowns(
        stack: Stack, server: str, transport: str, idempotent: bool,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BIZMSG_TRANSPORT", transport)
    verify: bool | str = True
    h2 = transport == "http2"
    if server == "nginx":
        url, verify, idle = (stack.nginx.h2_url if h2 else stack.nginx.url,
                             str(stack.nginx.ca_path), NGINX_KEEPALIVE)
        version = f"{stack.nginx.version()}, TLS" + (", h2" if h2 else "")
        keepalive = f"keepalive_timeout {stack.nginx.keepalive_timeout}"
    elif server == "haproxy":
        url, idle = (stack.haproxy_h2 if h2 else stack.haproxy).url, HAPROXY_KEEPALIVE
        version = f"HAProxy {stack.haproxy.version()}, plain HTTP" + ("/2 (h2c)" if h2 else "")
        keepalive = f"timeout http-keep-alive {stack.haproxy.keepalive}"
    elif h2:
        # HTTP/2 goes through an HTTP proxy only in a CONNECT tunnel, to an https:// service.
        url, verify, idle = stack.nginx.h2_url, str(stack.nginx.ca_path), SQUID_KEEPALIVE
        version = (f"Squid {stack.squid.version()} (forward proxy), CONNECT to "
                   f"{stack.nginx.version()}, h2")
        keepalive = (f"client_idle_pconn_timeout {int(SQUID_KEEPALIVE)} second, "
                     f"keepalive_timeout {stack.nginx.keepalive_timeout}")
    else:
        url, idle = stack.sandbox.base_url, SQUID_KEEPALIVE
        version = f"Squid {stack.squid.version()} (forward proxy), plain HTTP"
        keepalive = f"client_idle_pconn_timeout {int(SQUID_KEEPALIVE)} second"
    label = f"{server}-{transport}" + ("-idempotent" if idempotent else "")
    offset = [p.id for p in TARGETS].index(label) * 1_000_000

    client = bizmsg.AsyncClient(stack.sandbox.token, base_url=url, verify=verify,
                                idempotent_sends=idempotent,
                                proxy=stack.squid.proxy_url if server == "squid" else None)
    try:
        assert client._native.transport == transport
        race = await run_race(client, stack.sender, label, offset, idle)
    finally:
        client.close()

    figures = judge(stack.sandbox, stack.sender, race, label)
    figures.update(server=version, keepalive=keepalive, transport=transport, in_flight=IN_FLIGHT,
                   burst=BURST, idle_gap_seconds=idle, seconds=round(race.seconds, 1),
                   bizmsg=bizmsg.__version__)
    others = ", ".join(f"{n} {kind}" for kind, n in sorted(figures["other_errors"].items()))
    write_report(
        f"keepalive-race-{label}", figures, fallback_dir=tmp_path,
        summary=(f"keep-alive race via {version} ({keepalive}), {transport}: {RACE_SENDS} sends, "
                 f"{figures['unknown']} SendOutcomeUnknownError ({figures['unknown_never_arrived']} "
                 f"had never arrived), other errors: {others or 'none'}, "
                 f"0 misattributed, {race.seconds:.0f} s"))

    if idempotent:
        assert figures["unknown"] == 0, figures
    else:
        assert figures["unknown"] <= UNKNOWN_LIMIT_PER_12800[transport][server], figures
        if transport == "http1" and server in ONE_BURST_OF_LEARNING:
            # The pool learns from the first close it sees (a loss teaches it too), and never
            # again reuses a connection as idle as the bursts' gaps: losses in more than one
            # burst mean it did not learn.
            assert len(figures["unknown_by_burst"]) <= 1, figures


def test_the_judge_catches_an_answer_given_to_the_wrong_request() -> None:
    """The check above can fail: two real sends whose answers are swapped, as a connection
    knocked out of step would return them, are caught."""
    with Sandbox() as sandbox, sandbox.client() as client:
        number = client.business_phone_numbers.list().data[0]
        sender = "".join(c for c in number.display_phone_number or "" if c.isdigit())
        race = Race([Outcome(key=f"race-selfcheck-{i}", to=f"8613600000{i:03d}", kind="sent")
                     for i in range(3)])
        for outcome in race.outcomes:
            outcome.sms_id = str(client.messages.send(to=outcome.to, from_=sender, template=TEMPLATE,
                                                      idempotency_key=outcome.key).sms_id)
        judge(sandbox, sender, race, "selfcheck")  # as answered: passes
        race.outcomes[1].sms_id, race.outcomes[2].sms_id = race.outcomes[2].sms_id, race.outcomes[1].sms_id
        with pytest.raises(AssertionError, match="2 answers attributed to the wrong request"):
            judge(sandbox, sender, race, "selfcheck")


@pytest.mark.timeout(_TIMEOUT)
async def test_http2_refusals_are_sent_again_at_once_outside_the_retry_budget(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """nginx ends each h2 connection after 50 streams with a graceful GOAWAY;
    the streams it refuses were provably not processed. 64 sends in flight at a time, no retry
    allowed (``max_retries=0``): every send goes, none is retried through the retry budget (no
    ``on_retry``), none is unknown, and each message is committed once."""
    monkeypatch.setenv("BIZMSG_TRANSPORT", "http2")
    retries: list[str] = []
    client = bizmsg.AsyncClient(
        stack.sandbox.token, base_url=stack.nginx.h2_url, verify=str(stack.nginx.ca_path),
        max_retries=0, on_retry=lambda attempt, error, delay: retries.append(str(error)))
    recipients = [f"8613{9_500_000 + n:07d}" for n in range(600)]
    try:
        gate = asyncio.Semaphore(64)

        async def send(to: str) -> bizmsg.SendResult:
            async with gate:
                return await client.messages.send(to=to, from_=stack.sender, template=TEMPLATE)

        results = await asyncio.gather(*(send(to) for to in recipients))
    finally:
        client.close()
    assert all(result.ok for result in results)
    assert retries == []
    committed = Counter(r["body"]["to"] for r in stack.sandbox.sent_messages()
                        if r["body"]["to"] in set(recipients) and not r["idempotent_replay"])
    assert set(committed.values()) == {1} and len(committed) == len(recipients)
