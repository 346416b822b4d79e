"""Campaigns: ``send_many``, ``send_many_iter`` and the objects they take and return.

The whole batch runs in Rust (``bizmsg._native.CampaignRun``): it asks for input when its queue
runs low, sends with up to ``concurrency`` requests in flight, and hands outcomes back in
batches. The drivers here only answer its events, once per chunk of input and once per batch of
outcomes, never per message: they pull the next chunk from your iterable (sync or async), call
``on_result`` and update the progress bar.

Stopping is always graceful first: on Ctrl-C (or a cancelled task, or an exception from your
iterable or ``on_result``) no new message is taken, messages in flight finish (or, after a
second Ctrl-C, are abandoned and reported ``unknown``), the journal is brought up to date, and
the exception is raised with the partial :class:`BulkResult` on its ``bulk_result`` attribute.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sized,
)
from dataclasses import MISSING, dataclass, field, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Union

from . import _native
from .errors import BizmsgError
from .models import Template

if TYPE_CHECKING:
    from ._native import SendOutcome

__all__ = [
    "Message",
    "BulkResult",
    "CampaignWarning",
    "CampaignPlan",
    "SenderPlan",
    "AccountPlan",
    "MessageLike",
    "STATUSES",
]

#: Every status an outcome can have, in the order counts are shown.
STATUSES = ("sent", "rejected", "unknown", "failed", "skipped")


# The fields live in a Rust object (``MessageFields``) that the constructor fills in one call and
# the campaign reads directly: a campaign makes a message per row, and a frozen dataclass's own
# __init__ (one object.__setattr__ per field) was a large part of its cost. The dataclass
# decorator still gives Message its fields, repr, equality, hash, match_args and frozenness, so
# dataclasses.fields/replace/asdict work as on any frozen dataclass.
@dataclass(frozen=True, init=False)
class Message(_native.MessageFields):
    """One message of a campaign: ``template`` from the business number ``from_`` to ``to``.

    Unlike :class:`Template`, a message is not checked when it is made: a bad phone number is
    reported as that message's ``failed`` outcome (with a :class:`ValidationError`), so one bad
    row never stops a campaign. ``idempotency_key`` replaces the key bizmsg would give it.
    """

    __slots__ = ()

    to: str
    from_: str
    template: Template
    # No `= None` here: a class attribute would hide the stored field. The default is the
    # constructor's, and is recorded on the field below.
    idempotency_key: str | None

    def __reduce__(self) -> tuple[Any, ...]:
        # Every dataclass field, set again on a blank instance, as a frozen dataclass's own
        # pickling does: a subclass's fields come back too.
        return (_restore, (type(self), [getattr(self, f.name) for f in fields(self)]))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass may be a dataclass with fields of its own, whose generated __init__ takes
        # them all and sets each one: it is made blank first, whatever the arguments.
        cls.__new__ = _new_subclass  # type: ignore[method-assign, assignment]


def _restore(cls: type[Message], values: list[Any]) -> Message:
    """A pickled (or copied) message: its fields, in the order of ``dataclasses.fields``."""
    message = _blank(cls)
    for field_, value in zip(fields(cls), values):
        object.__setattr__(message, field_.name, value)
    return message


def _new_subclass(cls: type[Message], *args: Any, **kwargs: Any) -> Message:
    if cls.__init__ is object.__init__:
        # No __init__ of its own: the arguments are Message's.
        return _native.MessageFields.__new__(cls, *args, **kwargs)
    return _blank(cls)


def _blank(cls: type[Message]) -> Message:
    """An instance of ``cls`` whose fields are None, for the caller to set."""
    nothing: Any = None
    return _native.MessageFields.__new__(cls, nothing, nothing, nothing)


# The fields' defaults are the constructor's (the decorator took the inherited descriptors for
# defaults), so dataclasses.fields() describes Message as before.
for _name, _field in Message.__dataclass_fields__.items():
    _field.default = None if _name == "idempotency_key" else MISSING


#: What ``send_many`` takes per message: a :class:`Message`, or a mapping with ``to``, ``from``
#: (or ``from_``) and ``template`` (a :class:`Template` or a mapping), or with the template's
#: ``name``, ``parameters`` and ``language`` flat beside them; ``idempotency_key`` optional.
MessageLike = Union[Message, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class CampaignWarning:
    """Something worth knowing about a campaign, also logged as a WARNING: ``kind`` is
    ``"tier"`` (an account reaches more unique recipients than its messaging tier allows per
    24 h), ``"tier_near"`` (80% of it), ``"quality"`` (a sender rated YELLOW or RED) or
    ``"unpaced"`` (a sender whose throughput has no known pace)."""

    kind: str
    message: str
    account_id: str | None = None
    sender: str | None = None


_BY_INDEX = operator.attrgetter("index")
_STATUS = operator.attrgetter("status")
_RECORD_COLUMNS = ("index", "status", "ok", "idempotency_key", "sms_id", "code", "msg", "error",
                   "duplicate_of", "reason")


@dataclass(frozen=True)
class BulkResult:
    """What a campaign did: one :class:`SendOutcome` per message taken from the input, in
    input order, and figures.

    ``counts`` has every status (``sent``, ``rejected``, ``unknown``, ``failed``,
    ``skipped``); ``elapsed`` is the wall time and ``rate`` the messages handled per second.
    ``stopped_by`` is the outcome that stopped the campaign early (``stop_on_error=True``, or
    an error no other message could survive, such as a revoked token), ``stop_reason`` says
    why (also for Ctrl-C). ``campaign_id`` is the id keys were derived from, if any.
    """

    outcomes: list[SendOutcome]
    counts: dict[str, int]
    elapsed: timedelta
    rate: float
    warnings: list[CampaignWarning] = field(default_factory=list[CampaignWarning])
    stopped_by: SendOutcome | None = None
    stop_reason: str | None = None
    campaign_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when every message was sent (or skipped as a duplicate or as already sent)."""
        return self.counts["rejected"] == self.counts["unknown"] == self.counts["failed"] == 0

    def sent(self) -> list[SendOutcome]:
        return self._with("sent")

    def rejected(self) -> list[SendOutcome]:
        return self._with("rejected")

    def unknown(self) -> list[SendOutcome]:
        """Messages that may or may not have been sent: reconcile them with their
        ``idempotency_key`` (never re-send them blindly)."""
        return self._with("unknown")

    def failed(self) -> list[SendOutcome]:
        """Messages that were never sent (invalid, or the service could not be reached)."""
        return self._with("failed")

    def skipped(self) -> list[SendOutcome]:
        return self._with("skipped")

    def _with(self, status: str) -> list[SendOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == status]

    def __len__(self) -> int:
        return len(self.outcomes)

    def __iter__(self) -> Iterator[SendOutcome]:
        return iter(self.outcomes)

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per message: index, status, ok, idempotency_key, sms_id, code, msg,
        error, duplicate_of, reason."""
        return [outcome.to_record() for outcome in self.outcomes]

    def to_pandas(self) -> Any:
        """The records as a ``pandas.DataFrame``, one row per message, with the columns of
        :meth:`to_records` (install ``bizmsg[pandas]``)."""
        from ._frames import records_to_frame

        return records_to_frame(
            (outcome.to_record() for outcome in self.outcomes), columns=_RECORD_COLUMNS,
            what="BulkResult.to_pandas()",
        )

    def _repr_html_(self) -> str:
        # Counts as badges, why it stopped, warnings, the first messages not sent (_display.py).
        from ._display import bulk_result_html

        return bulk_result_html(self)

    def __repr__(self) -> str:
        counts = ", ".join(f"{status}={self.counts[status]:,}" for status in STATUSES)
        return (f"BulkResult({_count(len(self.outcomes), 'message')}: {counts}; "
                f"{self.elapsed.total_seconds():.2f}s, {self.rate:,.0f}/s)")


@dataclass(frozen=True, slots=True)
class SenderPlan:
    """One sender of a planned campaign: how many messages, its state in the listing
    (``listed`` false: not a number of this account), the pace ``pace="auto"`` would give it,
    and ``problem`` when its messages would fail up front."""

    sender: str
    messages: int
    listed: bool
    status: str | None
    quality_rating: str | None
    throughput: str | None
    account_id: str | None
    pace: float | None
    problem: str | None
    warning: str | None


@dataclass(frozen=True, slots=True)
class AccountPlan:
    """One account (business portfolio) of a planned campaign: the unique recipients its
    numbers would reach, against its messaging tier (``limit`` per rolling 24 h; ``None``:
    unlimited or unknown)."""

    account_id: str
    name: str | None
    tier: str | None
    limit: int | None
    unique_recipients: int

    @property
    def over_tier(self) -> bool:
        return self.limit is not None and self.unique_recipients > self.limit


@dataclass(frozen=True)
class CampaignPlan:
    """The preflight of a campaign (``messages.plan()`` or ``send_many(..., dry_run=True)``):
    nothing was sent.

    ``invalid`` and ``duplicates`` list the first 1,000 of each (the counts are exact):
    ``(index, ValidationError)`` and ``(index, index of the original)``. ``to_send`` counts
    the messages that would go out (valid, not duplicates, from senders that can send).
    ``estimated_duration`` is at the chosen pace (``rate_limit``, and each sender's with
    ``pace="auto"``); ``None`` when nothing paces the campaign.
    """

    total: int
    valid: int
    invalid_count: int
    invalid: list[tuple[int, BizmsgError]]
    duplicate_count: int
    duplicates: list[tuple[int, int]]
    to_send: int
    senders: list[SenderPlan]
    accounts: list[AccountPlan]
    estimated_duration: timedelta | None
    warnings: list[str]

    @property
    def ok(self) -> bool:
        """Nothing to fix: every message valid, every sender able to send, no account past its
        tier."""
        return (self.invalid_count == 0 and all(s.problem is None for s in self.senders)
                and not any(a.over_tier for a in self.accounts))

    @classmethod
    def _from_native(cls, plan: dict[str, Any]) -> CampaignPlan:
        seconds = plan["estimated_seconds"]
        return cls(
            total=plan["total"], valid=plan["valid"], invalid_count=plan["invalid_count"],
            invalid=[(index, error) for index, error in plan["invalid"]],
            duplicate_count=plan["duplicate_count"],
            duplicates=[(index, original) for index, original in plan["duplicates"]],
            to_send=plan["to_send"],
            senders=[SenderPlan(**sender) for sender in plan["senders"]],
            accounts=[AccountPlan(**account) for account in plan["accounts"]],
            estimated_duration=None if seconds is None else timedelta(seconds=seconds),
            warnings=list(plan["warnings"]),
        )

    def _repr_html_(self) -> str:
        # Totals, senders, accounts against their tiers, invalid rows, warnings (_display.py).
        from ._display import plan_html

        return plan_html(self)

    def __repr__(self) -> str:
        duration = ("unpaced" if self.estimated_duration is None
                    else f"~{self.estimated_duration.total_seconds():,.1f}s")
        return (f"CampaignPlan({_count(self.total, 'message')}: {self.to_send:,} to send, "
                f"{self.invalid_count:,} invalid, {_count(self.duplicate_count, 'duplicate')}; "
                f"{_count(len(self.senders), 'sender')}, {duration}; "
                f"{_count(len(self.warnings), 'warning')})")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


#: Messages checked per call into Rust while planning.
_PLAN_CHUNK = 4096


def plan(planner: _native.CampaignPlanner, messages: Iterable[MessageLike]) -> CampaignPlan:
    source = iter(messages)
    while planner.feed(source, _PLAN_CHUNK) == _PLAN_CHUNK:
        pass
    return CampaignPlan._from_native(planner.finish())


async def aplan(planner: _native.CampaignPlanner,
                messages: Iterable[MessageLike] | AsyncIterable[MessageLike]) -> CampaignPlan:
    if isinstance(messages, AsyncIterable):
        source = aiter(messages)
        while True:
            chunk, failure = await _take(source, _PLAN_CHUNK)
            planner.feed(iter(chunk), len(chunk))
            if failure is not None:
                raise failure
            if len(chunk) < _PLAN_CHUNK:
                break
        return CampaignPlan._from_native(planner.finish())
    return plan(planner, messages)


def _counts(outcomes: list[SendOutcome]) -> dict[str, int]:
    counted: Counter[str] = Counter(map(_STATUS, outcomes))
    return {status: counted[status] for status in STATUSES}


class _Collector:
    """What a driver gathers: outcomes (kept for ``send_many``), warnings, the end."""

    def __init__(self, keep: bool, on_result: Callable[[list[SendOutcome]], object] | None,
                 progress: Any) -> None:
        self.keep = keep
        self.on_result = on_result
        self.progress = progress
        self.outcomes: list[SendOutcome] = []
        self.counts: Counter[str] = Counter()
        self.warnings: list[CampaignWarning] = []
        self.done: dict[str, Any] | None = None
        #: What stopped the driver before the input ended (Ctrl-C, cancellation, an exception
        #: from the input or from on_result): raised once the campaign has settled.
        self.raised: BaseException | None = None
        self.started = time.monotonic()
        #: The last batch (by event sequence) counted, and the last one on_result was given:
        #: a batch handed out again after an interruption is counted and reported once.
        self.counted = 0
        self.reported = 0
        #: on_result raised: it is not called again (Ctrl-C inside it does not count).
        self.on_result_failed = False

    def outcomes_arrived(self, sequence: int, batch: list[SendOutcome]) -> None:
        if sequence > self.counted:
            self.counted = sequence
            if self.keep:
                self.outcomes.extend(batch)
            # map() and attrgetter: counted in C, not by a generator per outcome.
            self.counts.update(map(_STATUS, batch))
            if self.progress is not None:
                # The counts first: update() draws the bar, with them.
                self.progress.set_postfix({status: self.counts[status] for status in STATUSES
                                           if self.counts[status]}, refresh=False)
                self.progress.update(len(batch))
        if (self.on_result is not None and not self.on_result_failed
                and sequence > self.reported):
            # Called after a Ctrl-C too: a sink of outcomes gets every one of them.
            try:
                self.on_result(batch)
            except KeyboardInterrupt:
                raise  # the batch is handed out again, and given to on_result again
            except BaseException:
                self.on_result_failed = True
                raise
            self.reported = sequence

    def warning(self, value: tuple[str, str, str | None, str | None]) -> None:
        self.warnings.append(CampaignWarning(*value))

    def result(self) -> BulkResult:
        elapsed = time.monotonic() - self.started
        outcomes = self.outcomes
        if self.raised is not None:
            # A batch whose use was interrupted is handed out again: keep each message once.
            outcomes = list({outcome.index: outcome for outcome in outcomes}.values())
        outcomes = sorted(outcomes, key=_BY_INDEX)
        done = self.done or {}
        stopped = done.get("stopped")
        stopped_by = None
        if stopped is not None and stopped[0] is not None:
            stopped_by = next((o for o in outcomes if o.index == stopped[0]), None)
        handled = sum(self.counts.values())
        return BulkResult(
            outcomes=outcomes,
            counts=_counts(outcomes) if self.keep else {s: self.counts[s] for s in STATUSES},
            elapsed=timedelta(seconds=elapsed),
            rate=handled / elapsed if elapsed > 0 else 0.0,
            warnings=list(self.warnings),
            stopped_by=stopped_by,
            stop_reason=None if stopped is None else stopped[1],
            campaign_id=done.get("campaign_id"),
        )

    def interrupted(self, exc: BaseException, run: _native.CampaignRun) -> None:
        """A first interruption stops taking messages; a second abandons those in flight."""
        if self.raised is None:
            self.raised = exc
            import logging  # only here: `import bizmsg` stays free of it

            logging.getLogger("bizmsg").warning(
                "campaign interrupted: no new message is taken; waiting for the messages in "
                "flight (interrupt again to abandon them)")
            run.stop(False)
        else:
            run.stop(True)

    def finish(self) -> BulkResult:
        """The result, or the exception that ended the campaign with it attached."""
        result = self.result()
        if self.progress is not None:
            self.progress.close()
        error = (self.done or {}).get("error")
        raised = self.raised or error
        if raised is not None:
            _attach(raised, result)
            raise raised
        return result


def _attach(exc: BaseException, result: BulkResult) -> None:
    try:
        exc.bulk_result = result  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exceptions without a __dict__
        return
    note = f"bizmsg: the campaign stopped with {result!r}; see .bulk_result"
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(note)


def require_tqdm() -> Any:
    """tqdm's notebook-or-terminal bar class, or an ImportError that says how to install it."""
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:
        raise ImportError("progress=True needs tqdm: pip install 'bizmsg[progress]'") from exc
    return tqdm


