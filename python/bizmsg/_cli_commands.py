"""The ``bizmsg`` commands that talk to the service: ``send``, ``accounts list`` and
``numbers list``, and the exit statuses of the command."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Union

from ._cli_output import (
    ACCOUNTS,
    FORMATS,
    NUMBERS,
    SEND_RESULT,
    Layout,
    Output,
    write_items,
    write_page,
    write_result,
)
from ._client import BusinessAccounts, BusinessPhoneNumbers, Client
from ._native import MAX_PAGE_SIZE
from .errors import ConfigurationError
from .models import Template, TemplateParameters

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_REJECTED", "EXIT_UNKNOWN",
           "EXIT_INTERRUPTED", "CommandError", "add_commands", "reconcile_hint"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3
EXIT_UNKNOWN = 4
EXIT_INTERRUPTED = 130

if TYPE_CHECKING:  # not subscriptable at run time
    from typing import TypeAlias

    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
Listing = Union[BusinessAccounts, BusinessPhoneNumbers]


class CommandError(Exception):
    """Ends the command with exit ``status``, after its message on stderr."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def reconcile_hint(idempotency_key: str) -> str:
    """What to do about a send that may or may not have gone out."""
    return (
        "check whether it arrived; to send it again, re-run with --idempotency-key "
        f"{idempotency_key} (a service that honours the key, as the sandbox does, then answers "
        "with the first result instead of sending twice)"
    )


