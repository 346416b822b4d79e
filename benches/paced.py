"""Paced campaigns against the embedded sandbox: the rate each one reaches, as a share of its
pace, and the busiest one-second window the sandbox saw (its traffic statistics, sliding, by
arrival), with the limits kept in the process and in Redis (`shared_limits=`). A measurement,
not a test: it prints Markdown tables and asserts nothing.

    python benches/paced.py                          # local and Redis, then 2 and 4 processes
    python benches/paced.py --modes local --rates 1000 --no-auto --processes ''
    python benches/paced.py --seconds 10 --messages 50000    # campaigns twice as long
    python benches/paced.py --journal --modes local --no-auto --processes ''  # with a journal

Each campaign is `send_many(messages, rate_limit=R, concurrency=64)` of distinct messages from
one sender, in a fresh sandbox (so that its busiest window is this campaign's); `pace="auto"`
runs on a HIGH number (750/s) and a STANDARD one (60/s) of a seeded account. A campaign sends
at most `--messages`, and at most `--seconds` of its pace. "Reached" is the ideal duration,
(messages - 1) / pace, over the measured one: 100 % is exactly the pace. The target:
at least 99 % of the pace at every rate up to 5,000 a second, and no window above the pace;
with `shared_limits`, the same within 2 %.

Measured as a service owns its cores (`--server pinned`, the default on two cores or more):
each sandbox is `bizmsg sandbox` in its own OS process on the last core, with Redis, and the
campaigns run on the first. `--server inprocess` runs the sandbox in this process, nothing
pinned (as before 2026-11-29): the sandbox then counts arrivals late whenever the campaign has
the core, and the busiest windows say more about the machine than about the pacer.

`--journal` gives every one-process campaign an SQLite journal of its own (a fresh file, a
`campaign_id`): its claims, dispatches and results are committed as it goes, and must not cost
it its pace.

`--modes local,shared` runs every campaign twice in a row, the limits in the process, then in a
Redis this script starts (`redis-server` on a free loopback port, no persistence, stopped by its
PID at the end). `--processes 2,4` then runs one campaign's `rate_limit` (`--processes-rate`)
shared by 2, then 4 OS processes, each its own client on the same Redis and sandbox, with the
same `campaign_id`, each sending its own part of the messages, all started together.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

HIGH, STANDARD, WARM = "14155550100", "14155550101", "14155550102"
# One account, a tier far above any run here, a HIGH and a STANDARD number (both GREEN), and a
# third number whose one message per client opens its connections before the timing starts.
SEED: dict[str, Any] = {"tenants": {"acme": [
    {"bizAccountId": "100", "name": "Paced", "chatBusinessManagerMessagingLimit": "TIER_100K",
     "businessPhoneNumbers": [
         {"phoneNumberId": "200", "displayPhoneNumber": "+1 415 555 0100", "throughput": "HIGH"},
         {"phoneNumberId": "201", "displayPhoneNumber": "+1 415 555 0101",
          "throughput": "STANDARD"},
         {"phoneNumberId": "202", "displayPhoneNumber": "+1 415 555 0102", "throughput": "HIGH"},
     ]}]}}
AUTO_PACES = {HIGH: 750.0, STANDARD: 60.0}
CONCURRENCY = 64
#: Whether one-process campaigns have a journal (`--journal`).
JOURNAL = False


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def messages(sender: str, count: int, first: int = 0) -> list[dict[str, Any]]:
    return [{"to": f"1416{i:07d}", "from": sender, "name": "n", "parameters": [str(i)],
             "language": "en"} for i in range(first, first + count)]


def warm_up(client: Any, recipient: int = 0) -> None:
    """One message from the WARM number (not a campaign's sender, so not in its busiest window),
    through the same limits as a campaign: the HTTP connection and, with `shared_limits`, the
    link to Redis are open, and the store's epoch exists for this sandbox (a store without one
    starts its first schedule a horizon, 250 ms, out: `src/limits/redis/scripts.rs` RESERVE),
    before the campaign is timed."""
    warm = [{"to": f"1417{recipient:07d}", "from": WARM, "name": "n", "parameters": ["w"],
             "language": "en"}]
    result = client.messages.send_many(warm, rate_limit=1000.0)
    if result.counts["sent"] != 1:
        raise RuntimeError(f"the warm-up message was not sent: {result!r}")


def busiest_of(traffic: dict[str, Any], sender: str) -> int:
    return max((s["busiest_second"] for s in traffic["senders"] if s["sender"] == sender),
               default=0)


# Redis ----------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes], directory: str) -> None:
    """Stops a server this script started, by its PID (SIGTERM, then SIGKILL after 10 s), and
    removes its temporary directory."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    shutil.rmtree(directory, ignore_errors=True)


