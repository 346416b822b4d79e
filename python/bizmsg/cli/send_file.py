"""``bizmsg send --file``: every message of a file sent as one campaign through
``client.messages.send_many_iter`` (or planned, with ``--dry-run``), each outcome written to the
results as it arrives, and what the command says about it on stderr.

Only ``send.py`` imports this module, and only for ``--file``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from .._campaign import STATUSES, BulkResult, CampaignPlan
from .._client import Client
from .._native import SendOutcome
from ..errors import (
    AuthenticationError,
    BizmsgError,
    ConfigurationError,
    SendOutcomeUnknownError,
    TransportError,
)
from .message_file import Defaults, MessageFile, format_of, payload
from .results_file import Results, open_results, same_file
from .status import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_TERMINATED,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    TOKEN_HINT,
    CommandError,
)

__all__ = ["send_file"]

#: Messages not sent that are listed on stderr when there is no results file.
_LISTED = 20
#: Campaign warnings shown on stderr (then they are only counted).
_WARNINGS_SHOWN = 20
#: Rows the dry run lists per kind of problem.
_PLAN_LISTED = 10


class _Sized:
    """The messages with a length, so that the progress bar shows a total."""

    def __init__(self, messages: Iterator[dict[str, Any]], total: int) -> None:
        self._messages = messages
        self._total = total

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._messages

    def __len__(self) -> int:
        return self._total


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

    @property
    def nothing_went_out(self) -> bool:
        """No message was sent, and none may have been."""
        return self.counts["sent"] == self.counts["unknown"] == 0

    def summary(self, interrupted: bool | str) -> str:
        """The line that sums up a bulk send (``interrupted``: by Ctrl-C, or the name of the
        signal that stopped it)."""
        elapsed = time.monotonic() - self.started
        rate = self.total / elapsed if elapsed > 0 else 0.0
        counts = ", ".join(f"{status} {self.counts[status]:,}" for status in STATUSES)
        why = [f"{count:,} {what}" for count, what in (
            (self.duplicates, "duplicates"), (self.done_before, "done by an earlier run"),
            (self.not_taken, "not sent as the campaign stopped")) if count]
        if why:
            counts += f" ({', '.join(why)})"
        start = ("" if not interrupted else "interrupted after " if interrupted is True
                 else f"stopped by {interrupted} after ")
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
    message = payload(outcome) or {}
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
    stderr: the records of the ``bizmsg`` logger that start with ``campaign: ``. With a
    progress bar they go through tqdm (``tqdm.write``), which clears the bar, writes the line
    and draws the bar again below it: a line printed as is would land inside the bar."""

    def __init__(self, progress: bool) -> None:
        super().__init__(logging.WARNING)
        self.seen = 0
        self._write = _through_progress_bar if progress else _to_stderr

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # pragma: no cover - a broken record is not ours to report
            return
        if not text.startswith("campaign: "):
            return
        self.seen += 1
        if self.seen <= _WARNINGS_SHOWN:
            self._write("bizmsg: warning: " + " ".join(text[len("campaign: "):].split()))
        elif self.seen == _WARNINGS_SHOWN + 1:
            self._write("bizmsg: further warnings are not shown (--debug shows them all)")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _through_progress_bar(line: str) -> None:
    from tqdm.auto import tqdm  # type: ignore[import-untyped, unused-ignore]

    tqdm.write(line, file=sys.stderr)


def _progress(args: argparse.Namespace) -> bool:
    """A progress bar on stderr: on a terminal, when tqdm is installed, unless refused (or
    --debug, whose log lines would cut through it)."""
    if args.no_progress or args.debug or not sys.stderr.isatty():
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
            if other is not None and same_file(args.results, other):
                raise CommandError(EXIT_USAGE, f"--results and {option} name the same file: "
                                               "the results would overwrite it")
        if args.results == "-" and args.results_format is None:
            fmt = source.format
        else:
            fmt = format_of(args.results, args.results_format, "--results-format")
        out, own = open_results(args.results, fmt)
        results = Results(out, fmt, source.extra_columns if source.format == "csv" else [],
                          own)
    progress = _progress(args)
    messages: Any = source.messages()
    if progress:
        total = source.count()
        if total is not None:
            messages = _Sized(messages, total)
    warnings = _CampaignWarnings(progress)
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
            resend_unknown=args.resend_unknown, enforce_tier=not args.no_enforce_tier,
            **_breaker(args),
            # SIGTERM (systemd, Docker, Kubernetes, `timeout`) stops it as Ctrl-C does. (A
            # SIGTERM the command inherited as ignored stays ignored, as SIGINT would.)
            stop_on_sigterm=True,
        )
        end = _consume(outcomes, results, tally, unflushed)
    finally:
        logger.removeHandler(warnings)
        if results is not None:
            try:
                results.close()
            except OSError:
                pass
    stop = campaign_stop(end.result, client.base_url)
    if stop is not None and end.failure is None and not end.interrupted \
            and tally.nothing_went_out:
        # Nothing could be sent (a refused token, a service that cannot be reached): the one
        # line that says why is the whole story; the results file has every row.
        print(f"bizmsg: {stop.line}; nothing was sent", file=sys.stderr)
        return stop.status
    print(tally.summary(end.signal or end.interrupted), file=sys.stderr)
    _explain(args, tally, results is not None, end, stop)
    if end.failure is not None:
        print(f"bizmsg: {_failure_text(end.failure)}", file=sys.stderr)
        return EXIT_ERROR
    if end.interrupted:
        return EXIT_TERMINATED if end.signal == "SIGTERM" else EXIT_INTERRUPTED
    if stop is not None:
        return stop.status
    return tally.status()