def progress_bar(progress: bool, messages: object) -> Any:
    if not progress:
        return None
    tqdm = require_tqdm()
    total = len(messages) if isinstance(messages, Sized) else None
    return tqdm(total=total, unit="msg", desc="sending", dynamic_ncols=True)


#: Takes a batch of outcomes and its event sequence (a batch handed out again has the same).
Deliver = Callable[[int, list["SendOutcome"]], object]


def drive(run: _native.CampaignRun, messages: Iterable[MessageLike], collector: _Collector,
          deliver: Deliver) -> Iterator[None]:
    """Answers the campaign's events until it is done: feeds input, hands each batch of
    outcomes to ``deliver`` and then yields (so a generator can pass them on).

    An event is acknowledged only once it was used: if KeyboardInterrupt (raised by Python at
    any bytecode) lands between ``wait`` returning it and its use, the next ``wait`` hands it
    out again, and no batch of outcomes is lost."""
    source = iter(messages)
    acknowledged = 0
    while True:
        try:
            event = run.wait(acknowledged)
        except KeyboardInterrupt as exc:
            collector.interrupted(exc, run)
            continue
        if event is None:
            return
        sequence, kind, value = event
        try:
            if kind == "input":
                _feed(run, source, value, collector)
            elif kind == "outcomes":
                deliver(sequence, value)
            elif kind == "warning":
                collector.warning(value)
            else:
                collector.done = value
                return
            acknowledged = sequence
        except BaseException as exc:  # Ctrl-C, or on_result's own exception
            collector.interrupted(exc, run)
            continue
        if kind == "outcomes":
            yield


