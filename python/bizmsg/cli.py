"""The ``bizmsg`` command: ``send``, ``accounts list`` and ``numbers list`` against the service,
``demo`` and ``sandbox`` on the embedded sandbox."""


from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence

from . import __version__, refresh_logging
from ._cli_commands import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_REJECTED,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    CommandError,
    int_in,
    add_commands,
    reconcile_hint,
)
from ._client import Client
from .errors import BizmsgError, SendOutcomeUnknownError, SendRejectedError, ValidationError
from .models import Template
from .testing import Sandbox

DESCRIPTION = """\
bizmsg: the Business Chat Messaging Service SDK. 'send', 'accounts list' and
'numbers list' talk to the service; 'demo' runs the SDK against the embedded
sandbox service; 'sandbox' serves that sandbox on a port, to try with curl or
with these commands."""

EPILOG = """\
configuration of send, accounts and numbers:
  --token or $BIZMSG_TOKEN          the API token (the variable is better: a command
                                    line is visible to other users of the machine);
                                    it is never printed, not even with --debug
  --base-url or $BIZMSG_BASE_URL    the service's base URL

exit status:
  0    success
  1    API or transport error: the service refused the request, failed, or could
       not be reached
  2    usage or configuration error: a bad option or value, a missing token or
       base URL
  3    send rejected: the service reported a failed commit (code and msg shown);
       with send --file: some messages were rejected or failed
  4    send outcome unknown: the message may or may not have been sent; the
       Idempotency-Key to reconcile with is shown; with send --file: the
       outcome of some messages is unknown
  130  interrupted (Ctrl-C)

many messages from a CSV or JSON Lines file: bizmsg send --file FILE (see
bizmsg send --help: the columns, the results file, resuming with --journal)

try it without an account: run 'bizmsg sandbox', then in another terminal
  export BIZMSG_BASE_URL=http://127.0.0.1:8080 BIZMSG_TOKEN=sandbox-token-acme
  bizmsg numbers list
"""

DEBUG_HELP = "log every request to stderr (as BIZMSG_LOG=debug does) and show tracebacks"


def _demo_campaign(sandbox: Sandbox, client: Client, sender: str) -> None:
    """The bulk sender: a plan, a campaign with a journal, and the same campaign run again,
    which sends nothing (what a restarted job would do after a crash)."""
    import tempfile

    from ._campaign import Message

    template = Template(name="spring_promo", parameters=["SPRING"], language="en")
    # 500 recipients: within the sender account's messaging tier (TIER_1K), so the plan is clean.
    messages = [Message(to=f"86138{i:08d}", from_=sender, template=template) for i in range(500)]
    messages += [messages[0], Message(to="12345", from_=sender, template=template)]
    print(f"\nA campaign of {len(messages):,} messages (one repeated, one with a bad number):")
    plan = client.messages.plan(messages)
    print(f"  plan:    {plan!r}")
    for warning in plan.warnings:
        print(f"           warning: {warning}")
    accepted = sandbox.stats()["accepted"]
    with tempfile.TemporaryDirectory() as directory:
        journal = os.path.join(directory, "spring.db")
        result = client.messages.send_many(messages, journal=journal)
        print(f"  sent:    {result!r}")
        print(f"           {result.failed()[0].error}")
        again = client.messages.send_many(messages, journal=journal)
        print(f"  re-run:  {again!r}")
    print(f"  the service accepted {sandbox.stats()['accepted'] - accepted:,} messages: "
          "none twice, the re-run sent nothing")


