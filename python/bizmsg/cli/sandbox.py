"""``bizmsg sandbox``: the embedded service on a port, until Ctrl-C or SIGTERM, with its
generated or given accounts, scripted faults and enforced limits."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING

from ..errors import ValidationError
from ..testing import Sandbox
from .options import int_in
from .status import EXIT_USAGE, CommandError

if TYPE_CHECKING:
    from .options import Subcommands

__all__ = ["add_sandbox"]


def add_sandbox(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    """Adds ``sandbox``; ``common`` holds the options every command takes."""
    sandbox = commands.add_parser("sandbox", parents=[common],
                                  help="run the sandbox service standalone")
    sandbox.add_argument("--host", default="127.0.0.1",
                         help="loopback address to listen on (default: 127.0.0.1)")
    sandbox.add_argument("--port", type=int, default=8080,
                         help="port to listen on, 0 for a free one (default: 8080)")
    sandbox.add_argument("--seed", type=int, default=0,
                         help="seed of the generated data (default: 0)")
    sandbox.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    sandbox.add_argument("--accounts", type=int,
                         help="accounts generated per tenant (default: 3)")
    sandbox.add_argument("--tenant", action="append",
                         help="a tenant name (repeatable; default: acme and globex); its "
                              "token is sandbox-token-<name>")
    sandbox.add_argument("--seed-data", metavar="FILE",
                         help="serve these accounts and numbers instead of generated ones: a "
                              'JSON file {"tenants": {"<name>": [<account>, ...]}}, accounts '
                              "and their businessPhoneNumbers as the service lists them "
                              "(missing fields get defaults; see docs/sandbox.md)")
    sandbox.add_argument("--faults", metavar="FILE",
                         help='queue the faults of this JSON file: {"seed": N, "faults": '
                              '{"<route>": [<fault>, ...]}}, routes send, business_accounts, '
                              "business_phone_numbers and *, a fault's fields those of "
                              "bizmsg.testing.Fault (see docs/sandbox.md)")
    sandbox.add_argument("--enforce-limits", action="store_true",
                         help="act like the platform: a send past its number's throughput "
                              "(STANDARD 80/s, HIGH 1000/s) is answered 429 with Retry-After, "
                              "a new recipient past the account's messaging tier is a failed "
                              "commit (code 1007)")
    sandbox.add_argument("--no-idempotency", action="store_true",
                         help="act like a service that does not deduplicate: a repeated "
                              "Idempotency-Key commits a new message")
    sandbox.add_argument("--max-logged-requests", type=int_in(0, None), metavar="N",
                         help="keep only the last N requests in memory (0: none), for long "
                              "runs; the counts printed on exit cover every request "
                              "(default: all are kept)")
    sandbox.set_defaults(run=_sandbox)


def _sandbox(args: argparse.Namespace) -> int:
    if args.seed_data is not None and (args.tenant or args.accounts is not None):
        option = "--tenant" if args.tenant else "--accounts"
        raise CommandError(EXIT_USAGE, f"--seed-data and {option} cannot be used together: "
                                       "the seed data names its own tenants and accounts")
    try:
        sandbox = Sandbox(
            host=args.host, port=args.port, seed=args.seed, delay=args.delay,
            accounts_per_tenant=3 if args.accounts is None else args.accounts,
            tenants=args.tenant or ("acme", "globex"), enforce_limits=args.enforce_limits,
            max_logged_requests=args.max_logged_requests, seed_data=args.seed_data,
            honour_idempotency_keys=not args.no_idempotency,
        )
    except OSError as error:
        raise CommandError(EXIT_USAGE, f"--seed-data {args.seed_data}: cannot read it: "
                                       f"{error.strerror or error}") from error
    except ValidationError as error:
        if error.field != "seed_data":
            raise
        raise CommandError(EXIT_USAGE, f"--seed-data {args.seed_data}: {error}") from error
    try:
        # Both ways to stop it work as soon as the banner can be read.
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
        try:
            loaded = _load(sandbox, args)
            print(f"bizmsg sandbox on {sandbox.base_url}; Ctrl-C stops it.")
            for tenant, token in sandbox.tenant_tokens.items():
                print(f"  tenant {tenant}: Authorization: Bearer {token}")
            for line in loaded:
                print(f"  {line}")
            print(f"  try: curl -H 'Authorization: Bearer {sandbox.token}' "
                  f"'{sandbox.base_url}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=5'")
            sys.stdout.flush()
            while not stop.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
        stats = sandbox.stats()
        print(f"bizmsg sandbox stopped after {stats['requests']:,} requests: "
              f"{stats['sends']:,} sends, {stats['accepted']:,} accepted, "
              f"{stats['failed_commits']:,} failed commits, {stats['replayed']:,} replayed, "
              f"{stats['throttled']:,} throttled")
        sys.stdout.flush()
    finally:
        sandbox.close()
    return 0


def _load(sandbox: Sandbox, args: argparse.Namespace) -> list[str]:
    """Queues the fault file, if any; returns the banner's lines about what was loaded."""
    lines: list[str] = []
    if args.seed_data is not None:
        lines.append(f"seed data {args.seed_data}: " + _describe_seed_data(args.seed_data))
    if args.faults is not None:
        try:
            sandbox.load_faults(args.faults)
        except OSError as error:
            raise CommandError(EXIT_USAGE, f"--faults {args.faults}: cannot read it: "
                                           f"{error.strerror or error}") from error
        except ValidationError as error:
            raise CommandError(EXIT_USAGE, f"--faults {args.faults}: {error}") from error
        lines.append(f"faults {args.faults}: " + _describe_faults(args.faults))
    if args.enforce_limits:
        lines.append("limits enforced: 429 past a number's throughput (STANDARD 80/s, HIGH "
                     "1000/s), failed commit 1007 past an account's messaging tier")
    if args.max_logged_requests is not None:
        lines.append(f"request log: the last {args.max_logged_requests:,} requests kept")
    return lines


def _describe_seed_data(path: str) -> str:
    """``2 tenants: acme (1 account, 3 numbers), ...``, from a file the sandbox accepted."""
    with open(path, encoding="utf-8") as file:
        tenants = json.load(file)["tenants"]
    parts: list[str] = []
    for tenant, accounts in tenants.items():
        numbers = sum(len(account.get("businessPhoneNumbers") or []) for account in accounts)
        parts.append(f"{tenant} ({_count(len(accounts), 'account')}, "
                     f"{_count(numbers, 'number')})")
    return f"{_count(len(tenants), 'tenant')}: " + ", ".join(parts)


def _describe_faults(path: str) -> str:
    """``3 faults queued (send 2, business_phone_numbers 1); seed 7``, from a file the
    sandbox accepted."""
    with open(path, encoding="utf-8") as file:
        plan = json.load(file)
    per_route = {route: 1 if isinstance(faults, dict) else len(faults)
                 for route, faults in plan["faults"].items()}
    text = f"{_count(sum(per_route.values()), 'fault')} queued"
    if per_route:
        text += " (" + ", ".join(f"{route} {count}" for route, count in per_route.items()) + ")"
    if plan.get("seed") is not None:
        text += f"; seed {plan['seed']}"
    return text


def _count(count: int, what: str) -> str:
    return f"{count:,} {what}" + ("" if count == 1 else "s")
