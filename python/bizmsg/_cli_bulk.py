"""``bizmsg send --file``: many messages from a CSV or JSON Lines file, sent as one campaign
through ``client.messages.send_many_iter``.

The file is read lazily (the campaign pulls rows as its queue runs low) and each outcome is
written to the results as it arrives, so memory stays bounded however long the file. Only the
CLI imports this module, and only for ``--file``.

Each input row becomes the plain dict ``send_many`` takes (``to``, ``from``, ``name``,
``parameters``, ``language``, ``idempotency_key``) plus two private keys the campaign ignores
and hands back on ``outcome.message``: ``_extra`` (the row's other columns, copied to the
results) and ``_error`` (why the CLI could not read the row). A row the CLI cannot read is
still given to the campaign, without a template name so that it fails at once: every row keeps
its position, which the journal relies on to resume.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import logging
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any, TextIO, cast

from ._campaign import STATUSES, CampaignPlan
from ._cli_commands import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    CommandError,
)
from ._client import Client
from ._native import SendOutcome
from .errors import BizmsgError
from .models import TemplateParameters

__all__ = ["Defaults", "send_file"]

_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}

#: The columns of the results, in this order; the input's other columns follow.
RESULT_COLUMNS = ("index", "to", "status", "ok", "sms_id", "code", "msg", "error",
                  "idempotency_key", "duplicate_of", "reason")

#: Input columns with a meaning (compared without case and surrounding spaces).
_KNOWN = frozenset({"to", "from", "from_", "template", "name", "language", "parameters",
                    "params", "idempotency_key"})
_PARAM = re.compile(r"param([1-9][0-9]*)")
#: The highest N of a paramN column (a "param3000000" column would make a list that long).
_MAX_PARAMS = 1000
#: The longest CSV cell read (the csv module's default, 128 KiB, ended a whole file at one
#: long cell).
_MAX_CELL = 16 * 1024 * 1024

#: Messages not sent that are listed on stderr when there is no results file.
_LISTED = 20
#: Campaign warnings shown on stderr (then they are only counted).
_WARNINGS_SHOWN = 20
#: Rows the dry run lists per kind of problem.
_PLAN_LISTED = 10


class InputError(CommandError):
    """The input file could not be read any further (not UTF-8, a broken CSV quote, an I/O
    error): the campaign stops taking messages and the command exits 1."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_ERROR, message)


# --- reading the messages ----------------------------------------------------------------------


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
        reader = csv.reader(self._file)
        try:
            header = next(reader, None)
        except (csv.Error, UnicodeDecodeError, OSError) as error:
            raise CommandError(EXIT_USAGE, f"{self.name}: cannot read it: {error}") from error
        if not header:
            raise CommandError(EXIT_USAGE, f"{self.name} is empty: a CSV file starts with a "
                                           "header row naming its columns (to, from, ...)")
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
        self._header_lines = reader.line_num
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
                    rows = csv.reader(file)
                    next(rows, None)
                    return sum(1 for row in rows if row)
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
        """(line, the row's cells by column, why the row cannot be read or None)."""
        if csv.field_size_limit() < _MAX_CELL:
            csv.field_size_limit(_MAX_CELL)
        reader = csv.reader(self._file)
        width = len(self._header)
        try:
            for cells in reader:
                line = self._header_lines + reader.line_num
                if not cells:
                    continue  # a blank line
                row = {name: cell for name, cell in zip(self._header, cells) if name is not None}
                if len(cells) > width and any(cell.strip() for cell in cells[width:]):
                    yield line, row, (f"the row has {len(cells)} cells but the header has "
                                      f"{width} columns")
                    continue
                yield line, row, None
        except (csv.Error, UnicodeDecodeError, OSError) as error:
            # The csv module counts the line it could not parse; a read error comes before
            # the next line is counted.
            line = self._header_lines + reader.line_num + (0 if isinstance(error, csv.Error)
                                                            else 1)
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


