"""The ``bizmsg`` program: its parser (each command adds its own), and how what ended a
command becomes one line on stderr and an exit status."""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from .. import __version__, refresh_logging
from ..errors import (
    AuthenticationError,
    BizmsgError,
    ConfigurationError,
    SendOutcomeUnknownError,
    SendRejectedError,
    ValidationError,
)
from .demo import add_demo
from .listing import add_listings
from .sandbox import add_sandbox
from .send import add_send, reconcile_hint
from .status import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_REJECTED,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    TOKEN_HINT,
    CommandError,
)

__all__ = ["main"]

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
       base URL, a token the service refuses (401), a sandbox port in use
  3    send rejected: the service reported a failed commit (code and msg shown);
       with send --file: some messages were rejected or failed
  4    send outcome unknown: the message may or may not have been sent; the
       Idempotency-Key to reconcile with is shown; with send --file: the
       outcome of some messages is unknown
  130  interrupted (Ctrl-C)
  143  stopped by SIGTERM (systemd, Docker, Kubernetes, timeout); send --file
       stops as for Ctrl-C first

many messages from a CSV or JSON Lines file: bizmsg send --file FILE (see
bizmsg send --help: the columns, the results file, resuming with --journal)

try it without an account: run 'bizmsg sandbox', then in another terminal
  export BIZMSG_BASE_URL=http://127.0.0.1:8080 BIZMSG_TOKEN=sandbox-token-acme
  bizmsg numbers list
"""

DEBUG_HELP = "log every request to stderr (as BIZMSG_LOG=debug does) and show tracebacks"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``bizmsg`` command with ``argv`` (the process's arguments by default) and
    returns its exit status."""
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
    """The whole command line: the program's options, then each command's."""
    parser = argparse.ArgumentParser(prog="bizmsg", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"bizmsg {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Every command takes --debug too; there it keeps a --debug given before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help=DEBUG_HELP)
    commands = parser.add_subparsers(dest="command", required=True)

    add_demo(commands, common)
    add_sandbox(commands, common)
    add_send(commands, common)
    add_listings(commands, common)
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
        case ValidationError() | ConfigurationError():
            # A configuration the client or the sandbox refused (a port in use, plain http://
            # to a remote host): the command line is what needs fixing.
            return EXIT_USAGE, [f"{name}: {error}"]
        case AuthenticationError():
            # The service refused the token: a configuration error, whichever command met it.
            return EXIT_USAGE, [f"{name}: {error}; {TOKEN_HINT}"]
        case _:
            return EXIT_ERROR, [f"{name}: {error}"]
