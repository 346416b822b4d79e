"""bizmsg's benchmark suite: bizmsg against other Python HTTP clients doing the same work, on a
loopback nginx, in one command.

    python benches/run.py                 # 3 interleaved rounds, about 2 minutes each
    python benches/run.py --quick         # 1 short round: a smoke test, not a measurement
    python benches/run.py --only sequential,asyncio --clients bizmsg,pyreqwest
    python benches/run.py --only proxy,shared_limits,journal   # the optional scenarios

The server (nginx with fixed JSON bodies; the embedded sandbox if nginx is absent) runs pinned
to one CPU, every client scenario in a fresh subprocess pinned to the other. Results go to
benches/results/latest.{json,md,png}; the Markdown table is printed at the end. See
benches/README.md. Exit status: 0 all measured, 1 some sample failed, 2 could not start.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _ceiling
import _machine
import _procs
import _report
from _servers import (
    Postgres,
    Redis,
    Server,
    ServerError,
    Services,
    Squid,
    filesystem_of,
    find_nginx,
)
from _shared import (
    JOURNAL_MESSAGES,
    OURS,
    PEER_MODULES,
    SCENARIOS,
    SHARED_RATE_LIMIT,
    Scenario,
    needed_server,
)

BENCHES = Path(__file__).resolve().parent
WORKER = BENCHES / "_scenarios.py"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(doc.splitlines()[2:]))
    # None means "the default, or --quick's": an explicit value always wins.
    parser.add_argument("--rounds", type=int, help="interleaved rounds (3; --quick 1)")
    parser.add_argument("--seconds", type=float,
                        help="a rate sample stops after this many seconds (5; --quick 1); also "
                             "wrk's duration, rounded to whole seconds")
    parser.add_argument("--requests", type=int,
                        help="... or after this many requests (100000; --quick 5000)")
    parser.add_argument("--timeout", type=float,
                        help="bound of the fixed jobs, iter and send_many (120 s; --quick 60; "
                             "--million gets 5 times this)")
    parser.add_argument("--messages", type=int,
                        help="messages in the send_many job (200000; --quick 20000)")
    parser.add_argument("--only", help="comma-separated scenarios: "
                        + ", ".join(s.key for s in SCENARIOS if not s.optional)
                        + " (send_many brings ceiling along: it is reported as a share of wrk); "
                        "optional, run only when named here: "
                        + ", ".join(s.key for s in SCENARIOS if s.optional and s.key != "million")
                        + " (each starts the server it needs: Squid, Redis, PostgreSQL)")
    parser.add_argument("--clients", help="comma-separated clients, e.g. bizmsg,pyreqwest "
                        "(bizmsg includes its variants, bizmsg-raw and those of shared_limits "
                        "and journal; wrk and oha are the ceiling's)")
    parser.add_argument("--million", action="store_true",
                        help="also send 1,000,000 messages through send_many_iter (peak RSS)")
    parser.add_argument("--quick", action="store_true", help="1 short round: a smoke test")
    parser.add_argument("--server", choices=["auto", "nginx", "sandbox"], default="auto",
                        help="auto: nginx if installed, else the sandbox (said loudly)")
    parser.add_argument("--nginx", default=None, help="the nginx binary (default: found on PATH "
                        "or /usr/sbin/nginx)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--out", type=Path, default=BENCHES / "results",
                        help="where latest.{json,md,png} go")
    args = parser.parse_args(argv)

    def default(name: str, normal: Any, quick: Any) -> None:
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else normal)

    default("rounds", 3, 1)
    default("seconds", 5.0, 1.0)
    default("requests", 100_000, 5_000)
    default("timeout", 120.0, 60.0)
    default("messages", 200_000, 20_000)
    if args.rounds < 1 or args.seconds <= 0 or args.requests < 1 or args.messages < 1:
        parser.error("--rounds, --seconds, --requests and --messages must be positive")
    keys = {s.key for s in SCENARIOS}
    if args.only:
        wanted = {k.strip() for k in args.only.split(",") if k.strip()}
        unknown = wanted - keys
        if unknown:
            parser.error(f"unknown scenario(s) {sorted(unknown)}; known: {sorted(keys)}")
        if "send_many" in wanted:
            wanted.add("ceiling")
    else:
        wanted = {s.key for s in SCENARIOS if not s.optional}
    if args.million:
        wanted.add("million")
    args.scenarios = [s for s in SCENARIOS if s.key in wanted]
    args.client_filter = ({c.strip() for c in args.clients.split(",") if c.strip()}
                          if args.clients else None)
    return args


def selected_clients(scenario: Scenario, args: argparse.Namespace) -> list[str]:
    chosen = list(scenario.clients)
    if args.client_filter is not None:
        # "bizmsg" also selects "bizmsg-raw": both are bizmsg.
        chosen = [c for c in chosen if c in args.client_filter
                  or (c in OURS and "bizmsg" in args.client_filter)]
    return chosen


def skip_reason(scenario: Scenario, client: str, server: Server,
                services: Services) -> str | None:
    """Why this pair is not run at all (no subprocess is started for it)."""
    module = PEER_MODULES.get(client)
    if module is not None and importlib.util.find_spec(module) is None:
        return f"{client} is not installed (pip install {module})"
    if scenario.key == "iter" and server.kind != "nginx":
        return "needs nginx's 100,000-number fixtures; the sandbox fallback has 59 numbers"
    needed = needed_server(scenario.key, client)
    if needed is not None and needed in services.missing:
        return services.missing[needed]
    return None


# --- The optional scenarios: what a sample goes through, and proof that it did ------------------


class Bypassed(Exception):
    """A sample's work did not go through the server its scenario is about (a send that skipped
    the proxy, a campaign that never touched Redis or its journal): its figure is no result."""


Check = Callable[[dict[str, Any]], None]


@dataclass
class OptionalSetup:
    """One sample of an optional scenario: the client's extra arguments; the checks run on the
    measured sample, each reading what the server saw (Squid's access log, Redis's command
    count, the journal's rows) into the sample's extra and raising Bypassed if the work did not
    go through it; and what removes the sample's leftovers (its SQLite journal) in any case."""

    argv: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)


