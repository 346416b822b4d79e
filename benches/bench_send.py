"""Throughput of bizmsg's send against other Python HTTP clients, measured in the same run.

Every client POSTs the same send request to the same loopback server and decodes the JSON
answer; bizmsg also validates the input, checks the send result and builds a dataclass. The
result is reported as ratios (bizmsg / peer), which mean more than absolute numbers on a shared
machine.

    python benches/bench_send.py                 # nginx if installed, else the sandbox
    python benches/bench_send.py --server sandbox --seconds 3

Peers that are not installed are skipped (pip install pyreqwest httpx aiohttp requests).
The load is bounded: each scenario stops after --requests requests or --seconds seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import bizmsg

TOKEN = "sandbox-token-acme"
SEND_PATH = "/v1/chat/messages/send"
BODY = {
    "to": "8613800138000",
    "from": "8617771459397",
    "type": "template",
    "template": {"name": "order_update", "parameters": '["A-1042"]', "language": "en_US"},
}
ANSWER = '{"smsId":"sms_1","status":"ACCEPTED","code":"0","msg":"success"}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A loopback server answering the send route: nginx, or the sandbox in a subprocess."""

    def __init__(self, kind: str) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.kind = kind
        self._dir = tempfile.mkdtemp(prefix="bizmsg-bench-")
        if kind == "nginx":
            conf = os.path.join(self._dir, "nginx.conf")
            with open(conf, "w") as f:
                f.write(
                    f"""daemon off; worker_processes 1; pid {self._dir}/nginx.pid;
error_log {self._dir}/error.log crit;
events {{ worker_connections 1024; }}
http {{
  access_log off; keepalive_requests 1000000; keepalive_timeout 60;
  client_body_temp_path {self._dir}; proxy_temp_path {self._dir};
  fastcgi_temp_path {self._dir}; uwsgi_temp_path {self._dir}; scgi_temp_path {self._dir};
  server {{
    listen 127.0.0.1:{self.port};
    location = {SEND_PATH} {{ default_type application/json; return 200 '{ANSWER}'; }}
  }}
}}
"""
                )
            self._process = subprocess.Popen(["nginx", "-c", conf, "-p", self._dir])
        else:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(self.port)],
                stdout=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError(f"the {kind} server did not start")

    def close(self) -> None:
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


@dataclass
class Peer:
    name: str
    sync_call: Callable[[], Callable[[], object]] | None
    # Made inside the event loop; returns the call and a coroutine function closing the client.
    async_call: Callable[[], tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]] | None


def peers(base_url: str) -> list[Peer]:
    url = base_url + SEND_PATH
    headers = {"Authorization": f"Bearer {TOKEN}"}
    found: list[Peer] = []

    def bizmsg_sync() -> Callable[[], object]:
        client = bizmsg.Client(TOKEN, base_url=base_url, max_retries=0)
        send = client.messages.send_template
        return lambda: send(to=BODY["to"], from_=BODY["from"], name="order_update",
                            parameters=["A-1042"], language="en_US")

    def bizmsg_async() -> tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]:
        client = bizmsg.AsyncClient(TOKEN, base_url=base_url, max_retries=0)
        send = client.messages.send_template
        return (lambda: send(to=BODY["to"], from_=BODY["from"], name="order_update",
                             parameters=["A-1042"], language="en_US")), client.aclose

    found.append(Peer("bizmsg", bizmsg_sync, bizmsg_async))

    try:
        from pyreqwest.client import ClientBuilder, SyncClientBuilder

        def pyreqwest_sync() -> Callable[[], object]:
            client = SyncClientBuilder().default_headers(headers).build()
            return lambda: client.post(url).body_json(BODY).build().send().json()

        def pyreqwest_async() -> tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]:
            client = ClientBuilder().default_headers(headers).build()

            async def call() -> object:
                response = await client.post(url).body_json(BODY).build().send()
                return await response.json()

            return call, client.close

        found.append(Peer("pyreqwest", pyreqwest_sync, pyreqwest_async))
    except ImportError:
        pass

    try:
        import httpx

        def httpx_sync() -> Callable[[], object]:
            client = httpx.Client(headers=headers)
            return lambda: client.post(url, json=BODY).json()

        def httpx_async() -> tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]:
            client = httpx.AsyncClient(headers=headers, limits=httpx.Limits(max_connections=100))

            async def call() -> object:
                return (await client.post(url, json=BODY)).json()

            return call, client.aclose

        found.append(Peer("httpx", httpx_sync, httpx_async))
    except ImportError:
        pass

    try:
        import requests

        def requests_sync() -> Callable[[], object]:
            session = requests.Session()
            session.headers.update(headers)
            return lambda: session.post(url, json=BODY).json()

        found.append(Peer("requests", requests_sync, None))
    except ImportError:
        pass

    try:
        import aiohttp

        def aiohttp_async() -> tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]:
            session = aiohttp.ClientSession(headers=headers)

            async def call() -> object:
                async with session.post(url, json=BODY) as response:
                    return await response.json()

            return call, session.close

        found.append(Peer("aiohttp", None, aiohttp_async))
    except ImportError:
        pass
    return found


