"""The messages of ``bizmsg send --file``: a CSV or JSON Lines file, read row by row as the
campaign asks for input, so memory stays bounded however long the file.

Each input row becomes the plain dict ``send_many`` takes (``to``, ``from``, ``name``,
``parameters``, ``language``, ``idempotency_key``) plus private keys the campaign ignores
and hands back on ``outcome.message`` (:func:`payload`): ``_extra`` (the row's other columns,
copied to the results) and ``_error`` (why the CLI could not read the row), with ``_to``. A row
the CLI cannot read is still given to the campaign, without a template name so that it fails
at once: every row keeps its position, which the journal relies on to resume.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO, cast

from .._native import SendOutcome
from ..models import TemplateParameters
from .status import EXIT_ERROR, EXIT_USAGE, CommandError

__all__ = ["Defaults", "InputError", "MessageFile", "format_of", "payload"]

_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}

#: Input columns with a meaning (compared without case and surrounding spaces).
_KNOWN = frozenset({"to", "from", "from_", "template", "name", "language", "parameters",
                    "params", "idempotency_key"})
_PARAM = re.compile(r"param([1-9][0-9]*)")
#: The highest N of a paramN column (a "param3000000" column would make a list that long).
_MAX_PARAMS = 1000
#: The longest CSV cell read (the csv module's default, 128 KiB, ended a whole file at one
#: long cell).
_MAX_CELL = 16 * 1024 * 1024


class InputError(CommandError):
    """The input file could not be read any further (not UTF-8, a cell past the size limit, an
    I/O error): the campaign stops taking messages and the command exits 1."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_ERROR, message)


@dataclass(frozen=True)
class Defaults:
    """What the command line gives the rows that leave it out."""

    from_: str | None
    template: str | None
    language: str | None
    parameters: TemplateParameters | None


def _known(key: str) -> str | None:
    """The meaning of an input column, if it has one: its lower-case name."""
    name = key.strip().lower()
    return name if name in _KNOWN or _PARAM.fullmatch(name) else None


def _absent(value: object) -> bool:
    """An empty CSV cell, a JSON null or an empty string all mean "not given"."""
    return value is None or (isinstance(value, str) and value.strip() == "")


class _RowError(Exception):
    """Why one row cannot become a message (the row still gets a ``failed`` result)."""