class _Sized:
    """The messages with a length, so that the progress bar shows a total."""

    def __init__(self, messages: Iterator[dict[str, Any]], total: int) -> None:
        self._messages = messages
        self._total = total

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._messages

    def __len__(self) -> int:
        return self._total


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


# --- writing the results -----------------------------------------------------------------------


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
        message = _payload(outcome)
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


def _payload(outcome: SendOutcome) -> dict[str, Any] | None:
    """The message dict this module gave the campaign for ``outcome``."""
    message = outcome.message
    return cast("dict[str, Any]", message) if isinstance(message, dict) else None


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


def _same_file(path: str, other: str) -> bool:
    if "-" in (path, other):
        return False
    try:
        return os.path.samefile(path, other)
    except OSError:  # one of them does not exist (yet)
        return os.path.abspath(path) == os.path.abspath(other)


def _open_results(path: str, fmt: str) -> tuple[TextIO, bool]:
    if path == "-":
        return sys.stdout, False
    try:
        # A lone surrogate in the input (JSON allows "\udc80") is written escaped, never
        # an encoding error halfway through the results.
        return open(path, "w", encoding="utf-8", errors="backslashreplace", newline=""), True
    except OSError as error:
        raise CommandError(EXIT_USAGE, f"cannot write the results to {path}: "
                                       f"{error.strerror or error}") from error


# --- what the command says -----------------------------------------------------------------------


class Tally:
    """Counts of what happened, and the first messages not sent (for stderr)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.duplicates = 0
        self.done_before = 0
        self.not_taken = 0
        self.stop_reason: str | None = None
        self.not_sent: list[str] = []
        self.started = time.monotonic()

    def add(self, outcome: SendOutcome) -> None:
        status = outcome.status
        self.counts[status] += 1
        if status == "skipped":
            reason = outcome.reason or ""
            if outcome.duplicate_of is not None:
                self.duplicates += 1
            elif "earlier run" in reason:
                self.done_before += 1
            elif reason.startswith("not sent"):
                self.not_taken += 1
                if self.stop_reason is None and "stopped" in reason:
                    self.stop_reason = reason
        elif status != "sent" and len(self.not_sent) < _LISTED:
            self.not_sent.append(_describe(outcome))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self, interrupted: bool) -> str:
        """The one line that ends every bulk send."""
        elapsed = time.monotonic() - self.started
        rate = self.total / elapsed if elapsed > 0 else 0.0
        counts = ", ".join(f"{status} {self.counts[status]:,}" for status in STATUSES)
        why = [f"{count:,} {what}" for count, what in (
            (self.duplicates, "duplicates"), (self.done_before, "done by an earlier run"),
            (self.not_taken, "not sent as the campaign stopped")) if count]
        if why:
            counts += f" ({', '.join(why)})"
        start = "interrupted after " if interrupted else ""
        return (f"bizmsg: {start}{self.total:,} messages in {elapsed:.1f}s ({rate:,.0f}/s): "
                f"{counts}")

    def status(self) -> int:
        """0 when every message was sent or skipped; 4 if any outcome is unknown, else 3 if
        any was rejected or failed."""
        if self.counts["unknown"]:
            return EXIT_UNKNOWN
        if self.counts["rejected"] or self.counts["failed"]:
            return EXIT_REJECTED
        return EXIT_OK


def _describe(outcome: SendOutcome) -> str:
    """One line about a message that was not sent."""
    message = _payload(outcome) or {}
    to = message.get("to", message.get("_to"))
    what = f"#{outcome.index}" + (f" to {to}" if to is not None else "")
    if message.get("_error") is not None:
        return f"{what}: failed: ValidationError: {message['_error']}"
    record = outcome.to_record()
    detail = record.get("error") or record.get("reason") or ""
    if outcome.status == "unknown":
        detail += f" (Idempotency-Key {outcome.idempotency_key})"
    return f"{what}: {outcome.status}: {detail}"


class _CampaignWarnings(logging.Handler):
    """Shows the campaign's warnings (a messaging tier passed, a sender rated RED, ...) on
    stderr: the records of the ``bizmsg`` logger that start with ``campaign: ``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # pragma: no cover - a broken record is not ours to report
            return
        if not text.startswith("campaign: "):
            return
        self.seen += 1
        if self.seen <= _WARNINGS_SHOWN:
            print("bizmsg: warning: " + " ".join(text[len("campaign: "):].split()),
                  file=sys.stderr, flush=True)
        elif self.seen == _WARNINGS_SHOWN + 1:
            print("bizmsg: further warnings are not shown (--debug shows them all)",
                  file=sys.stderr, flush=True)