def optional_setup(scenario: Scenario, client: str, round_no: int, services: Services,
                   scratch: Path | None) -> OptionalSetup:
    setup = OptionalSetup()
    argv, checks = setup.argv, setup.checks
    if scenario.key == "proxy":
        squid = services.running["squid"]
        assert isinstance(squid, Squid)
        forwarded_before = squid.requests_forwarded()
        argv += ["--proxy", squid.proxy_url]

        def through_squid(sample: dict[str, Any]) -> None:
            forwarded = squid.requests_forwarded() - forwarded_before
            sample["extra"]["forwarded_by_squid"] = forwarded
            # The answer check and the warmup went through it too: at least every measured send.
            if forwarded < sample["count"]:
                raise Bypassed(f"Squid forwarded {forwarded:,} sends, {sample['count']:,} were "
                               f"measured: {client} did not send through the proxy")

        checks.append(through_squid)
    if scenario.key not in ("shared_limits", "journal") or client == "bizmsg":
        return setup
    # A fresh campaign per sample: no sample can meet another's messages in Redis or a journal.
    campaign_id = f"bench-{round_no}-{client}-{secrets.token_hex(3)}"
    argv += ["--campaign-id", campaign_id]
    if client in ("bizmsg-rate", "bizmsg-redis"):
        argv += ["--rate-limit", str(SHARED_RATE_LIMIT)]
    if client == "bizmsg-redis":
        redis = services.running["redis"]
        assert isinstance(redis, Redis)
        commands_before = redis.commands_processed()
        argv += ["--shared-limits", redis.url]

        def through_redis(sample: dict[str, Any]) -> None:
            # Less the INFO that asked.
            commands = redis.commands_processed() - commands_before - 1
            sample["extra"]["redis_commands"] = commands
            if commands <= 0:
                raise Bypassed("Redis ran no command during the campaign: its rate was not "
                               "kept there")

        checks.append(through_redis)
    if client == "bizmsg-sqlite":
        assert scratch is not None
        # A directory per sample: SQLite adds -wal and -shm files, bizmsg a .runs file.
        folder = scratch / campaign_id
        folder.mkdir()
        path = folder / "journal.sqlite"
        argv += ["--journal", str(path)]

        def sqlite_rows(sample: dict[str, Any]) -> None:
            journal = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                rows = int(journal.execute("SELECT count(*) FROM bizmsg_messages").fetchone()[0])
            finally:
                journal.close()
            _journal_rows(sample, rows)

        checks.append(sqlite_rows)
        setup.cleanups.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    if client == "bizmsg-postgres":
        postgres = services.running["postgres"]
        assert isinstance(postgres, Postgres)
        argv += ["--journal", postgres.url]
        commits_before = postgres.commits()

        def postgres_rows(sample: dict[str, Any]) -> None:
            # Every transaction the database committed meanwhile: the journal's (a run is
            # alone on this server), and this count's own query.
            commits = postgres.commits() - commits_before - 1
            if sample.get("elapsed"):
                sample["extra"]["commits_per_s"] = commits / sample["elapsed"]
            # The id is made above of [a-z0-9-] only: safe to write into the statement.
            rows = int(postgres.query(
                "SELECT count(*) FROM bizmsg.messages m JOIN bizmsg.campaigns c "
                f"ON c.id = m.campaign WHERE c.name = '{campaign_id}'"))
            _journal_rows(sample, rows)

        checks.append(postgres_rows)
    return setup


