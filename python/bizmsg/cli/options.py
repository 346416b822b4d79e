"""What several commands share: the connection options (and the client they make), the output
options, and argparse types for numbers."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._client import Client
from ..errors import ConfigurationError
from .output import FORMATS, Layout, Output
from .status import EXIT_USAGE, CommandError

if TYPE_CHECKING:  # not subscriptable at run time
    from typing import TypeAlias

    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["Subcommands", "add_connection_options", "add_output_options", "connect", "int_in",
           "output_of", "positive"]


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument("--token",
                       help="the API token (default: $BIZMSG_TOKEN, which is better: a "
                            "command line is visible to other users of the machine); never "
                            "printed")
    group.add_argument("--base-url", metavar="URL",
                       help="the service's base URL, https://... (default: $BIZMSG_BASE_URL)")


def add_output_options(parser: argparse.ArgumentParser, layout: Layout) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("-o", "--output", choices=FORMATS,
                       help="the output format (default: table)")
    group.add_argument("--columns", type=layout.pick, metavar="NAMES",
                       help="for table and csv: the columns to print, comma-separated: "
                            + ", ".join(layout.names()))


def int_in(low: int, high: int | None) -> Callable[[str], int]:
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


def positive(text: str) -> float:
    """An argparse ``type``: a positive, finite number."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def connect(args: argparse.Namespace) -> Client:
    """The client of ``--token`` and ``--base-url`` (else the environment's); a missing or bad
    one is a usage error."""
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


def output_of(args: argparse.Namespace, layout: Layout) -> Output:
    """What ``--output`` and ``--columns`` ask for, for items of ``layout``."""
    fmt = args.output or "table"
    if args.columns is not None and fmt not in ("table", "csv"):
        raise CommandError(EXIT_USAGE, f"--columns applies to --output table and csv; "
                                       f"{fmt} prints the objects as received")
    return layout.output(fmt, args.columns)
