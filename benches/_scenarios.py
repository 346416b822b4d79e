"""One scenario for one client, in a fresh process: `run.py` starts this file pinned to the
client CPU (`taskset -c 0 python benches/_scenarios.py --scenario S --client C ...`), so the
whole client (its Python thread and any runtime threads) shares one core, and nothing one
client left behind (threads, pools, heap) can slow the next one down.

Prints one line `RESULT {json}` on stdout: `value` (the rate in the scenario's unit), `count`,
`elapsed`, `complete`, `maxrss_kb` and scenario-specific `extra`; or `{"unavailable": why}`.
Every client does the same work: one request, the JSON body decoded to Python objects, the
answer checked once before timing starts (a 404 decoded fast is not a result).
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import resource
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from _shared import (
    BODY, FROM, ITER_PAGE_SIZE, ITER_TOTAL, LANGUAGE, LIST_PAGE_SIZE, LIST_PATH, SEND_PATH, TO,
    TEMPLATE_NAME, TEMPLATE_PARAMETERS, TOKEN,
)

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
WARMUP_CALLS = 50

Call = Callable[[], object]
AsyncCall = Callable[[], Awaitable[object]]
Close = Callable[[], Awaitable[object]]


class Unavailable(Exception):
    """The client cannot do this scenario (not installed, or the API is not in this build)."""


# --- What is measured: one call per client -------------------------------------------------


def _bizmsg_client(base_url: str, **options: Any) -> Any:
    """`options`: the Client keywords of the optional scenarios (proxy, shared_limits)."""
    import bizmsg

    return bizmsg.Client(TOKEN, base_url=base_url, max_retries=0, **options)


def sync_send(client: str, base_url: str, proxy: str | None = None) -> Call:
    """`proxy`: every client sends through this forward proxy (the proxy scenario), each
    configured the way its documentation says."""
    url = base_url + SEND_PATH
    if client == "bizmsg":
        options = {} if proxy is None else {"proxy": proxy}
        send = _bizmsg_client(base_url, **options).messages.send_template
        return lambda: send(to=TO, from_=FROM, name=TEMPLATE_NAME,
                            parameters=TEMPLATE_PARAMETERS, language=LANGUAGE)
    if client == "pyreqwest":
        from pyreqwest.client import SyncClientBuilder

        builder = SyncClientBuilder().default_headers(HEADERS)
        if proxy is not None:
            from pyreqwest.proxy import ProxyBuilder

            builder = builder.proxy(ProxyBuilder.http(proxy))
        pr = builder.build()
        return lambda: pr.post(url).body_json(BODY).build().send().json()
    if client == "httpx":
        import httpx

        hx = httpx.Client(headers=HEADERS) if proxy is None else \
            httpx.Client(headers=HEADERS, proxy=proxy)
        return lambda: hx.post(url, json=BODY).json()
    if client == "requests":
        import requests

        session = requests.Session()
        session.headers.update(HEADERS)
        if proxy is not None:
            session.proxies = {"http": proxy, "https": proxy}
        return lambda: session.post(url, json=BODY).json()
    raise Unavailable(f"{client} has no sync send")


def async_send(client: str, base_url: str) -> tuple[AsyncCall, Close]:
    """Called inside the running loop (the async clients bind to it)."""
    url = base_url + SEND_PATH
    if client == "bizmsg":
        import bizmsg

        ac = bizmsg.AsyncClient(TOKEN, base_url=base_url, max_retries=0)
        send = ac.messages.send_template
        return (lambda: send(to=TO, from_=FROM, name=TEMPLATE_NAME,
                             parameters=TEMPLATE_PARAMETERS, language=LANGUAGE)), ac.aclose
    if client == "pyreqwest":
        from pyreqwest.client import ClientBuilder

        pr = ClientBuilder().default_headers(HEADERS).build()

        async def pr_call() -> object:
            response = await pr.post(url).body_json(BODY).build().send()
            return await response.json()

        return pr_call, pr.close
    if client == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(headers=HEADERS)

        async def aio_call() -> object:
            async with session.post(url, json=BODY) as response:
                return await response.json()

        return aio_call, session.close
    if client == "httpx":
        import httpx

        hx = httpx.AsyncClient(headers=HEADERS, limits=httpx.Limits(max_connections=100))

        async def hx_call() -> object:
            return (await hx.post(url, json=BODY)).json()

        return hx_call, hx.aclose
    raise Unavailable(f"{client} has no async send")


def list_page(client: str, base_url: str) -> Call:
    url = f"{base_url}{LIST_PATH}?pageNo=1&pageSize={LIST_PAGE_SIZE}"
    if client in ("bizmsg", "bizmsg-raw"):
        numbers = _bizmsg_client(base_url).business_phone_numbers
        raw = client == "bizmsg-raw"
        return lambda: numbers.list(page_size=LIST_PAGE_SIZE, raw=raw)
    if client == "pyreqwest":
        from pyreqwest.client import SyncClientBuilder

        pr = SyncClientBuilder().default_headers(HEADERS).build()
        return lambda: pr.get(url).build().send().json()
    if client == "httpx":
        import httpx

        hx = httpx.Client(headers=HEADERS)
        return lambda: hx.get(url).json()
    if client == "requests":
        import requests

        session = requests.Session()
        session.headers.update(HEADERS)
        return lambda: session.get(url).json()
    raise Unavailable(f"{client} has no list")


def check_send(result: object) -> None:
    code = result.get("code") if isinstance(result, dict) else getattr(result, "code", None)
    if code != "0":
        raise RuntimeError(f"unexpected send answer: {result!r:.300}")


def check_list(result: object) -> None:
    data = result.get("data") if isinstance(result, dict) else getattr(result, "data", None)
    if data is None or len(data) != LIST_PAGE_SIZE:
        raise RuntimeError(f"unexpected list answer: {result!r:.300}")


# --- How it is driven ------------------------------------------------------------------------


def sequential(call: Call, check: Callable[[object], None], requests: int,
               seconds: float) -> tuple[int, float]:
    check(call())
    for _ in range(WARMUP_CALLS):
        call()
    done, start = 0, time.perf_counter()
    deadline = start + seconds
    # Checked every 100 calls: a clock read per call would be part of what is measured.
    while done < requests and time.perf_counter() < deadline:
        for _ in range(100):
            call()
        done += 100
    return done, time.perf_counter() - start


def threaded(call: Call, check: Callable[[object], None], threads: int, requests: int,
             seconds: float) -> tuple[int, float]:
    check(call())
    for _ in range(WARMUP_CALLS):
        call()
    counts = [0] * threads
    share = max(1, requests // threads)
    ready = threading.Barrier(threads + 1)
    timing: dict[str, float] = {}

    def work(index: int) -> None:
        ready.wait()
        deadline = timing["deadline"]
        while counts[index] < share and time.perf_counter() < deadline:
            for _ in range(20):
                call()
            counts[index] += 20

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    # Every thread exists before the clock starts: thread creation is not what is measured.
    timing["start"] = time.perf_counter()
    timing["deadline"] = timing["start"] + seconds
    ready.wait()
    for w in workers:
        w.join()
    return sum(counts), time.perf_counter() - timing["start"]


def concurrent(client: str, base_url: str, in_flight: int, requests: int,
               seconds: float) -> tuple[int, float]:
    async def main() -> tuple[int, float]:
        call, close = async_send(client, base_url)
        try:
            check_send(await call())
            # Opens the connections (one per in-flight request) before timing.
            await asyncio.gather(*(call() for _ in range(in_flight)))
            done = 0
            start = time.perf_counter()
            deadline = start + seconds

            async def worker() -> None:
                nonlocal done
                while done < requests and time.perf_counter() < deadline:
                    done += 1
                    await call()

            await asyncio.gather(*(worker() for _ in range(in_flight)))
            return done, time.perf_counter() - start
        finally:
            await close()

    return asyncio.run(main())


def rss_kb() -> int:
    """Resident set size now (not the peak), from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def peak_rss_kb() -> int:
    """The peak RSS of this process's own address space (VmHWM).

    Not getrusage's ru_maxrss alone: Linux carries that across fork and exec, so a child shows
    at least the RSS its parent (the orchestrator) had when it started it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def iterate(client: str, base_url: str, timeout: float) -> dict[str, Any]:
    """Every one of the 100,000 numbers, one item at a time; the time at each quarter and the
    RSS at 10k/50k/100k show that time grows linearly and memory does not grow at all."""
    items: Iterator[object]
    if client == "bizmsg":
        items = iter(_bizmsg_client(base_url).business_phone_numbers.iter(page_size=ITER_PAGE_SIZE))
    elif client == "pyreqwest":
        items = _pyreqwest_pages(base_url)
    else:
        raise Unavailable(f"{client} has no iter")
    time_marks = {ITER_TOTAL // 4 * q for q in (1, 2, 3, 4)}
    rss_marks = {10_000, 50_000, 100_000}
    # One integer comparison per item; the rest happens every 5,000 items.
    checkpoints = iter(sorted(time_marks | rss_marks | set(range(5_000, ITER_TOTAL + 1, 5_000))))
    next_mark = next(checkpoints)
    seconds_at: dict[str, float] = {}
    rss_at: dict[str, int] = {}
    count = 0
    start = time.perf_counter()
    deadline = start + timeout
    for _item in items:
        count += 1
        if count == next_mark:
            now = time.perf_counter()
            if count in time_marks:
                seconds_at[str(count)] = round(now - start, 4)
            if count in rss_marks:
                rss_at[str(count)] = rss_kb()
            if now > deadline:
                break
            next_mark = next(checkpoints, -1)
    elapsed = time.perf_counter() - start
    return {"count": count, "elapsed": elapsed, "complete": count == ITER_TOTAL,
            "extra": {"seconds_at": seconds_at, "rss_kb_at": rss_at}}


def _pyreqwest_pages(base_url: str) -> Iterator[object]:
    """The loop a pyreqwest user writes: page after page, decoded with .json()."""
    from pyreqwest.client import SyncClientBuilder

    pr = SyncClientBuilder().default_headers(HEADERS).build()
    page_no = 1
    while True:
        url = f"{base_url}{LIST_PATH}?pageNo={page_no}&pageSize={ITER_PAGE_SIZE}"
        body = pr.get(url).build().send().json()
        if body["current"] != page_no:
            raise RuntimeError(f"asked for page {page_no}, got {body['current']}")
        yield from body["data"]
        if page_no >= body["pages"]:
            return
        page_no += 1


def send_many(base_url: str, messages: int, concurrency: int, timeout: float,
              client_options: dict[str, Any] | None = None,
              campaign: dict[str, Any] | None = None) -> dict[str, Any]:
    """bizmsg's bulk send over a generator of `messages` messages, counting the outcomes.

    `client_options` (shared_limits) go to the Client, `campaign` (campaign_id, rate_limit,
    journal) to the campaign: the shared_limits and journal scenarios' variants."""
    import bizmsg

    client = _bizmsg_client(base_url, **(client_options or {}))
    campaign = campaign or {}
    bulk_iter = getattr(client.messages, "send_many_iter", None)
    if not hasattr(client.messages, "send_many") and bulk_iter is None:
        raise Unavailable("client.messages.send_many is not in this build of bizmsg")
    message_type = getattr(bizmsg, "Message", None)
    template = bizmsg.Template(TEMPLATE_NAME, TEMPLATE_PARAMETERS, LANGUAGE)
    produced = 0
    stop_at = time.perf_counter() + timeout

    def generate() -> Iterator[object]:
        # A generator, never a list: memory must not depend on the number of messages.
        nonlocal produced
        for i in range(messages):
            # The bound on the load: past the timeout no more messages are produced, and
            # what is in flight finishes.
            if i % 1000 == 0 and time.perf_counter() > stop_at:
                return
            to = f"86138{i % 100_000_000:08d}"
            produced += 1
            if message_type is not None:
                yield message_type(to=to, from_=FROM, template=template)
            else:
                yield {"to": to, "from": FROM, "name": TEMPLATE_NAME,
                       "parameters": TEMPLATE_PARAMETERS, "language": LANGUAGE}

    rss_marks = {max(1, messages // 20), messages // 2, messages}
    rss_at: dict[str, int] = {}
    failures = 0
    outcome_type = None
    start = time.perf_counter()
    if bulk_iter is not None:
        count = 0
        outcome = None
        for outcome in bulk_iter(generate(), concurrency=concurrency, **campaign):
            count += 1
            if count in rss_marks:
                rss_at[str(count)] = rss_kb()
            # What a user writes: `SendOutcome.ok` is the API's own test of success.
            if not outcome.ok:
                failures += 1
        outcome_type = type(outcome).__name__
        api = "send_many_iter"
        summary = None
    else:
        result = client.messages.send_many(generate(), concurrency=concurrency, **campaign)
        count = produced
        api = "send_many"
        summary = repr(getattr(result, "counts", result))[:300]
    elapsed = time.perf_counter() - start
    extra: dict[str, Any] = {
        "api": api, "messages": messages, "failures": failures,
        "message_type": "bizmsg.Message" if message_type else "dict",
        "outcome_type": outcome_type, "result": summary, "rss_kb_at": rss_at}
    if client_options or campaign:
        # What this variant added; the URLs have no password (the harness's servers need none).
        extra["options"] = {**(client_options or {}), **campaign}
    return {"count": count, "elapsed": elapsed, "complete": count == messages, "extra": extra}


# --- Entry point -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    scenario, client, url = args.scenario, args.client, args.base_url
    if scenario == "sequential":
        count, elapsed = sequential(sync_send(client, url), check_send, args.requests, args.seconds)
    elif scenario == "proxy":
        if args.proxy is None:
            raise Unavailable("the proxy scenario needs --proxy (run.py passes its Squid's)")
        count, elapsed = sequential(sync_send(client, url, proxy=args.proxy), check_send,
                                    args.requests, args.seconds)
    elif scenario == "threads":
        count, elapsed = threaded(sync_send(client, url), check_send, args.threads,
                                  args.requests, args.seconds)
    elif scenario == "asyncio":
        count, elapsed = concurrent(client, url, args.in_flight, args.requests, args.seconds)
    elif scenario == "list":
        count, elapsed = sequential(list_page(client, url), check_list, args.requests, args.seconds)
    elif scenario == "iter":
        return iterate(client, url, args.timeout)
    elif scenario in ("send_many", "million"):
        return send_many(url, args.messages, args.in_flight, args.timeout)
    elif scenario in ("shared_limits", "journal"):
        # The same job; what the variant adds comes from run.py as arguments.
        client_options = {"shared_limits": args.shared_limits} if args.shared_limits else {}
        campaign: dict[str, Any] = {}
        if args.campaign_id:
            campaign["campaign_id"] = args.campaign_id
        if args.rate_limit:
            campaign["rate_limit"] = args.rate_limit
        if args.journal:
            campaign["journal"] = args.journal
        return send_many(url, args.messages, args.in_flight, args.timeout, client_options,
                         campaign)
    else:
        raise Unavailable(f"unknown scenario {scenario}")
    return {"count": count, "elapsed": elapsed, "complete": True, "extra": {}}


def main() -> int:
    parser = argparse.ArgumentParser(description="one benchmark scenario (started by run.py)")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--messages", type=int, default=200_000)
    # The optional scenarios' servers and options (run.py passes them; a fresh campaign_id and
    # journal per sample).
    parser.add_argument("--proxy", help="proxy scenario: the forward proxy's URL")
    parser.add_argument("--shared-limits", help="bizmsg.Client(shared_limits=...)")
    parser.add_argument("--campaign-id")
    parser.add_argument("--rate-limit", type=float)
    parser.add_argument("--journal", help="a SQLite file's path or a postgresql:// URL")
    parser.add_argument("--watchdog", type=float, default=0.0,
                        help="after this many seconds, print every thread's stack and exit")
    args = parser.parse_args()
    if args.watchdog > 0:
        # A hung client (a deadlock in native code included: the watchdog is a C thread that
        # needs no GIL) then says where it hangs instead of just being killed.
        faulthandler.dump_traceback_later(args.watchdog, exit=True)
    result: dict[str, Any]
    try:
        result = run(args)
    except (Unavailable, ModuleNotFoundError) as why:
        result = {"unavailable": str(why)}
    except Exception:
        traceback.print_exc()
        return 1
    if "count" in result:
        result["value"] = result["count"] / result["elapsed"] if result["elapsed"] > 0 else 0.0
    # Peaks of the whole process, interpreter and imports included (KiB).
    result["maxrss_kb"] = peak_rss_kb()
    result["ru_maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["cpus"] = sorted(os.sched_getaffinity(0))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skips interpreter finalization: the measurement is over, and a client's runtime thread
    # touching the GIL during teardown (pyreqwest 0.15's async client does, at random) would
    # turn a good sample into a crash.
    os._exit(status)