def _journal_rows(sample: dict[str, Any], rows: int) -> None:
    sample["extra"]["journal_rows"] = rows
    if rows < sample["count"]:
        raise Bypassed(f"the journal holds {rows:,} messages, {sample['count']:,} were sent")


def run_client(scenario: Scenario, client: str, args: argparse.Namespace, server: Server,
               pinning: _procs.Pinning, round_no: int, services: Services,
               scratch: Path | None) -> dict[str, Any]:
    """One sample, in a fresh pinned subprocess (or the load generator for the ceiling)."""
    if scenario.key == "ceiling":
        return _ceiling.run(client, server.base_url, max(1, round(args.seconds)), pinning)
    setup = optional_setup(scenario, client, round_no, services, scratch)
    try:
        sample = _run_worker(scenario, client, args, server, pinning, setup)
    finally:
        for cleanup in setup.cleanups:
            cleanup()
    return sample


def _run_worker(scenario: Scenario, client: str, args: argparse.Namespace, server: Server,
                pinning: _procs.Pinning, setup: OptionalSetup) -> dict[str, Any]:
    """The subprocess's sample, then, if it measured something, the optional scenario's checks
    that the work went through its server."""
    sample = _run_subprocess(scenario, client, args, server, pinning, setup.argv)
    if "value" not in sample:
        return sample
    try:
        for check in setup.checks:
            check(sample)
    except Bypassed as why:
        # Out of the medians; the rate it showed is only told.
        return {"error": f"not through its server: {why} (it showed "
                         f"{sample['value']:,.0f} {scenario.unit})"}
    except (OSError, ValueError, sqlite3.Error, ServerError) as error:
        return {"error": f"could not check that the work went through its server: {error}"}
    return sample


def scenario_messages(scenario: Scenario, args: argparse.Namespace) -> int:
    """Messages in a bulk-send job: --messages, but a million for million and at most
    JOURNAL_MESSAGES for journal."""
    messages = int(args.messages)
    if scenario.key == "million":
        return 1_000_000
    if scenario.key == "journal":
        return min(messages, JOURNAL_MESSAGES)
    return messages


def _run_subprocess(scenario: Scenario, client: str, args: argparse.Namespace, server: Server,
                    pinning: _procs.Pinning, extra_argv: list[str]) -> dict[str, Any]:
    timeout = args.timeout * (5 if scenario.key == "million" else 1)
    argv = [*pinning.prefix("client"), sys.executable, str(WORKER),
            "--scenario", scenario.key, "--client", client, "--base-url", server.base_url,
            "--requests", str(args.requests), "--seconds", str(args.seconds),
            "--timeout", str(timeout), "--threads", str(args.threads),
            "--in-flight", str(args.in_flight),
            "--messages", str(scenario_messages(scenario, args)), *extra_argv]
    # The subprocess bounds its own load; these bounds only catch a hung one (startup, warmup
    # and a slow client's last requests included). Its watchdog fires first and prints where
    # it hangs; the kill is the last resort.
    limit = timeout + 60 if scenario.fixed_work else args.seconds * 2 + 30
    argv += ["--watchdog", str(limit - 5)]
    process = _procs.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=BENCHES)
    try:
        out, err = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _procs.stop(process, signal.SIGKILL)
        out, err = process.communicate()
        return {"error": f"no result within {limit:.0f} s, killed: {failure(err or out)}"}
    finally:
        _procs.stop(process)
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": f"exit status {process.returncode}: {failure(err or out)}"}
    sample = dict(json.loads(line[len("RESULT "):]))
    if process.returncode != 0:
        # The result was printed, so the measurement was over: keep it, and say so.
        sample["exit_status"] = process.returncode
        sample.setdefault("extra", {})["after_result"] = failure(err)
    return sample


