"""The results of ``bizmsg send --file``: one row per message (CSV or JSON Lines), written as
its outcome arrives."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from .._native import SendOutcome
from .message_file import payload
from .status import EXIT_USAGE, CommandError

__all__ = ["RESULT_COLUMNS", "Results", "open_results", "same_file"]

#: The columns of the results, in this order; the input's other columns follow.
RESULT_COLUMNS = ("index", "to", "status", "ok", "sms_id", "code", "msg", "error",
                  "idempotency_key", "duplicate_of", "reason")


class Results:
    """One row per message, written as its outcome arrives (completion order; ``index`` is
    the row's position in the input)."""

    def __init__(self, out: TextIO, fmt: str, extra_columns: list[str], own: bool) -> None:
        self._out = out
        self._format = fmt
        self._own = own
        self._extras = extra_columns
        names = [_result_name(column) for column in extra_columns]
        if fmt == "csv":
            self._csv = csv.writer(out, lineterminator="\n")
            self._csv.writerow([*RESULT_COLUMNS, *names])

    def line(self, outcome: SendOutcome) -> str | list[str]:
        """What :meth:`write` writes for ``outcome`` (made first, written in one call)."""
        record = outcome.to_record()
        message = payload(outcome)
        extra: Mapping[str, Any] = {}
        if message is not None:
            record["to"] = message.get("to", message.get("_to"))
            if message.get("_error") is not None:
                record["error"] = f"ValidationError: {message['_error']}"
            extra = message.get("_extra") or {}
        row = {column: record.get(column) for column in RESULT_COLUMNS}
        if self._format == "csv":
            return [*(_cell(row[column]) for column in RESULT_COLUMNS),
                    *(_cell(extra.get(column)) for column in self._extras)]
        row.update((_result_name(key), value) for key, value in extra.items())
        return json.dumps(row, ensure_ascii=False, default=str) + "\n"

    def write(self, line: str | list[str]) -> None:
        if isinstance(line, list):
            self._csv.writerow(line)
        else:
            self._out.write(line)

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        if self._own:
            self._out.close()
        else:
            self._out.flush()


def _result_name(column: str) -> str:
    """An input column's name in the results (``input.status`` if a result column has it)."""
    return f"input.{column}" if column in RESULT_COLUMNS else column


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def same_file(path: str, other: str) -> bool:
    if "-" in (path, other):
        return False
    try:
        return os.path.samefile(path, other)
    except OSError:  # one of them does not exist (yet)
        return os.path.abspath(path) == os.path.abspath(other)


def open_results(path: str, fmt: str) -> tuple[TextIO, bool]:
    if path == "-":
        return sys.stdout, False
    try:
        # A lone surrogate in the input (JSON allows "\udc80") is written escaped, never
        # an encoding error halfway through the results.
        return open(path, "w", encoding="utf-8", errors="backslashreplace", newline=""), True
    except OSError as error:
        raise CommandError(EXIT_USAGE, f"cannot write the results to {path}: "
                                       f"{error.strerror or error}") from error