def _demo(args: argparse.Namespace) -> int:
    print(f"bizmsg {__version__}: starting the embedded sandbox service...")
    with Sandbox(seed=args.seed) as sandbox, sandbox.client() as client:
        print(f"  listening on {sandbox.base_url} (tenant token {sandbox.token!r})\n")

        accounts = client.business_accounts.list(page_no=1, page_size=20)
        print(f"Business accounts: {accounts.total} in {accounts.pages} page(s)")
        for account in accounts:
            print(
                f"  {account.biz_account_id}  {account.name:<24} {account.status:<8} "
                f"review={account.account_review_status} limit="
                f"{account.chat_business_manager_messaging_limit} "
                f"numbers={len(account.business_phone_numbers)}"
            )

        numbers = client.business_phone_numbers.list(page_no=1, page_size=50)
        print(f"\nBusiness phone numbers: {numbers.total}")
        for number in numbers:
            created = number.create_time.isoformat() if number.create_time else "?"
            print(
                f"  {number.phone_number_id}  {number.display_phone_number:<20} "
                f"{number.status:<12} quality={number.quality_rating:<8} created={created}"
            )

        sender = next((n for n in numbers if n.status == "CONNECTED"), None)
        if sender is None or sender.display_phone_number is None:
            print("no CONNECTED number to send from", file=sys.stderr)
            return 1
        template = Template(name="order_update", parameters=["A-1042", "tomorrow"], language="en-US")
        print(f"\nSending template {template.name!r} from {sender.display_phone_number} ...")
        result = client.messages.send(to="+86 138 0013 8000", from_=sender.display_phone_number,
                                      template=template)
        print(f"  sent: sms_id={result.sms_id} status={result.status} code={result.code} ok={result.ok}")
        if result.meta is not None:
            print(f"  request id {result.meta.request_id}, {result.meta.attempts} attempt(s), "
                  f"{result.meta.elapsed.total_seconds() * 1000:.1f} ms")
        wire = sandbox.sent_messages()[-1]
        print("  the service received:", json.dumps(wire["body"]))

        print("\nA failed commit is an exception, never a quiet result:")
        stranger = "+1 415 555 0100"  # not a number of this tenant
        try:
            client.messages.send(to="8613800138000", from_=stranger, template=template)
        except SendRejectedError as error:
            print(f"  {type(error).__name__}: code={error.code!r} msg={error.msg!r}")

        _demo_campaign(sandbox, client, sender.display_phone_number)
    print("\ndone.")
    return 0


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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(_parser(), sys.argv[1:] if argv is None else list(argv))
    if args.debug:
        _log_debug_to_stderr()
    try:
        try:
            status = int(args.run(args))
        except (BizmsgError, CommandError, KeyboardInterrupt) as error:
            status = _report(error, debug=args.debug)
        # A reader that went away is noticed here rather than by the interpreter's last flush.
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader went away (`bizmsg demo | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bizmsg", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"bizmsg {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Every command takes --debug too; there it keeps a --debug given before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help=DEBUG_HELP)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", parents=[common],
                               help="list accounts and numbers and send a template, "
                                    "on the embedded sandbox")
    demo.add_argument("--seed", type=int, default=0,
                      help="seed of the sandbox's generated data (default: 0)")
    demo.set_defaults(run=_demo)

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
    sandbox.add_argument("--max-logged-requests", type=int_in(0, None), metavar="N",
                         help="keep only the last N requests in memory (0: none), for long "
                              "runs; the counts printed on exit cover every request "
                              "(default: all are kept)")
    sandbox.set_defaults(run=_sandbox)

    add_commands(commands, common)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``. A usage error may quote the command line (``invalid
    choice: '<token>'`` when --token is put before the command): the token is cut out of what
    argparse prints."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            return parser.parse_args(argv)
    finally:
        text = printed.getvalue()
        for token in _tokens_in(argv):
            text = text.replace(token, "<token>")
        sys.stderr.write(text)


def _tokens_in(argv: Sequence[str]) -> list[str]:
    """The values of --token in ``argv``, however it is spelt: ``--token T``, ``--token=T``,
    or a prefix argparse accepts, like ``--tok T``."""
    tokens: list[str] = []
    for index, arg in enumerate(argv):
        option, equals, value = arg.partition("=")
        if len(option) < len("--tok") or not "--token".startswith(option):
            continue
        if not equals and index + 1 < len(argv):
            value = argv[index + 1]
        if value:
            tokens.append(value)
    return tokens


def _log_debug_to_stderr() -> None:
    logger = logging.getLogger("bizmsg")
    # BIZMSG_LOG may have installed a stderr handler already: one is enough.
    if not any(isinstance(handler, logging.StreamHandler) for handler in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    refresh_logging()


def _report(error: BaseException, *, debug: bool) -> int:
    """Says on stderr what ended the command (a traceback only with --debug) and returns the
    exit status."""
    if debug:
        traceback.print_exc()
    status, lines = _outcome(error)
    for line in lines:
        # One line each: an error body quoted in a message may span many (an HTML 404 page).
        print("bizmsg: " + " ".join(line.split()), file=sys.stderr)
    return status


def _outcome(error: BaseException) -> tuple[int, list[str]]:
    """The exit status for ``error`` and what to say about it."""
    name = type(error).__name__
    match error:
        case CommandError():
            return error.status, [str(error)]
        case KeyboardInterrupt():
            return EXIT_INTERRUPTED, ["interrupted"]
        case SendRejectedError():
            return EXIT_REJECTED, [f"{name}: code {error.code}: {error.msg}"]
        case SendOutcomeUnknownError():
            return EXIT_UNKNOWN, [f"{name}: {error}", reconcile_hint(error.idempotency_key)]
        case ValidationError():
            return EXIT_USAGE, [f"{name}: {error}"]
        case _:
            return EXIT_ERROR, [f"{name}: {error}"]