def _progress(args: argparse.Namespace) -> bool:
    """A progress bar on stderr: on a terminal, when tqdm is installed, unless refused."""
    if args.no_progress or not sys.stderr.isatty():
        return False
    return importlib.util.find_spec("tqdm") is not None


# --- the command ---------------------------------------------------------------------------------


def send_file(args: argparse.Namespace, client: Client, defaults: Defaults) -> int:
    """``bizmsg send --file``: returns the exit status."""
    source = MessageFile(args.file, format_of(args.file, args.format, "--format"), defaults)
    try:
        if args.dry_run:
            return _dry_run(args, client, source)
        return _send(args, client, source)
    finally:
        source.close()


def _dry_run(args: argparse.Namespace, client: Client, source: MessageFile) -> int:
    plan = client.messages.plan(source.messages(), rate_limit=args.rate, pace=args.pace,
                                dedupe=not args.no_dedupe)
    write_plan(plan, source, sys.stdout)
    return EXIT_OK if plan.ok else EXIT_REJECTED


def write_plan(plan: CampaignPlan, source: MessageFile, out: IO[str]) -> None:
    """The dry run's report: what would be sent, and what stands in the way."""
    def say(line: str = "") -> None:
        out.write(line + "\n")

    say(f"dry run of {source.name}: nothing was sent")
    say(f"  messages    {plan.total:>9,}")
    say(f"  invalid     {plan.invalid_count:>9,}")
    say(f"  duplicates  {plan.duplicate_count:>9,}" + ("  (--no-dedupe sends them)"
                                                       if plan.duplicate_count else ""))
    say(f"  to send     {plan.to_send:>9,}")
    if plan.invalid_count:
        say(f"invalid messages (#index: why; {min(plan.invalid_count, _PLAN_LISTED)} of "
            f"{plan.invalid_count:,}):")
        for index, error in plan.invalid[:_PLAN_LISTED]:
            why = source.row_errors.get(index)
            say(f"  #{index}: " + ("ValidationError: " + why if why is not None
                                   else f"{type(error).__name__}: {error}"))
    if plan.duplicate_count:
        say(f"duplicates (#index repeats #index; {min(plan.duplicate_count, _PLAN_LISTED)} "
            f"of {plan.duplicate_count:,}):")
        for index, original in plan.duplicates[:_PLAN_LISTED]:
            say(f"  #{index} repeats #{original}")
    problems = [sender for sender in plan.senders if sender.problem is not None]
    say(f"senders: {len(plan.senders)}, {len(problems)} with a problem")
    for sender in plan.senders:
        state = " ".join(value for value in (sender.status, sender.quality_rating,
                                             sender.throughput) if value)
        pace = f"{sender.pace:g}/s" if sender.pace is not None else "none"
        listed = state if sender.listed else "NOT A NUMBER OF THIS ACCOUNT"
        say(f"  {sender.sender:<15}  {_plural(sender.messages, 'message'):>14}  {listed}  "
            f"(--pace auto: {pace})")
        if sender.problem is not None:
            say(f"    problem: {sender.problem}")
        if sender.warning is not None:
            say(f"    warning: {sender.warning}")
    over = [account for account in plan.accounts if account.over_tier]
    say(f"accounts: {len(plan.accounts)}, {len(over)} past the messaging tier "
        "(unique recipients per rolling 24 h)")
    for account in plan.accounts:
        limit = "no limit" if account.limit is None else f"limit {account.limit:,}"
        mark = "  PAST THE TIER" if account.over_tier else ""
        say(f"  {account.account_id}  {account.name or ''}  {account.tier or '?'} ({limit}): "
            f"{_plural(account.unique_recipients, 'recipient')}{mark}")
    for warning in plan.warnings:
        say(f"warning: {warning}")
    if plan.estimated_duration is None:
        say("estimated duration: unknown (unpaced: --rate or --pace auto would pace it)")
    else:
        say(f"estimated duration: {_duration(plan.estimated_duration.total_seconds())} "
            "at the chosen pace")
    if plan.ok:
        say(f"plan OK: {plan.to_send:,} message(s) would be sent")
    else:
        reasons = [f"{count:,} {what}" for count, what in (
            (plan.invalid_count, "invalid message(s)"),
            (len(problems), "sender(s) with a problem"),
            (len(over), "account(s) past the messaging tier")) if count]
        say("plan NOT OK: " + ", ".join(reasons))


