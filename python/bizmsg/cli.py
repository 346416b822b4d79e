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
    add_commands,
    reconcile_hint,
)
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
  3    send rejected: the service reported a failed commit (code and msg shown)
  4    send outcome unknown: the message may or may not have been sent; the
       Idempotency-Key to reconcile with is shown
  130  interrupted (Ctrl-C)

try it without an account: run 'bizmsg sandbox', then in another terminal
  export BIZMSG_BASE_URL=http://127.0.0.1:8080 BIZMSG_TOKEN=sandbox-token-acme
  bizmsg numbers list
"""

DEBUG_HELP = "log every request to stderr (as BIZMSG_LOG=debug does) and show tracebacks"


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
    print("\ndone.")
    return 0


def _sandbox(args: argparse.Namespace) -> int:
    sandbox = Sandbox(
        host=args.host, port=args.port, seed=args.seed, delay=args.delay,
        accounts_per_tenant=args.accounts, tenants=args.tenant or ("acme", "globex"),
    )
    print(f"bizmsg sandbox on {sandbox.base_url}; Ctrl-C stops it.")
    for tenant, token in sandbox.tenant_tokens.items():
        print(f"  tenant {tenant}: Authorization: Bearer {token}")
    print(f"  try: curl -H 'Authorization: Bearer {sandbox.token}' "
          f"'{sandbox.base_url}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=5'")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sandbox.close()
    return 0


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
    sandbox.add_argument("--accounts", type=int, default=3, help="accounts per tenant")
    sandbox.add_argument("--tenant", action="append", help="a tenant name (repeatable)")
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