def sequential(call: Callable[[], object], requests: int, seconds: float) -> float:
    for _ in range(50):
        call()
    done, start = 0, time.perf_counter()
    deadline = start + seconds
    while done < requests and time.perf_counter() < deadline:
        for _ in range(100):
            call()
        done += 100
    return done / (time.perf_counter() - start)


def threaded(call: Callable[[], object], threads: int, requests: int, seconds: float) -> float:
    for _ in range(50):
        call()
    counts = [0] * threads
    start = time.perf_counter()
    deadline = start + seconds

    def work(index: int) -> None:
        share = requests // threads
        while counts[index] < share and time.perf_counter() < deadline:
            for _ in range(20):
                call()
            counts[index] += 20

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - start)


def concurrent(make: Callable[[], tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]],
               in_flight: int, requests: int, seconds: float) -> float:
    async def main() -> float:
        call, close = make()
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
        rate = done / (time.perf_counter() - start)
        await close()
        return rate

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["auto", "nginx", "sandbox"], default="auto")
    parser.add_argument("--requests", type=int, default=20000, help="per scenario, at most")
    parser.add_argument("--seconds", type=float, default=3.0, help="per scenario, at most")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians shown")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    args = parser.parse_args()

    kind = args.server
    if kind == "auto":
        kind = "nginx" if shutil.which("nginx") else "sandbox"
    server = Server(kind)
    results: dict[str, dict[str, float]] = {}
    try:
        # Sanity: the server answers what the clients expect.
        request = urllib.request.Request(server.base_url + SEND_PATH, data=json.dumps(BODY).encode(),
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert json.load(response)["code"] == "0"
        # Rounds interleave the clients, and each figure is the median of its rounds, so
        # drift in the machine's speed (other tenants, CPU boost) hits every client alike.
        samples: dict[str, dict[str, list[float]]] = {}
        found = peers(server.base_url)
        for round_no in range(1, args.rounds + 1):
            for peer in found:
                row = samples.setdefault(peer.name, {})
                if peer.sync_call is not None:
                    row.setdefault("sequential", []).append(
                        sequential(peer.sync_call(), args.requests, args.seconds))
                    row.setdefault(f"{args.threads} threads", []).append(
                        threaded(peer.sync_call(), args.threads, args.requests, args.seconds))
                if peer.async_call is not None:
                    row.setdefault(f"async x{args.in_flight}", []).append(
                        concurrent(peer.async_call, args.in_flight, args.requests, args.seconds))
                print(f"  round {round_no}: {peer.name}: " + ", ".join(
                    f"{k} {v[-1]:,.0f}/s" for k, v in row.items()), file=sys.stderr)
        results = {name: {k: statistics.median(v) for k, v in row.items()}
                   for name, row in samples.items()}
    finally:
        server.close()

    if args.json:
        print(json.dumps({"server": kind, "results": results}, indent=2))
        return 0
    scenarios = ["sequential", f"{args.threads} threads", f"async x{args.in_flight}"]
    print(f"\nsends per second against {kind} on loopback, median of {args.rounds} interleaved "
          f"rounds (higher is better)\n")
    print(f"{'client':<12}" + "".join(f"{s:>16}" for s in scenarios))
    for name, row in results.items():
        print(f"{name:<12}" + "".join(
            f"{row[s]:>16,.0f}" if s in row else f"{'-':>16}" for s in scenarios))
    ours = results["bizmsg"]
    print("\nbizmsg / peer (above 1.00: bizmsg is faster)\n")
    for name, row in results.items():
        if name == "bizmsg":
            continue
        print(f"{name:<12}" + "".join(
            f"{ours[s] / row[s]:>16.2f}" if s in row and s in ours else f"{'-':>16}"
            for s in scenarios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