def failure(output: str) -> str:
    """The telling part of a failed subprocess's output: the exception or fatal error line
    (the last line of a native crash is often just "<no Python frame>"), then the tail."""
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    if not lines:
        return "(no output)"
    if lines[0].startswith("Timeout ("):
        # The watchdog's dump: the innermost frame of the main (last listed) thread.
        frames = output.strip().split("\n\n")[-1].splitlines()
        where = next((ln.strip() for ln in frames if ln.strip().startswith("File")), "?")
        return f"hung (watchdog after {lines[0][9:-2]}); main thread in {where}\n" + \
            "\n".join(lines[-15:])
    telling = next((ln for ln in reversed(lines)
                    if ln.startswith(("Fatal Python error", "Traceback"))
                    or ("Error" in ln and not ln.startswith(" "))), lines[-1])
    return telling.strip()[:300] + "\n" + "\n".join(lines[-15:])


def describe(scenario: Scenario, sample: dict[str, Any]) -> str:
    if "unavailable" in sample:
        return f"not available: {sample['unavailable']}"
    if "error" in sample:
        return "FAILED: " + str(sample["error"]).strip().splitlines()[0][:200]
    text = f"{sample['value']:>10,.0f} {scenario.unit}"
    if sample.get("maxrss_kb"):
        text += f"  (peak RSS {sample['maxrss_kb'] / 1024:.0f} MiB)"
    if not sample.get("complete", True):
        text += f"  [cut by the timeout after {sample.get('count', 0):,}]"
    if sample.get("extra", {}).get("errors"):
        text += f"  [{sample['extra']['errors']}]"
    if sample.get("exit_status"):
        text += f"  [then exited with status {sample['exit_status']}]"
    if sample.get("extra", {}).get("failures"):
        text += f"  [{sample['extra']['failures']:,} failed sends]"
    return text


def measure(args: argparse.Namespace, server: Server, pinning: _procs.Pinning,
            notes: list[str], services: Services, scratch: Path | None) -> _report.Samples:
    samples: _report.Samples = {}
    plan: list[tuple[Scenario, list[str]]] = []
    for scenario in args.scenarios:
        clients: list[str] = []
        for client in selected_clients(scenario, args):
            why = skip_reason(scenario, client, server, services)
            failed = services.failed.get(needed_server(scenario.key, client) or "")
            if failed is not None:
                # Installed but did not start: a failure of the run, not a missing tool.
                samples.setdefault(scenario.key, {})[client] = [{"error": failed, "round": 0}]
                log(f"  {scenario.key:<13} {client:<15} FAILED: {failed.splitlines()[0]}")
            elif why is None:
                clients.append(client)
            else:
                samples.setdefault(scenario.key, {})[client] = [{"unavailable": why, "round": 0}]
                notes.append(f"{scenario.key}/{client} skipped: {why}")
                log(f"  {scenario.key:<13} {client:<15} skipped: {why}")
        if clients:
            plan.append((scenario, clients))
    for round_no in range(1, args.rounds + 1):
        log(f"round {round_no}/{args.rounds}")
        for scenario, clients in plan:
            if scenario.key == "million" and round_no != args.rounds:
                continue  # a memory figure, not a rate: once is enough
            # Rotated every round: no client always runs right after the same other one.
            shift = (round_no - 1) % len(clients)
            for client in clients[shift:] + clients[:shift]:
                started = time.monotonic()
                sample = run_client(scenario, client, args, server, pinning, round_no,
                                    services, scratch)
                sample["round"] = round_no
                samples.setdefault(scenario.key, {}).setdefault(client, []).append(sample)
                log(f"  {scenario.key:<13} {client:<15} {describe(scenario, sample)}"
                    f"  [{time.monotonic() - started:.1f} s]")
                if server.process is not None and server.process.poll() is not None:
                    raise ServerError(f"the {server.kind} server died during {scenario.key}/{client}")
                for dead in services.dead():
                    raise ServerError(f"{dead} died during {scenario.key}/{client}")
    return samples