def _feed(run: _native.CampaignRun, source: Iterator[MessageLike], wanted: int,
          collector: _Collector) -> None:
    if collector.raised is not None:
        run.end_input()
        return
    try:
        run.feed(source, wanted)
    except BaseException as exc:  # the input's own failure (a DB cursor error), or Ctrl-C
        collector.interrupted(exc, run)
        run.end_input()


class _StopOnCtrlC:
    """While a sync ``send_many`` runs on the main thread, Ctrl-C stops the campaign instead of
    raising KeyboardInterrupt at whatever bytecode Python is at (which could be anywhere: in
    the driver between two events, in ``on_result``, in the input's generator), and a second
    Ctrl-C abandons the messages in flight. The KeyboardInterrupt is raised, with the partial
    result, once the campaign has settled. A handler the application set itself is left alone.
    """

    def __init__(self, run: _native.CampaignRun, collector: _Collector) -> None:
        self.run = run
        self.collector = collector
        self.previous: Any = None

    def __enter__(self) -> None:
        import signal
        import threading

        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.previous = signal.signal(signal.SIGINT, self._interrupted)

    def _interrupted(self, signum: int, frame: object) -> None:
        self.collector.interrupted(KeyboardInterrupt(), self.run)

    def __exit__(self, *exc_info: object) -> None:
        if self.previous is not None:
            import signal

            signal.signal(signal.SIGINT, self.previous)