class Redis:
    """redis-server on a free loopback port, nothing persisted, in a temporary directory;
    stopped by its PID (`close`)."""

    def __init__(self) -> None:
        program = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.access(program, os.X_OK):
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tempfile.mkdtemp(prefix="bizmsg-paced-redis-")
        self.log = Path(self.dir) / "redis.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [program, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--daemonize", "no"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=on_server_core)
        deadline = time.monotonic() + 15
        while not ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                text = self.log.read_text(errors="replace")[-2000:]
                self.close()
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{text}")
            time.sleep(0.05)

    def close(self) -> None:
        stop(self.process, self.dir)


# The sandbox ----------------------------------------------------------------------------------

#: Where the servers (the sandbox, Redis) and the campaigns run: `None` all unpinned in this
#: process's CPUs, the sandbox in this process (`--server inprocess`); else the core of each
#: (`--server pinned`, the default on two cores or more).
CORES: tuple[int, int] | None = None


def on_server_core() -> None:
    """A server child's first step, before it execs: the server core, for it and its threads."""
    if CORES is not None:
        os.sched_setaffinity(0, {CORES[1]})


def pin_this_process(core: int) -> None:
    """Every thread of this process (the threads a library started already, too) on `core`;
    the threads and processes started later inherit it."""
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), {core})


class SandboxProcess:
    """`bizmsg sandbox` of the SEED accounts, on a free loopback port, in its own OS process on
    the server core: it counts arrivals on a core the campaign does not share, as a service
    would. What `campaign` and `processes` use of `bizmsg.testing.Sandbox`; stopped by its PID
    (`close`)."""

    token = "sandbox-token-acme"

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="bizmsg-paced-sandbox-")
        seed = Path(self.dir) / "seed.json"
        seed.write_text(json.dumps(SEED))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = Path(self.dir) / "sandbox.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(self.port),
                 "--seed-data", str(seed), "--max-logged-requests", "0"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=on_server_core)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.traffic()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    text = self.log.read_text(errors="replace")[-2000:]
                    self.close()
                    raise RuntimeError(f"bizmsg sandbox did not start on port {self.port}:"
                                       f"\n{text}") from None
                time.sleep(0.05)

    def client(self, **options: Any) -> Any:
        import bizmsg

        return bizmsg.Client(base_url=self.base_url, token=self.token, **options)

    def traffic(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.base_url}/_sandbox/traffic", timeout=10) as answer:
            return dict(json.load(answer))

    def close(self) -> None:
        stop(self.process, self.dir)

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def fresh_sandbox() -> Any:
    """A sandbox of the SEED accounts that has seen no traffic: in its own pinned process, or in
    this one (`--server inprocess`)."""
    if CORES is not None:
        return SandboxProcess()
    from bizmsg.testing import Sandbox

    return Sandbox(seed_data=SEED)


# One process ----------------------------------------------------------------------------------

def campaign(label: str, sender: str, count: int, expected: float, shared: str | None,
             **options: Any) -> dict[str, Any]:
    """One campaign paced at `expected` a second, in a fresh sandbox, its limits in the process
    (`shared` None) or in the Redis at `shared`; its row."""
    client_options = {} if shared is None else {"shared_limits": shared}
    journal_dir = tempfile.mkdtemp(prefix="bizmsg-paced-journal-") if JOURNAL else None
    if journal_dir is not None:
        options = {**options, "journal": str(Path(journal_dir) / "campaign.db"),
                   "campaign_id": f"paced-{uuid.uuid4()}"}
    try:
        with fresh_sandbox() as sandbox, sandbox.client(**client_options) as client:
            warm_up(client)
            batch = messages(sender, count)
            started = time.monotonic()
            result = client.messages.send_many(batch, concurrency=CONCURRENCY, **options)
            took = time.monotonic() - started
            traffic = sandbox.traffic()
    finally:
        if journal_dir is not None:
            shutil.rmtree(journal_dir, ignore_errors=True)
    if JOURNAL:
        label += ", SQLite journal"
    return {"campaign": label, "limits": "local" if shared is None else "Redis",
            "pace": expected, "messages": count, "sent": result.counts["sent"], "seconds": took,
            "reached": count / took, "share": (count - 1) / expected / took,
            "busiest": busiest_of(traffic, sender)}


# Several processes ----------------------------------------------------------------------------