def services_description(services: Services, scratch: Path | None) -> dict[str, Any]:
    """The optional scenarios' servers for the results: what ran (version, settings), what was
    missing, what did not start."""
    described: dict[str, Any] = {
        name: {"version": service.version, "note": service.note}
        for name, service in services.running.items()}
    described.update({name: {"unavailable": why} for name, why in services.missing.items()})
    described.update({name: {"failed": why} for name, why in services.failed.items()})
    if scratch is not None:
        # bizmsg's own SQLite (rusqlite, bundled), not Python's: no version to read from here.
        described["sqlite"] = {
            "version": None,
            "note": f"a fresh journal file per sample in {scratch.parent} "
                    f"({filesystem_of(scratch)}), bizmsg's bundled SQLite"}
    return described


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _procs.install_signal_handlers()
    pinning = _procs.choose_pinning()
    notes: list[str] = []
    if not pinning.pinned:
        notes.append(pinning.note)
    log(f"pinning: {pinning.note}")
    nginx = args.nginx or find_nginx()
    kind = args.server
    if kind == "auto":
        kind = "nginx" if nginx else "sandbox"
    if kind == "sandbox":
        log("!" * 78)
        log("! nginx is not installed (or --server sandbox): using the embedded sandbox as the")
        log("! server. It does real work per request: the figures are NOT comparable with nginx's.")
        log("! Install nginx with benches/setup.sh.")
        log("!" * 78)
    machine = _machine.machine_info(BENCHES.parent)
    if machine["load_average_at_start"][0] > 0.5:
        notes.append(f"the machine was busy at the start (load average "
                     f"{machine['load_average_at_start']}): figures are noisy")
    if args.quick:
        notes.append("--quick: one short round, a smoke test; do not quote these figures")
    started = time.monotonic()
    server: Server | None = None
    services: Services | None = None
    scratch: Path | None = None
    try:
        log(f"starting {kind} (fixtures from the embedded sandbox)...")
        server = Server(kind, pinning, nginx)
        log(f"{kind} on {server.base_url}: {server.note}")
        # The optional scenarios' servers: only those the selected scenarios and clients need.
        needed = {name for scenario in args.scenarios for client in selected_clients(scenario, args)
                  if (name := needed_server(scenario.key, client)) is not None}
        if needed:
            log(f"starting {', '.join(sorted(needed))} for the optional scenarios...")
        services = Services(needed, pinning)
        for name, service in services.running.items():
            log(f"{name}: {service.note}")
        for why in [*services.missing.values(), *services.failed.values()]:
            log(f"unavailable: {why.splitlines()[0]}")
        if any(s.key == "journal" for s in args.scenarios):
            # The SQLite journals, one fresh directory per sample inside, removed after it.
            scratch = Path(tempfile.mkdtemp(prefix="bizmsg-bench-journals-"))
        samples = measure(args, server, pinning, notes, services, scratch)
        server_info = {"kind": server.kind, "note": server.note, "version": server.version(),
                       "fixture_bytes": server.fixture_sizes,
                       "cpu": pinning.server_cpu}
        services_info = services_description(services, scratch)
    except ServerError as error:
        log(f"\nerror: the benchmark server could not be used: {error}")
        return 2
    except KeyboardInterrupt:
        log("\ninterrupted: stopping every process this run started")
        return 130
    finally:
        if services is not None:
            services.close()
        if server is not None:
            server.close()
        _procs.stop_all()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]

    summary = _report.summarize(samples)
    results: dict[str, Any] = {
        "machine": machine,
        "server": server_info,
        "services": services_info,
        "tools": {"wrk": _ceiling.version("wrk"), "oha": _ceiling.version("oha")},
        "config": {"rounds": args.rounds, "seconds": args.seconds, "requests": args.requests,
                   "timeout": args.timeout, "messages": args.messages, "threads": args.threads,
                   "in_flight": args.in_flight, "quick": args.quick,
                   "pinning": pinning.note, "client_cpu": pinning.client_cpu,
                   "server_cpu": pinning.server_cpu,
                   "scenarios": [s.key for s in args.scenarios],
                   "duration_s": round(time.monotonic() - started, 1)},
        "scenarios": summary,
        "rows": _report.rows(summary),
        "notes": notes,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    why_no_png = _report.write_png(results, args.out / "latest.png")
    if why_no_png:
        notes.append(why_no_png)
    table = _report.markdown(results)
    (args.out / "latest.md").write_text(table)
    _report.write_json(results, args.out / "latest.json")
    log(f"\nwrote {args.out}/latest.json, latest.md" + ("" if why_no_png else ", latest.png")
        + f" in {results['config']['duration_s']:.0f} s\n")
    print(table)
    failed = [f"{s}/{c}" for s, cs in summary.items() for c, v in cs.items() if v["errors"]]
    if failed:
        log(f"some samples failed: {', '.join(failed)} (see Notes)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