class MessageFile:
    """The messages of a CSV or JSON Lines file (``-``: stdin), read lazily."""

    def __init__(self, path: str, fmt: str, defaults: Defaults) -> None:
        self.path = path
        self.name = "stdin" if path == "-" else path
        self.format = fmt
        self.defaults = defaults
        #: Why the CLI could not read a row, by index (the first 1,000), for the dry run.
        self.row_errors: dict[int, str] = {}
        #: For a CSV input: the header's other columns, in order (copied to the results).
        self.extra_columns: list[str] = []
        self._file = self._open()
        self._header: list[str | None] = []
        self._header_lines = 0
        if fmt == "csv":
            self._read_header()

    # The file is opened at once, so that a missing file is a usage error before anything
    # is sent.
    def _open(self) -> TextIO:
        newline = "" if self.format == "csv" else None
        if self.path == "-":
            return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", newline=newline)
        try:
            return open(self.path, encoding="utf-8-sig", newline=newline)
        except OSError as error:
            raise CommandError(EXIT_USAGE, f"cannot read {self.path}: "
                                           f"{error.strerror or error}") from error

    def _read_header(self) -> None:
        try:
            first = self._file.readline()
            header, unclosed = _csv_line(first)
        except (csv.Error, UnicodeDecodeError, OSError) as error:
            raise CommandError(EXIT_USAGE, f"{self.name}: cannot read it: {error}") from error
        if not header:
            raise CommandError(EXIT_USAGE, f"{self.name} is empty: a CSV file starts with a "
                                           "header row naming its columns (to, from, ...)")
        if unclosed:
            raise CommandError(EXIT_USAGE, f"{self.name}, line 1: the header has an unclosed "
                                           "quote")
        names: list[str | None] = []
        seen: set[str] = set()
        for column in header:
            if not column.strip():
                names.append(None)  # an unnamed column (a trailing comma) is ignored
                continue
            name = _known(column) or column
            if name in seen:
                raise CommandError(EXIT_USAGE, f"{self.name}: the column {column!r} appears "
                                               "twice in the header")
            seen.add(name)
            names.append(name)
            if _known(column) is None:
                self.extra_columns.append(column)
        self._header = names
        self._header_lines = 1
        required = [("to", ("to",), None),
                    ("from", ("from", "from_"), self.defaults.from_),
                    ("template", ("template", "name"), self.defaults.template),
                    ("language", ("language",), self.defaults.language)]
        for what, columns, default in required:
            if default is None and not seen.intersection(columns):
                option = "" if what == "to" else f", or --{what} for every row"
                raise CommandError(
                    EXIT_USAGE,
                    f"{self.name} has no {what!r} column (give one{option}); its columns: "
                    + ", ".join(column for column in header if column.strip()),
                )

    def count(self) -> int | None:
        """The number of messages, for a progress bar: read once more from the start (for
        a regular file only; ``None`` when that is not possible)."""
        if self.path == "-":
            return None
        try:
            newline = "" if self.format == "csv" else None
            with open(self.path, encoding="utf-8-sig", newline=newline, errors="replace") as file:
                if self.format == "csv":
                    next(file, None)
                    return sum(1 for line in file if not _blank(line))
                return sum(1 for line in file if line.strip())
        except (OSError, csv.Error):
            return None

    def close(self) -> None:
        if self.path != "-":
            self._file.close()

    def messages(self) -> Iterator[dict[str, Any]]:
        """One message dict per row, read as the campaign asks for them."""
        rows = self._csv_rows() if self.format == "csv" else self._jsonl_rows()
        index = 0
        for line, row, refused in rows:
            try:
                if refused is not None:
                    raise _RowError(refused)
                message = self._message(row)
            except _RowError as error:
                text = f"line {line}: {error}"
                if len(self.row_errors) < 1000:
                    self.row_errors[index] = text
                # No template name: the campaign fails it at once, keeping its position.
                message = {"_error": text}
                if row.get("to") is not None:
                    message["_to"] = row["to"]
            yield message
            index += 1

    def _csv_rows(self) -> Iterator[tuple[int, dict[str, Any], str | None]]:
        """(line, the row's cells by column, why the row cannot be read or None).

        One row per line: a quote left open at the end of its line is that row's problem,
        and the next line is read as the next row. (The csv module would read on past the
        line, into the rows below, until it met another quote: rows merged into one cell of
        one message, sent as its parameters.) A cell therefore cannot span lines; text with
        line breaks goes in JSON Lines. A row with fewer cells than the header is refused too,
        rather than sent with its last columns missing."""
        if csv.field_size_limit() < _MAX_CELL:
            csv.field_size_limit(_MAX_CELL)
        header = self._header
        width = len(header)
        line = self._header_lines
        try:
            for text in self._file:
                line += 1
                if _blank(text):
                    continue
                cells, unclosed = _csv_line(text)
                row = {name: cell for name, cell in zip(header, cells) if name is not None}
                if unclosed:
                    yield line, row, ("a quote is not closed on this line (an unclosed quote?); "
                                      "a CSV cell cannot span lines")
                elif len(cells) > width and any(cell.strip() for cell in cells[width:]):
                    yield line, row, (f"the row has {len(cells)} cells but the header has "
                                      f"{width} columns")
                elif len(cells) < width and any(name is not None for name in header[len(cells):]):
                    yield line, row, (f"the row has {len(cells)} cells, fewer than the header's "
                                      f"{width} columns")
                else:
                    yield line, row, None
        except (csv.Error, UnicodeDecodeError, OSError) as error:
            # A read error comes before the line it is in was counted.
            line += 0 if isinstance(error, csv.Error) else 1
            raise InputError(f"{self.name}, line {line}: cannot read on: {error}") from error

    def _jsonl_rows(self) -> Iterator[tuple[int, dict[str, Any], str | None]]:
        """(line, the object's keys, why the line cannot be read or None)."""
        line = 0
        try:
            for line, text in enumerate(self._file, start=1):
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except ValueError as error:
                    yield line, {}, f"not JSON: {error}"
                    continue
                except RecursionError:
                    yield line, {}, "not JSON this program can read: nested too deeply"
                    continue
                if not isinstance(value, dict):
                    yield line, {}, f"not a JSON object but {type(value).__name__}"
                    continue
                row: dict[str, Any] = {}
                twice = None
                for key, item in cast("dict[str, Any]", value).items():
                    name = _known(key)
                    if name is not None and name in row:
                        twice = f"the key {name!r} is given twice"
                    row[name or key] = item
                yield line, row, twice
        except (UnicodeDecodeError, OSError) as error:
            raise InputError(f"{self.name}, line {line + 1}: cannot read on: {error}") from error

    def _message(self, row: dict[str, Any]) -> dict[str, Any]:
        """The message of one row; raises :class:`_RowError`."""
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in row.items():
            if _known(key) is not None:
                if not _absent(value):
                    fields[key] = value
            else:
                extra[key] = value
        template = fields.pop("template", None)
        if isinstance(template, dict):  # JSON Lines: {"name", "language", "parameters"}
            for key, value in cast("dict[str, Any]", template).items():
                name = {"name": "name", "language": "language", "parameters": "parameters"}.get(key)
                if name is None:
                    raise _RowError(f"template has an unknown key {key!r}")
                if not _absent(value):
                    _one(fields, name, value, f"template.{key} and {name}")
        elif template is not None:
            _one(fields, "name", template, "template and name")
        if "from_" in fields:
            _one(fields, "from", fields.pop("from_"), "from and from_")
        message: dict[str, Any] = {}
        for name, default in (("to", None), ("from", self.defaults.from_),
                              ("name", self.defaults.template),
                              ("language", self.defaults.language)):
            given = fields.get(name, default)
            if isinstance(given, int) and not isinstance(given, bool):
                given = str(given)  # JSON Lines: a number written without quotes
            if given is not None:
                message[name] = given
        message["parameters"] = self._parameters(fields)
        if "idempotency_key" in fields:
            message["idempotency_key"] = fields["idempotency_key"]
        if extra:
            message["_extra"] = extra
        return message

    def _parameters(self, fields: dict[str, Any]) -> TemplateParameters:
        numbered = {int(match.group(1)): value for key, value in fields.items()
                    if (match := _PARAM.fullmatch(key))}
        if numbered and max(numbered) > _MAX_PARAMS:
            raise _RowError(f"param{max(numbered)}: at most {_MAX_PARAMS} numbered parameters")
        given = [form for form, present in (("parameters", "parameters" in fields),
                                            ("params", "params" in fields),
                                            ("param1..paramN", bool(numbered))) if present]
        if len(given) > 1:
            raise _RowError(f"give the parameters once: {' and '.join(given)} are both given")
        if "parameters" in fields:
            parameters: TemplateParameters = fields["parameters"]
            return parameters
        if "params" in fields:
            params: Any = fields["params"]
            if isinstance(params, str):
                try:
                    params = json.loads(params)
                except ValueError as error:
                    raise _RowError(f"params is not a JSON list: {error}") from error
            if not isinstance(params, list):
                raise _RowError(f"params must be a JSON list of strings, "
                                f"not {type(params).__name__}")
            return [_param_text(value) for value in cast("list[object]", params)]
        if numbered:
            return [_param_text(numbered.get(n, "")) for n in range(1, max(numbered) + 1)]
        if self.defaults.parameters is not None:
            return self.defaults.parameters
        return []