def worker(spec_json: str) -> int:
    """A child of `processes`: its own client on the shared Redis, warmed up; says `ready`,
    waits for `go` on stdin, sends its part, prints its times (monotonic: one clock for every
    process of the machine) as JSON."""
    spec = json.loads(spec_json)
    import bizmsg

    with bizmsg.Client(base_url=spec["base_url"], token=spec["token"],
                       shared_limits=spec["redis"]) as client:
        warm_up(client, recipient=spec["index"] + 1)
        batch = messages(HIGH, spec["count"], first=spec["first"])
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 1  # The parent went away.
        started = time.monotonic()
        result = client.messages.send_many(batch, concurrency=spec["concurrency"],
                                           rate_limit=spec["rate"],
                                           campaign_id=spec["campaign_id"])
        ended = time.monotonic()
    print(json.dumps({"started": started, "ended": ended, "counts": result.counts}), flush=True)
    return 0


def read_lines(process: subprocess.Popen[str], into: queue.Queue[tuple[int, str | None]]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        into.put((process.pid, line))
    into.put((process.pid, None))


def processes(count: int, rate: float, total: int, redis: Redis,
              timeout: float) -> dict[str, Any]:
    """One campaign of `total` messages at `rate_limit=rate`, its `campaign_id` shared by
    `count` OS processes on one Redis and one sandbox; its row."""
    per = [total // count + (1 if i < total % count else 0) for i in range(count)]
    firsts = [sum(per[:i]) for i in range(count)]
    campaign_id = f"paced-{uuid.uuid4()}"
    children: list[subprocess.Popen[str]] = []
    lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
    with fresh_sandbox() as sandbox:
        try:
            # The store's epoch for this sandbox, before any child: none of them pays for it.
            with sandbox.client(shared_limits=redis.url) as client:
                warm_up(client)
            for i in range(count):
                spec = {"base_url": sandbox.base_url, "token": sandbox.token, "redis": redis.url,
                        "index": i, "first": firsts[i], "count": per[i], "rate": rate,
                        "campaign_id": campaign_id, "concurrency": CONCURRENCY}
                child = subprocess.Popen(
                    [sys.executable, __file__, "--worker", json.dumps(spec)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                    start_new_session=True)
                children.append(child)
                threading.Thread(target=read_lines, args=(child, lines), daemon=True).start()
            deadline = time.monotonic() + timeout
            ready: set[int] = set()
            results: dict[int, dict[str, Any]] = {}

            def collect(until: float, done: set[int] | dict[int, Any], want: str) -> None:
                while len(done) < count:
                    left = until - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"{count - len(done)} of {count} processes not "
                                           f"{want} in time")
                    try:
                        pid, line = lines.get(timeout=left)
                    except queue.Empty:
                        continue
                    if line is None:
                        if pid not in done:
                            raise RuntimeError(f"process {pid} ended before it was {want} "
                                               "(see its stderr above)")
                        continue
                    if want == "ready" and line.strip() == "ready":
                        assert isinstance(done, set)
                        done.add(pid)
                    elif want == "done" and line.startswith("{"):
                        assert isinstance(done, dict)
                        done[pid] = json.loads(line)

            collect(deadline, ready, "ready")
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            collect(deadline, results, "done")
            traffic = sandbox.traffic()
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                child.wait(10)
    started = min(r["started"] for r in results.values())
    ended = max(r["ended"] for r in results.values())
    took = ended - started
    sent = sum(r["counts"]["sent"] for r in results.values())
    return {"campaign": f"rate_limit={rate:g}, {count} processes, one campaign_id",
            "limits": "Redis", "pace": rate, "messages": total, "sent": sent, "seconds": took,
            "reached": total / took, "share": (total - 1) / rate / took,
            "busiest": busiest_of(traffic, HIGH),
            "parts": [f"{r['counts']['sent']:,} in {r['ended'] - r['started']:.2f} s"
                      for r in results.values()]}


# The table ------------------------------------------------------------------------------------

HEADER = ("| campaign | limits | sent | seconds | reached/s | share of the pace | "
          "busiest 1 s window |\n|---|---|---:|---:|---:|---:|---:|")


def print_row(row: dict[str, Any]) -> None:
    over = row["busiest"] - row["pace"]
    flag = f" (over by {over:,.0f}!)" if over > 0 else ""
    print(f"| {row['campaign']} | {row['limits']} | {row['sent']:,}/{row['messages']:,} | "
          f"{row['seconds']:.2f} | {row['reached']:,.1f} | {100 * row['share']:.1f} % | "
          f"{row['busiest']:,} / {row['pace']:,.0f}{flag} |", flush=True)


def failed_row(label: str, limits: str, error: BaseException) -> None:
    print(f"| {label} | {limits} | failed: {type(error).__name__}: "
          f"{str(error).splitlines()[0] if str(error) else ''} | | | | |", flush=True)


def terminate(signum: int, frame: Any) -> None:
    # SIGTERM ends the run as Ctrl-C does: the `finally` blocks stop Redis and the children.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    global JOURNAL, CONCURRENCY, CORES
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rates", default="50,200,1000,5000",
                        help="rate_limit values, comma-separated (default: %(default)s)")
    parser.add_argument("--messages", type=int, default=25000,
                        help="at most this many messages per campaign (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="... and at most this many seconds of its pace (default: "
                             "%(default)s): 251 messages at 50/s, 25,000 at 5,000/s")
    parser.add_argument("--no-auto", action="store_true", help='skip the pace="auto" rows')
    parser.add_argument("--modes", default="local,shared",
                        help="local (limits in the process), shared (in Redis), or both, "
                             "each campaign then run in both in a row (default: %(default)s)")
    parser.add_argument("--processes", default="2,4",
                        help="process counts sharing one campaign's rate_limit through Redis; "
                             "'' for none (default: %(default)s)")
    parser.add_argument("--processes-rate", type=float, default=1000.0,
                        help="that campaign's rate_limit (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY,
                        help="send_many's concurrency (default: %(default)s)")
    parser.add_argument("--journal", action="store_true",
                        help="give each one-process campaign an SQLite journal of its own")
    parser.add_argument("--server", choices=("pinned", "inprocess"),
                        help="pinned: each sandbox in its own process on the last core (Redis "
                             "too), the campaigns on the first (the default on two cores or "
                             "more); inprocess: the sandbox in this process, nothing pinned")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    JOURNAL, CONCURRENCY = args.journal, args.concurrency
    if args.worker is not None:
        return worker(args.worker)
    cores = sorted(os.sched_getaffinity(0))
    server = args.server or ("pinned" if len(cores) >= 2 else "inprocess")
    if server == "pinned":
        if len(cores) < 2:
            parser.error("--server pinned needs two cores")
        CORES = (cores[0], cores[-1])
        pin_this_process(CORES[0])
        log(f"campaigns on core {CORES[0]}; each sandbox, and Redis, on core {CORES[1]}")
    else:
        log("the sandbox in this process, nothing pinned")
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in ("local", "shared") for m in modes):
        parser.error(f"--modes: local, shared or both, not {args.modes!r}")
    counts = [int(n) for n in args.processes.split(",") if n]

    def bounded(pace: float) -> int:
        return max(2, min(int(args.messages), int(pace * args.seconds) + 1))

    runs: list[tuple[str, str, int, float, dict[str, Any]]] = [
        (f"rate_limit={rate:g}", HIGH, bounded(rate), rate, {"rate_limit": rate})
        for rate in (float(r) for r in args.rates.split(",") if r)]
    if not args.no_auto:
        for sender, pace in AUTO_PACES.items():
            runs.append((f'pace="auto" ({pace:g}/s)', sender, bounded(pace), pace,
                         {"pace": "auto"}))

    signal.signal(signal.SIGTERM, terminate)
    redis: Redis | None = None
    failures = 0
    try:
        if "shared" in modes or counts:
            try:
                redis = Redis()
                log(f"redis-server (PID {redis.process.pid}) on {redis.url}, no persistence")
            except Exception as error:  # noqa: BLE001 - reported, the local rows still run
                log(f"shared limits not available: {error}")
        print(HEADER, flush=True)
        for label, sender, count, expected, options in runs:
            for mode in modes:
                if mode == "shared" and redis is None:
                    continue
                shared = redis.url if mode == "shared" and redis is not None else None
                try:
                    print_row(campaign(label, sender, count, expected, shared, **options))
                except Exception as error:  # noqa: BLE001 - one row, the run goes on
                    failures += 1
                    failed_row(label, "Redis" if shared else "local", error)
        if counts and redis is not None:
            total = bounded(args.processes_rate)
            print("\n| processes | limits | sent | seconds | reached/s | share of the pace | "
                  "busiest 1 s window | each process |\n"
                  "|---|---|---:|---:|---:|---:|---:|---|", flush=True)
            for count in counts:
                label = f"rate_limit={args.processes_rate:g}, {count} processes"
                try:
                    row = processes(count, args.processes_rate, total, redis,
                                    timeout=60 + 3 * total / args.processes_rate)
                except Exception as error:  # noqa: BLE001
                    failures += 1
                    print(f"| {label} | Redis | failed: {type(error).__name__}: {error} "
                          "| | | | | |", flush=True)
                    continue
                over = row["busiest"] - row["pace"]
                flag = f" (over by {over:,.0f}!)" if over > 0 else ""
                print(f"| {label} | Redis | {row['sent']:,}/{row['messages']:,} | "
                      f"{row['seconds']:.2f} | {row['reached']:,.1f} | "
                      f"{100 * row['share']:.1f} % | {row['busiest']:,} / "
                      f"{row['pace']:,.0f}{flag} | {'; '.join(row['parts'])} |", flush=True)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        if redis is not None:
            redis.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