def add_commands(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    """Adds ``send``, ``accounts list`` and ``numbers list``; ``common`` holds the options
    every command takes."""
    send = commands.add_parser(
        "send", parents=[common], help="send a template message",
        description="Sends a template message from one of your business phone numbers.",
        epilog=_SEND_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_message_options(send)
    _add_connection_options(send)
    _add_output_options(send, SEND_RESULT)
    send.set_defaults(run=_send)

    _add_listing(commands, common, "accounts", "business accounts, each with its numbers",
                 ACCOUNTS, lambda client: client.business_accounts, _ACCOUNTS_CSV)
    _add_listing(commands, common, "numbers", "business phone numbers", NUMBERS,
                 lambda client: client.business_phone_numbers, "")


_SEND_EPILOG = """\
exit status: 0 sent; 3 rejected: the service reported a failed commit (its code and
msg are shown); 4 outcome unknown: the message may or may not have been sent, and the
Idempotency-Key it went out with is shown, to reconcile with. Every send carries an
Idempotency-Key: a fresh one, or the one given with --idempotency-key.
"""

_LIST_EPILOG = """\
--output:
  table  the columns most people need (--columns picks others), fitted to the
         terminal (80 columns when not a terminal); a value too long for its
         column is cut with "…"
  json   the JSON the service sent (camelCase keys, unknown fields kept): one
         page is its whole envelope {{data, total, size, current, pages}}; with
         --all, one array of every item, written as the items arrive
  jsonl  one item per line, as the service sent it
  csv    a header row of column names, then one row per item; timestamps in
         ISO 8601{csv}
"""

_ACCOUNTS_CSV = """. An account's numbers are flattened into two columns:
         business_phone_numbers is how many it has and phone_number_ids their
         ids joined with ";". For one row per number, list the numbers:
         bizmsg numbers list --output csv (biz_account_id names the account)"""


def _add_listing(commands: Subcommands, common: argparse.ArgumentParser, name: str, what: str,
                 layout: Layout, resource: Callable[[Client], Listing], csv_note: str) -> None:
    group = commands.add_parser(name, help=f"your {what}",
                                description=f"Your {what}.")
    actions = group.add_subparsers(dest="action", required=True)
    listing = actions.add_parser(
        "list", parents=[common], help=f"list your {what}",
        description=f"Lists your {what}: one page, or every page with --all.",
        epilog=_LIST_EPILOG.format(csv=csv_note),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pages = listing.add_mutually_exclusive_group()
    pages.add_argument("--page", type=_int_in(1, None), default=1, metavar="N",
                       help="the page to print, from 1 (default: 1)")
    pages.add_argument("--all", action="store_true",
                       help="every page, printed as the items arrive (one page is read ahead)")
    listing.add_argument("--page-size", type=_int_in(1, MAX_PAGE_SIZE), default=100,
                         metavar="N",
                         help=f"items per request, 1 to {MAX_PAGE_SIZE} (default: 100)")
    _add_connection_options(listing)
    _add_output_options(listing, layout)
    listing.set_defaults(run=_list_command(resource, layout))


def _add_message_options(send: argparse.ArgumentParser) -> None:
    # Checked by _send rather than required by argparse: `send --file` (bulk) will take
    # the messages from a file instead.
    message = send.add_argument_group("the message (all required)")
    message.add_argument("--to", metavar="NUMBER",
                         help="the recipient's phone number: 8 to 15 digits with the country "
                              "code; +, spaces, dashes, dots and parentheses are ignored")
    message.add_argument("--from", dest="from_", metavar="NUMBER",
                         help="the CONNECTED business phone number of yours to send from")
    message.add_argument("--template", metavar="NAME", help="the template's name")
    message.add_argument("--language", metavar="CODE",
                         help="the template's language code: en, en_US, es_419, ... "
                              "(en-US is sent as en_US)")
    parameters = send.add_argument_group(
        "template parameters (--param or --parameters; none: an empty list)"
    ).add_mutually_exclusive_group()
    parameters.add_argument("--param", action="append", metavar="VALUE",
                            help="a template parameter; repeat it for each, in order; they "
                                 "are sent as a JSON list of strings")
    parameters.add_argument("--parameters", metavar="TEXT",
                            help="the template parameters as one string, sent unchanged "
                                 "(e.g. a JSON object)")
    send.add_argument("--idempotency-key", metavar="KEY",
                      help="the Idempotency-Key to send with (default: a fresh one); give "
                           "the key an interrupted or unknown send printed to re-send it")


def _add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument("--token",
                       help="the API token (default: $BIZMSG_TOKEN, which is better: a "
                            "command line is visible to other users of the machine); never "
                            "printed")
    group.add_argument("--base-url", metavar="URL",
                       help="the service's base URL, https://... (default: $BIZMSG_BASE_URL)")


def _add_output_options(parser: argparse.ArgumentParser, layout: Layout) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("-o", "--output", choices=FORMATS, default="table",
                       help="the output format (default: table)")
    group.add_argument("--columns", type=layout.pick, metavar="NAMES",
                       help="for table and csv: the columns to print, comma-separated: "
                            + ", ".join(layout.names()))


def _int_in(low: int, high: int | None) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` to ``high`` (no bound if ``None``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"from {low} up"
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text!r}")
        return value
    return parse


def _connect(args: argparse.Namespace) -> Client:
    token = args.token or os.environ.get("BIZMSG_TOKEN")
    base_url = args.base_url or os.environ.get("BIZMSG_BASE_URL")
    missing = [
        what
        for what, value in (
            ("a token (--token or $BIZMSG_TOKEN)", token),
            ("a base URL (--base-url or $BIZMSG_BASE_URL)", base_url),
        )
        if not value
    ]
    if missing:
        raise CommandError(EXIT_USAGE, "missing " + " and ".join(missing))
    try:
        return Client(token, base_url=base_url)
    except ConfigurationError as error:
        raise CommandError(EXIT_USAGE, f"{type(error).__name__}: {error}") from error


def _output(args: argparse.Namespace, layout: Layout) -> Output:
    if args.columns is not None and args.output not in ("table", "csv"):
        raise CommandError(EXIT_USAGE, f"--columns applies to --output table and csv; "
                                       f"{args.output} prints the objects as received")
    return layout.output(args.output, args.columns)


def _list_command(resource: Callable[[Client], Listing],
                  layout: Layout) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        output = _output(args, layout)
        with _connect(args) as client:
            listing = resource(client)
            if args.all:
                write_items(listing.iter(page_size=args.page_size), output, sys.stdout)
            else:
                page = listing.list(page_no=args.page, page_size=args.page_size)
                write_page(page, output, sys.stdout)
        return EXIT_OK
    return run


_MESSAGE_OPTIONS = (("--to", "to"), ("--from", "from_"), ("--template", "template"),
                    ("--language", "language"))


def _send(args: argparse.Namespace) -> int:
    missing = [option for option, dest in _MESSAGE_OPTIONS if getattr(args, dest) is None]
    if missing:
        raise CommandError(EXIT_USAGE, "send needs " + ", ".join(missing))
    output = _output(args, SEND_RESULT)
    template = Template(name=args.template, parameters=_parameters(args), language=args.language)
    # Chosen here rather than by the client so that an interrupted send can name it too.
    key = args.idempotency_key or str(uuid.uuid4())
    with _connect(args) as client:
        try:
            result = client.messages.send(to=args.to, from_=args.from_, template=template,
                                          idempotency_key=key)
        except KeyboardInterrupt as interrupt:
            raise CommandError(EXIT_INTERRUPTED, "interrupted: the message may have been "
                                                 "sent; " + reconcile_hint(key)) from interrupt
    write_result(result, output, sys.stdout)
    return EXIT_OK


def _parameters(args: argparse.Namespace) -> TemplateParameters:
    parameters: TemplateParameters = (
        args.parameters if args.parameters is not None else args.param or []
    )
    return parameters