def send_many(run: _native.CampaignRun, messages: Iterable[MessageLike], *,
              on_result: Callable[[list[SendOutcome]], object] | None,
              progress: bool) -> BulkResult:
    collector = _Collector(True, on_result, progress_bar(progress, messages))
    with _StopOnCtrlC(run, collector):
        for _ in drive(run, messages, collector, collector.outcomes_arrived):
            pass
    return collector.finish()


class _Ready:
    """The batches of outcomes a ``send_many_iter`` has received and not yet yielded. By event
    sequence: a batch handed out again (an interruption before it was acknowledged) has the
    same, and is yielded once. (Keyed per batch, in one store, so an interruption cannot leave
    a batch half recorded; nothing is done per outcome.)"""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.batches: dict[int, tuple[SendOutcome, ...]] = {}

    def deliver(self, sequence: int, batch: list[SendOutcome]) -> None:
        # Copied before on_result is given the list: it may keep or change it.
        kept = tuple(batch)
        self.collector.outcomes_arrived(sequence, batch)
        self.batches[sequence] = kept


def send_many_iter(run: _native.CampaignRun, messages: Iterable[MessageLike], *,
                   on_result: Callable[[list[SendOutcome]], object] | None,
                   progress: bool) -> Iterator[SendOutcome]:
    collector = _Collector(False, on_result, progress_bar(progress, messages))
    ready = _Ready(collector)
    steps = drive(run, messages, collector, ready.deliver)
    try:
        for _ in steps:
            for batch in ready.batches.values():
                for outcome in batch:
                    try:
                        yield outcome
                    except KeyboardInterrupt as exc:
                        # Thrown in (``.throw()``) by a consumer interrupted while it handled an
                        # outcome, as the CLI does: the campaign stops taking messages, as for a
                        # Ctrl-C during its wait, and the outcomes still to come are yielded.
                        collector.interrupted(exc, run)
            ready.batches.clear()
    finally:
        if collector.done is None:
            # The consumer stopped early (break, an exception): stop taking messages and let
            # those in flight settle, so the journal ends consistent.
            run.stop(False)
            for _ in steps:
                pass
    collector.finish()


