"""``bizmsg accounts list`` and ``bizmsg numbers list``: one page, or every page with ``--all``,
printed as a table, JSON, JSON Lines or CSV."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Union

from .._client import Client
from .._native import MAX_PAGE_SIZE
from .._resources.listings import BusinessAccounts, BusinessPhoneNumbers
from .options import add_connection_options, add_output_options, connect, int_in, output_of
from .output import ACCOUNTS, NUMBERS, Layout, write_items, write_page
from .status import EXIT_OK

if TYPE_CHECKING:
    from .options import Subcommands

__all__ = ["add_listings"]

Listing = Union[BusinessAccounts, BusinessPhoneNumbers]


def add_listings(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    """Adds ``accounts list`` and ``numbers list``; ``common`` holds the options every command
    takes."""
    _add_listing(commands, common, "accounts", "business accounts, each with its numbers",
                 ACCOUNTS, lambda client: client.business_accounts, _ACCOUNTS_CSV)
    _add_listing(commands, common, "numbers", "business phone numbers", NUMBERS,
                 lambda client: client.business_phone_numbers, "")


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
    pages.add_argument("--page", type=int_in(1, None), default=1, metavar="N",
                       help="the page to print, from 1 (default: 1)")
    pages.add_argument("--all", action="store_true",
                       help="every page, printed as the items arrive (one page is read ahead)")
    listing.add_argument("--page-size", type=int_in(1, MAX_PAGE_SIZE), default=100,
                         metavar="N",
                         help=f"items per request, 1 to {MAX_PAGE_SIZE} (default: 100)")
    add_connection_options(listing)
    add_output_options(listing, layout)
    listing.set_defaults(run=_list_command(resource, layout))


def _list_command(resource: Callable[[Client], Listing],
                  layout: Layout) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        output = output_of(args, layout)
        with connect(args) as client:
            listing = resource(client)
            if args.all:
                write_items(listing.iter(page_size=args.page_size), output, sys.stdout)
            else:
                page = listing.list(page_no=args.page, page_size=args.page_size)
                write_page(page, output, sys.stdout)
        return EXIT_OK
    return run