def _blank(line: str) -> bool:
    """A line with nothing on it (the csv module reads no row from it)."""
    return not line.rstrip("\r\n")


def _csv_line(text: str) -> tuple[list[str], bool]:
    """The cells of one line of CSV, and whether a quote was left open at its end (the csv
    module then ends the last cell with the line break itself)."""
    if not text.endswith(("\n", "\r")):
        text += "\n"  # the last line of a file, so that an open quote shows the same way
    none: list[str] = []
    cells = next(csv.reader((text,)), none)
    return cells, bool(cells) and cells[-1].endswith(("\n", "\r"))


def _one(fields: dict[str, Any], key: str, value: object, what: str) -> None:
    """Sets ``fields[key]``, refusing two different values for it."""
    if key in fields and fields[key] != value:
        raise _RowError(f"{what} differ ({fields[key]!r} and {value!r}): give one")
    fields[key] = value


def _param_text(value: object) -> Any:
    """A parameter as text: numbers as written; anything else is left to the SDK's check."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def format_of(path: str, given: str | None, option: str) -> str:
    """The format of ``path``: ``given``, or from its extension."""
    if given is not None:
        return given
    extension = os.path.splitext(path)[1].lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    where = "stdin" if path == "-" else path
    raise CommandError(EXIT_USAGE, f"cannot tell the format of {where}: give {option} csv "
                                   "or jsonl (or name it .csv or .jsonl)")


def payload(outcome: SendOutcome) -> dict[str, Any] | None:
    """The message dict this module gave the campaign for ``outcome``."""
    message = outcome.message
    return cast("dict[str, Any]", message) if isinstance(message, dict) else None