async def adrive(run: _native.CampaignRun,
                 messages: Iterable[MessageLike] | AsyncIterable[MessageLike],
                 collector: _Collector, deliver: Deliver) -> AsyncIterator[None]:
    """:func:`drive` on an event loop; ``messages`` may be an async iterable, and cancelling
    the task stops the campaign like Ctrl-C stops a sync one."""
    import asyncio  # loaded already: this runs on an event loop

    source: Iterator[MessageLike] | AsyncIterator[MessageLike]
    if isinstance(messages, AsyncIterable):
        source = aiter(messages)
    else:
        source = iter(messages)
    acknowledged = 0
    while True:
        try:
            event = await run.wait_async(acknowledged)
        except asyncio.CancelledError as exc:
            collector.interrupted(exc, run)
            continue
        if event is None:
            return
        sequence, kind, value = event
        try:
            if kind == "input":
                if isinstance(source, Iterator):
                    _feed(run, source, value, collector)
                elif collector.raised is None:
                    # A chunk shorter than asked for ends the input (feed tells the engine);
                    # what the input gave before it raised is fed first.
                    chunk, failure = await _take(source, value)
                    _feed(run, iter(chunk), value, collector)
                    if failure is not None:
                        collector.interrupted(failure, run)
                        run.end_input()
                else:
                    run.end_input()
            elif kind == "outcomes":
                deliver(sequence, value)
            elif kind == "warning":
                collector.warning(value)
            else:
                collector.done = value
                return
            acknowledged = sequence
        except BaseException as exc:  # cancellation, the input's or on_result's exception
            collector.interrupted(exc, run)
            if kind == "input":
                run.end_input()
            continue
        if kind == "outcomes":
            yield