@dataclass(frozen=True)
class CampaignStop:
    """A campaign that stopped by itself on an error no other message could survive: the
    exit status, and the one line that says why (without the ``bizmsg: `` prefix)."""

    status: int
    line: str


def campaign_stop(result: BulkResult | None, base_url: str) -> CampaignStop | None:
    """Why the campaign stopped by itself, when the command should say it in one line and
    exit with its own status: the service refused the token (2, a configuration error), or
    could not be reached (1). ``None`` for a campaign that ran to its end, or stopped on one
    message (``--stop-on-error`` on a rejection, a platform code), which the summary tells."""
    stopped_by = None if result is None else result.stopped_by
    if result is None or stopped_by is None or stopped_by.error is None:
        return None
    error = stopped_by.error
    text = f"{type(error).__name__}: " + " ".join(str(error).split())
    if isinstance(error, (AuthenticationError, ConfigurationError)):
        hint = f"; {TOKEN_HINT}" if isinstance(error, AuthenticationError) else ""
        return CampaignStop(EXIT_USAGE, text + hint)
    if service_unreachable(result):
        line = f"the service at {base_url} could not be reached: {text}"
        # The breaker's own words (how many failed in a row, for how long), without the
        # last error, which the line gives already.
        reason = " ".join((result.stop_reason or "").split()).split(" (last: ")[0]
        if reason and " ".join(str(error).split()) not in reason:
            line += f" ({reason})"
        return CampaignStop(EXIT_ERROR, line)
    return None


def _breaker(args: argparse.Namespace) -> dict[str, Any]:
    """--unreachable-after and --unreachable-for as campaign options (the library's defaults
    when not given; 0 failures: never stop for it)."""
    options: dict[str, Any] = {}
    if args.unreachable_after is not None:
        options["unreachable_after"] = args.unreachable_after or None
    if args.unreachable_for is not None:
        options["unreachable_for"] = args.unreachable_for
    return options


def service_unreachable(result: BulkResult) -> bool:
    """Whether the campaign stopped because the service could not be reached.

    The hook for the campaign's breaker (after N transport failures in a row, with
    no success, a campaign stops by itself, every remaining message ``skipped``): the breaker
    stops on a message that never reached the service, so ``stopped_by.error`` is a
    ``TransportError`` that is not ``SendOutcomeUnknownError`` (``ConnectError``, or a
    timeout or broken connection before the request left), and so is a campaign stopped by
    ``--stop-on-error`` on such a message. The command then prints one line and exits 1.
    """
    stopped_by = result.stopped_by
    error = None if stopped_by is None else stopped_by.error
    return isinstance(error, TransportError) and not isinstance(error, SendOutcomeUnknownError)


@dataclass
class _End:
    """How the campaign ended: interrupted (Ctrl-C, or SIGTERM: ``signal``), failed (what
    ended it), whether every outcome was written (not so when Ctrl-C landed outside the
    campaign's wait), and its result (without outcomes: the command wrote them), when it
    has one."""

    interrupted: bool = False
    failure: BaseException | None = None
    complete: bool = True
    signal: str | None = None
    result: BulkResult | None = None


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
        except StopIteration as stop:
            return _End(result=stop.value)
        except KeyboardInterrupt as interrupt:
            return _End(interrupted=True, complete=hasattr(interrupt, "bulk_result"),
                        result=getattr(interrupt, "bulk_result", None))
        except SystemExit as terminated:
            # stop_on_sigterm: SIGTERM stopped the campaign as Ctrl-C does, and it raises
            # SystemExit(143) once every outcome was yielded.
            result = getattr(terminated, "bulk_result", None)
            if result is None:
                raise
            return _End(interrupted=True, signal="SIGTERM", result=result)
        except (BizmsgError, CommandError) as error:  # the campaign itself failed
            return _End(failure=error, result=getattr(error, "bulk_result", None))
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


def _explain(args: argparse.Namespace, tally: Tally, has_results: bool, end: _End,
             stop: CampaignStop | None) -> None:
    """What to do next, on stderr."""
    def say(line: str) -> None:
        print("bizmsg: " + line, file=sys.stderr)

    if stop is not None:
        # Every message not sent met the same error, or none: the line says it once.
        say(f"{stop.line}; {tally.not_taken:,} message(s) were not sent")
    elif not has_results and tally.not_sent:
        for line in tally.not_sent:
            say(line)
        left = tally.total - tally.counts["sent"] - tally.counts["skipped"] - len(tally.not_sent)
        if left > 0:
            say(f"... and {left:,} more not sent; --results FILE writes every message's outcome")
    if tally.stop_reason is not None and stop is None:
        say(f"{tally.stop_reason}: {tally.not_taken:,} message(s) were not sent")
    unknown = tally.counts["unknown"]
    if unknown:
        again = (" or run the same command with --resend-unknown to send them again with the "
                 "same keys (safe with a service that honours them, as the sandbox does)"
                 if args.journal else "")
        where = ("in the results" if has_results else "shown above" if stop is None
                 else "not shown: --results FILE writes it")
        say(f"{unknown:,} message(s) may or may not have been sent: check whether they "
            f"arrived (their Idempotency-Key is {where}){again}")
    if not end.complete:
        say("the outcomes of the messages that were in flight are not in this summary"
            + (" (the journal has them)" if args.journal else ""))
    unread = None if end.result is None else end.result.unread_from
    if unread is not None:
        say(f"the input was not read from message #{unread:,} on (they have no outcome): "
            + ("run the same command again to go on; the journal knows what was sent"
               if args.journal else
               "with --journal, running the command again would go on from what was sent"))
    if end.interrupted:
        if args.journal:
            say(f"run the same command again to send the rest: the journal {args.journal} "
                "knows what was sent")
        else:
            say("without --journal, running the command again would send every message "
                "again")