def _plural(count: int, what: str) -> str:
    return f"{count:,} {what}" + ("" if count == 1 else "s")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.1f}s"
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def _send(args: argparse.Namespace, client: Client, source: MessageFile) -> int:
    results: Results | None = None
    if args.results is not None:
        for option, other in (("--file", args.file), ("--journal", args.journal)):
            if other is not None and _same_file(args.results, other):
                raise CommandError(EXIT_USAGE, f"--results and {option} name the same file: "
                                               "the results would overwrite it")
        if args.results == "-" and args.results_format is None:
            fmt = source.format
        else:
            fmt = format_of(args.results, args.results_format, "--results-format")
        out, own = _open_results(args.results, fmt)
        results = Results(out, fmt, source.extra_columns if source.format == "csv" else [],
                          own)
    progress = _progress(args)
    messages: Any = source.messages()
    if progress:
        total = source.count()
        if total is not None:
            messages = _Sized(messages, total)
    warnings = _CampaignWarnings()
    logger = logging.getLogger("bizmsg")
    if not args.debug:
        logger.addHandler(warnings)
    tally = Tally()
    # The outcomes of a batch are yielded right after on_result is told of it: the results
    # are flushed once that batch is written, so a reader (or a crash) sees them promptly.
    unflushed = [0]

    def arrived(batch: list[SendOutcome]) -> None:
        unflushed[0] += len(batch)

    try:
        outcomes = client.messages.send_many_iter(
            messages, concurrency=args.concurrency, rate_limit=args.rate, pace=args.pace,
            progress=progress, on_result=arrived, stop_on_error=args.stop_on_error,
            journal=args.journal, campaign_id=args.campaign_id, dedupe=not args.no_dedupe,
            resend_unknown=args.resend_unknown,
        )
        end = _consume(outcomes, results, tally, unflushed)
    finally:
        logger.removeHandler(warnings)
        if results is not None:
            try:
                results.close()
            except OSError:
                pass
    print(tally.summary(end.interrupted), file=sys.stderr)
    _explain(args, tally, results is not None, end)
    if end.failure is not None:
        print(f"bizmsg: {_failure_text(end.failure)}", file=sys.stderr)
        return EXIT_ERROR
    if end.interrupted:
        return EXIT_INTERRUPTED
    return tally.status()


@dataclass
class _End:
    """How the campaign ended: interrupted (Ctrl-C), failed (what ended it), and whether
    every outcome was written (not so when Ctrl-C landed outside the campaign's wait)."""

    interrupted: bool = False
    failure: BaseException | None = None
    complete: bool = True


