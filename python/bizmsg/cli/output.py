"""What the ``bizmsg`` command prints: ``table``, ``json``, ``jsonl`` and ``csv``.

Items are written one by one as they come, never collected first, so that a listing of any
length streams in bounded memory. For that reason a table's column widths come from a fixed
layout (and the terminal's width), never from the rows.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import shutil
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any, TextIO, Union

from ..models import BusinessAccount, BusinessPhoneNumber, Page, SendResult

__all__ = ["FORMATS", "Column", "Layout", "Output", "NUMBERS", "ACCOUNTS", "SEND_RESULT",
           "write_items", "write_page", "write_result"]

Item = Union[BusinessAccount, BusinessPhoneNumber, SendResult]

FORMATS = ("table", "json", "jsonl", "csv")

_GAP = "  "
#: The narrowest a column is made to fit the terminal: three characters and "…".
_MIN_WIDTH = 4


@dataclass(frozen=True)
class Column:
    """One column of table and csv output.

    ``name`` is what ``--columns`` takes and the csv header (a dataclass field, or a value
    derived from one); ``header`` and ``width`` are the table's.
    """

    name: str
    header: str
    width: int
    value: Callable[[Any], object]

    def text(self, item: Item) -> str:
        return _text(self.value(item))


def _field(name: str, header: str, width: int) -> Column:
    return Column(name, header, width, attrgetter(name))


def _number_count(account: BusinessAccount) -> int:
    return len(account.business_phone_numbers)


def _number_ids(account: BusinessAccount) -> str:
    return ";".join(number.phone_number_id for number in account.business_phone_numbers)


@dataclass(frozen=True)
class Layout:
    """The columns of one kind of item: all of them (csv's default, in this order) and the
    ones a table shows unless ``--columns`` says otherwise."""

    columns: tuple[Column, ...]
    table: tuple[str, ...]

    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def pick(self, names: str) -> tuple[Column, ...]:
        """The columns named in ``names`` (comma-separated), in that order; the ``type`` of
        ``--columns``, so an unknown name is a usage error that lists the choices."""
        by_name = {column.name: column for column in self.columns}
        picked = [name.strip() for name in names.split(",") if name.strip()]
        unknown = [name for name in picked if name not in by_name]
        if unknown or not picked:
            what = f"unknown column {unknown[0]!r}" if unknown else "no column named"
            raise argparse.ArgumentTypeError(f"{what}; choose from {', '.join(by_name)}")
        return tuple(by_name[name] for name in picked)

    def output(self, fmt: str, columns: tuple[Column, ...] | None) -> Output:
        """What to print for ``--output fmt`` and the columns picked (if any)."""
        if columns is None:
            columns = self.pick(",".join(self.table)) if fmt == "table" else self.columns
        return Output(fmt, columns)


# Widths: ids have 15 digits, timestamps are ISO 8601 with milliseconds and an offset (29
# characters), enumerations are as long as their longest documented value.
NUMBERS = Layout(
    columns=(
        _field("biz_account_id", "BIZ_ACCOUNT_ID", 15),
        _field("phone_number_id", "PHONE_NUMBER_ID", 15),
        _field("display_phone_number", "DISPLAY_NUMBER", 20),
        _field("verified_name", "VERIFIED_NAME", 24),
        _field("status", "STATUS", 12),
        _field("quality_rating", "QUALITY", 7),
        _field("code_verification_status", "CODE_VERIFICATION", 17),
        _field("throughput", "THROUGHPUT", 10),
        _field("messaging_limit_tier", "TIER", 9),
        _field("create_time", "CREATED", 29),
        _field("update_time", "UPDATED", 29),
    ),
    table=("phone_number_id", "display_phone_number", "status", "quality_rating",
           "messaging_limit_tier"),
)

# An account's numbers are flattened as `Page.to_pandas()` does: `business_phone_numbers` is
# their count and `phone_number_ids` their ids (here joined with ";").
ACCOUNTS = Layout(
    columns=(
        _field("biz_account_id", "BIZ_ACCOUNT_ID", 15),
        _field("name", "NAME", 26),
        _field("status", "STATUS", 8),
        _field("business_verification_status", "VERIFICATION", 12),
        _field("account_review_status", "REVIEW", 8),
        _field("chat_business_manager_messaging_limit", "LIMIT", 9),
        Column("business_phone_numbers", "NUMBERS", 7, _number_count),
        Column("phone_number_ids", "PHONE_NUMBER_IDS", 31, _number_ids),
        _field("create_time", "CREATED", 29),
        _field("update_time", "UPDATED", 29),
    ),
    table=("biz_account_id", "name", "status", "chat_business_manager_messaging_limit",
           "business_phone_numbers"),
)

SEND_RESULT = Layout(
    columns=(
        _field("sms_id", "SMS_ID", 24),
        _field("status", "STATUS", 8),
        _field("code", "CODE", 6),
        _field("msg", "MSG", 30),
    ),
    table=("sms_id", "status", "code", "msg"),
)


@dataclass(frozen=True)
class Output:
    """How to print: the format and, for table and csv, the columns."""

    format: str
    columns: tuple[Column, ...]


def write_items(items: Iterable[Item], output: Output, out: TextIO) -> None:
    """Writes each item as it comes; ``json`` is then one array, written element by element.
    Nothing is written before the first item arrived (or the listing turned out empty), so a
    listing that fails at once (a refused token) prints its error alone."""
    items = _first_fetched(items)
    if output.format == "json":
        _write_json_array(items, out)
    elif output.format == "jsonl":
        for item in items:
            out.write(_one_line(item.to_dict()) + "\n")
    elif output.format == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([column.name for column in output.columns])
        for item in items:
            writer.writerow([column.text(item) for column in output.columns])
    else:
        table = _Table(output.columns, shutil.get_terminal_size().columns)
        out.write(table.header())
        for item in items:
            out.write(table.row(item))


def _first_fetched(items: Iterable[Item]) -> Iterable[Item]:
    iterator = iter(items)
    for first in iterator:
        return itertools.chain((first,), iterator)
    return ()


def write_page(page: Page[Any], output: Output, out: TextIO) -> None:
    """One page: ``json`` is the whole envelope as received; the other formats are its items,
    and a table ends with where the page is in the listing."""
    if output.format == "json":
        _write_json(page.to_dict(), out)
        return
    write_items(page.data, output, out)
    if output.format == "table":
        out.write(_page_footer(page) + "\n")


def write_result(result: SendResult, output: Output, out: TextIO) -> None:
    if output.format == "json":
        _write_json(result.to_dict(), out)
    else:
        write_items([result], output, out)


def _write_json(value: object, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _one_line(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _write_json_array(items: Iterable[Item], out: TextIO) -> None:
    empty = True
    for item in items:
        out.write(("[\n  " if empty else ",\n  ") + _one_line(item.to_dict()))
        empty = False
    out.write("[]\n" if empty else "\n]\n")


def _page_footer(page: Page[Any]) -> str:
    parts = [f"page {page.current}" + ("" if page.pages is None else f" of {page.pages}")]
    if page.total is not None:
        parts.append(f"{page.total} in total")
    if page.has_next_page():
        parts.append(f"next: --page {page.current + 1}, or every page: --all")
    return "(" + "; ".join(parts) + ")"


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    return str(value)


class _Table:
    """Rows of fixed-width cells, fitted to ``room`` terminal columns."""

    def __init__(self, columns: Sequence[Column], room: int) -> None:
        self._columns = columns
        self._widths = _fit([max(c.width, len(c.header)) for c in columns], room)

    def header(self) -> str:
        return self._line([column.header for column in self._columns])

    def row(self, item: Item) -> str:
        return self._line([column.text(item) for column in self._columns])

    def _line(self, cells: Sequence[str]) -> str:
        line = _GAP.join(_cell(text, width) for text, width in zip(cells, self._widths))
        return line.rstrip() + "\n"


def _fit(widths: list[int], room: int) -> list[int]:
    """Narrows the widest column, one character at a time, until a row fits in ``room`` or
    every column is down to the minimum."""
    widths = list(widths)
    while sum(widths) + len(_GAP) * (len(widths) - 1) > room:
        widest = max(range(len(widths)), key=widths.__getitem__)
        if widths[widest] <= _MIN_WIDTH:
            break
        widths[widest] -= 1
    return widths


def _cell(text: str, width: int) -> str:
    """``text`` in exactly ``width`` terminal columns: cut with "…" when longer, padded with
    spaces when shorter. Control characters (a service's value could carry terminal escape
    sequences or line breaks) are shown as "?"."""
    if text.isascii() and text.isprintable():  # the common case: one column per character
        if len(text) > width:
            text = text[: width - 1] + "…"
        return text.ljust(width)
    shown: list[str] = []
    used = 0
    for char in text:
        char = "?" if unicodedata.category(char).startswith("C") else char
        char_width = _char_width(char)
        if used + char_width > width:
            while used > width - 1:  # make room for the "…"
                used -= _char_width(shown.pop())
            shown.append("…")
            used += 1
            break
        shown.append(char)
        used += char_width
    return "".join(shown) + " " * (width - used)


def _char_width(char: str) -> int:
    """Terminal columns taken by ``char``: two for East Asian wide characters, none for a
    combining mark."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