async def _take(source: AsyncIterator[MessageLike],
                limit: int) -> tuple[list[MessageLike], BaseException | None]:
    """Up to ``limit`` items, and what the iterable raised (the items before it are kept)."""
    chunk: list[MessageLike] = []
    try:
        async for item in source:
            chunk.append(item)
            if len(chunk) >= limit:
                break
    except BaseException as exc:
        return chunk, exc
    return chunk, None


async def asend_many(run: _native.CampaignRun,
                     messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
                     on_result: Callable[[list[SendOutcome]], object] | None,
                     progress: bool) -> BulkResult:
    collector = _Collector(True, on_result, progress_bar(progress, messages))
    async for _ in adrive(run, messages, collector, collector.outcomes_arrived):
        pass
    return collector.finish()


async def asend_many_iter(run: _native.CampaignRun,
                          messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
                          on_result: Callable[[list[SendOutcome]], object] | None,
                          progress: bool) -> AsyncIterator[SendOutcome]:
    collector = _Collector(False, on_result, progress_bar(progress, messages))
    ready = _Ready(collector)
    steps = adrive(run, messages, collector, ready.deliver)
    try:
        async for _ in steps:
            for batch in ready.batches.values():
                for outcome in batch:
                    yield outcome
            ready.batches.clear()
    finally:
        if collector.done is None:
            run.stop(False)
            async for _ in steps:
                pass
    collector.finish()