def _consume(outcomes: Iterator[SendOutcome], results: Results | None, tally: Tally,
             unflushed: list[int]) -> _End:
    """Writes each outcome as it arrives, and says how the campaign ended.

    Ctrl-C nearly always arrives while the campaign waits for answers: it then stops taking
    messages, lets those in flight finish, yields their outcomes and raises KeyboardInterrupt
    (with ``bulk_result``) at the end. One that lands here, for instance while an outcome is
    written, is thrown into the campaign, with the same effect: every outcome is written.
    """
    # A Ctrl-C that lands here, outside the campaign's wait, is handed to the campaign
    # (thrown into send_many_iter), which then behaves as if it had landed in its wait.
    thrown: KeyboardInterrupt | None = None
    throw = getattr(outcomes, "throw", None)
    while True:
        try:
            if thrown is not None and throw is not None:
                interrupt, thrown = thrown, None
                outcome = throw(interrupt)
            else:
                outcome = next(outcomes)
        except StopIteration:
            return _End()
        except KeyboardInterrupt as interrupt:
            return _End(interrupted=True, complete=hasattr(interrupt, "bulk_result"))
        except (BizmsgError, CommandError) as error:  # the campaign itself failed
            return _End(failure=error)
        counted = written = False
        try:
            tally.add(outcome)
            counted = True
            if results is not None:
                results.write(results.line(outcome))
                written = True
                unflushed[0] -= 1
                if unflushed[0] <= 0:
                    results.flush()
        except KeyboardInterrupt as interrupt:
            if not counted:
                tally.add(outcome)
            if results is not None and not written:
                results.write(results.line(outcome))
            if throw is None:
                _stop(outcomes)
                return _End(interrupted=True, complete=False)
            thrown = interrupt
        except OSError as error:
            # The results cannot be written (a full disk, a closed pipe): stop sending.
            if isinstance(error, BrokenPipeError):
                _silence_stdout()
            _stop(outcomes)
            return _End(failure=CommandError(EXIT_ERROR, f"cannot write the results: {error}; "
                                                         "the campaign was stopped"),
                        complete=False)


def _stop(outcomes: Iterator[SendOutcome]) -> None:
    """Stops the campaign: no new message is taken and those in flight finish (Ctrl-C
    again abandons them)."""
    close = getattr(outcomes, "close", None)
    if close is not None:
        try:
            close()
        except KeyboardInterrupt:
            pass


def _silence_stdout() -> None:
    """After the results' reader went away: later writes to stdout go nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover
        pass


def _failure_text(error: BaseException) -> str:
    if isinstance(error, CommandError):
        return str(error)
    return f"{type(error).__name__}: " + " ".join(str(error).split())


def _explain(args: argparse.Namespace, tally: Tally, has_results: bool, end: _End) -> None:
    """What to do next, on stderr."""
    def say(line: str) -> None:
        print("bizmsg: " + line, file=sys.stderr)

    if not has_results and tally.not_sent:
        for line in tally.not_sent:
            say(line)
        left = tally.total - tally.counts["sent"] - tally.counts["skipped"] - len(tally.not_sent)
        if left > 0:
            say(f"... and {left:,} more not sent; --results FILE writes every message's outcome")
    if tally.stop_reason is not None:
        say(f"{tally.stop_reason}: {tally.not_taken:,} message(s) were not sent")
    unknown = tally.counts["unknown"]
    if unknown:
        again = (" or run the same command with --resend-unknown to send them again with the "
                 "same keys (safe with a service that honours them, as the sandbox does)"
                 if args.journal else "")
        where = "in the results" if has_results else "shown above"
        say(f"{unknown:,} message(s) may or may not have been sent: check whether they "
            f"arrived (their Idempotency-Key is {where}){again}")
    if not end.complete:
        say("the outcomes of the messages that were in flight are not in this summary"
            + (" (the journal has them)" if args.journal else ""))
    if end.interrupted:
        if args.journal:
            say(f"run the same command again to send the rest: the journal {args.journal} "
                "knows what was sent")
        else:
            say("without --journal, running the command again would send every message "
                "again")
