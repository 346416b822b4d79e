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

import asyncio
import logging
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
from dataclasses import dataclass, field
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

logger = logging.getLogger("bizmsg")

#: Every status an outcome can have, in the order counts are shown.
STATUSES = ("sent", "rejected", "unknown", "failed", "skipped")


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a campaign: ``template`` from the business number ``from_`` to ``to``.

    Unlike :class:`Template`, a message is not checked when it is made: a bad phone number is
    reported as that message's ``failed`` outcome (with a :class:`ValidationError`), so one bad
    row never stops a campaign. ``idempotency_key`` replaces the key bizmsg would give it.
    """

    to: str
    from_: str
    template: Template
    idempotency_key: str | None = None


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

    def __repr__(self) -> str:
        counts = ", ".join(f"{status}={self.counts[status]}" for status in STATUSES)
        return (f"BulkResult({len(self.outcomes)} messages: {counts}; "
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

    def __repr__(self) -> str:
        duration = ("unpaced" if self.estimated_duration is None
                    else f"~{self.estimated_duration.total_seconds():,.1f}s")
        return (f"CampaignPlan({self.total} messages: {self.to_send} to send, "
                f"{self.invalid_count} invalid, {self.duplicate_count} duplicates; "
                f"{len(self.senders)} sender(s), {duration}; "
                f"{len(self.warnings)} warning(s))")


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
        while chunk := await _take(source, _PLAN_CHUNK):
            planner.feed(iter(chunk), len(chunk))
        return CampaignPlan._from_native(planner.finish())
    return plan(planner, messages)


def _counts(outcomes: list[SendOutcome]) -> dict[str, int]:
    counted: Counter[str] = Counter(outcome.status for outcome in outcomes)
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

    def outcomes_arrived(self, batch: list[SendOutcome]) -> None:
        if self.keep:
            self.outcomes.extend(batch)
        self.counts.update(outcome.status for outcome in batch)
        if self.progress is not None:
            self.progress.update(len(batch))
            self.progress.set_postfix({status: self.counts[status] for status in STATUSES
                                       if self.counts[status]}, refresh=False)
        if self.on_result is not None and self.raised is None:
            self.on_result(batch)

    def warning(self, value: tuple[str, str, str | None, str | None]) -> None:
        self.warnings.append(CampaignWarning(*value))

    def result(self) -> BulkResult:
        elapsed = time.monotonic() - self.started
        outcomes = sorted(self.outcomes, key=_BY_INDEX)
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
            logger.warning("campaign interrupted: no new message is taken; waiting for the "
                           "messages in flight (interrupt again to abandon them)")
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


def progress_bar(progress: bool, messages: object) -> Any:
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:
        raise ImportError("progress=True needs tqdm: pip install 'bizmsg[progress]'") from exc
    total = len(messages) if isinstance(messages, Sized) else None
    return tqdm(total=total, unit="msg", desc="sending", dynamic_ncols=True)


def drive(run: _native.CampaignRun, messages: Iterable[MessageLike],
          collector: _Collector) -> Iterator[list[SendOutcome]]:
    """Answers the campaign's events until it is done, yielding each batch of outcomes."""
    source = iter(messages)
    while True:
        try:
            event = run.wait()
        except KeyboardInterrupt as exc:
            collector.interrupted(exc, run)
            continue
        if event is None:
            return
        kind, value = event
        if kind == "input":
            if collector.raised is not None:
                run.end_input()
                continue
            try:
                run.feed(source, value)
            except BaseException as exc:  # the input's own failure, e.g. a DB cursor error
                collector.interrupted(exc, run)
                run.end_input()
        elif kind == "outcomes":
            yield value
        elif kind == "warning":
            collector.warning(value)
        else:
            collector.done = value
            return


def send_many(run: _native.CampaignRun, messages: Iterable[MessageLike], *,
              on_result: Callable[[list[SendOutcome]], object] | None,
              progress: bool) -> BulkResult:
    collector = _Collector(True, on_result, progress_bar(progress, messages))
    for batch in drive(run, messages, collector):
        try:
            collector.outcomes_arrived(batch)
        except BaseException as exc:
            collector.interrupted(exc, run)
    return collector.finish()


def send_many_iter(run: _native.CampaignRun, messages: Iterable[MessageLike], *,
                   on_result: Callable[[list[SendOutcome]], object] | None,
                   progress: bool) -> Iterator[SendOutcome]:
    collector = _Collector(False, on_result, progress_bar(progress, messages))
    batches = drive(run, messages, collector)
    try:
        for batch in batches:
            collector.outcomes_arrived(batch)
            yield from batch
    finally:
        if collector.done is None:
            # The consumer stopped early (break, an exception): stop taking messages and let
            # those in flight settle, so the journal ends consistent.
            run.stop(False)
            for _ in batches:
                pass
    collector.finish()


async def adrive(run: _native.CampaignRun,
                 messages: Iterable[MessageLike] | AsyncIterable[MessageLike],
                 collector: _Collector) -> AsyncIterator[list[SendOutcome]]:
    """:func:`drive` on an event loop; ``messages`` may be an async iterable."""
    source: Iterator[MessageLike] | AsyncIterator[MessageLike]
    if isinstance(messages, AsyncIterable):
        source = aiter(messages)
    else:
        source = iter(messages)
    while True:
        try:
            event = await run.wait_async()
        except asyncio.CancelledError as exc:
            collector.interrupted(exc, run)
            continue
        if event is None:
            return
        kind, value = event
        if kind == "input":
            if collector.raised is not None:
                run.end_input()
                continue
            try:
                if isinstance(source, AsyncIterator):
                    chunk = await _take(source, value)
                    run.feed(iter(chunk), value)
                else:
                    run.feed(source, value)
            except asyncio.CancelledError as exc:
                collector.interrupted(exc, run)
                run.end_input()
            except BaseException as exc:
                collector.interrupted(exc, run)
                run.end_input()
        elif kind == "outcomes":
            yield value
        elif kind == "warning":
            collector.warning(value)
        else:
            collector.done = value
            return


async def _take(source: AsyncIterator[MessageLike], limit: int) -> list[MessageLike]:
    chunk: list[MessageLike] = []
    async for item in source:
        chunk.append(item)
        if len(chunk) >= limit:
            break
    return chunk


async def asend_many(run: _native.CampaignRun,
                     messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
                     on_result: Callable[[list[SendOutcome]], object] | None,
                     progress: bool) -> BulkResult:
    collector = _Collector(True, on_result, progress_bar(progress, messages))
    async for batch in adrive(run, messages, collector):
        try:
            collector.outcomes_arrived(batch)
        except BaseException as exc:
            collector.interrupted(exc, run)
    return collector.finish()


async def asend_many_iter(run: _native.CampaignRun,
                          messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
                          on_result: Callable[[list[SendOutcome]], object] | None,
                          progress: bool) -> AsyncIterator[SendOutcome]:
    collector = _Collector(False, on_result, progress_bar(progress, messages))
    batches = adrive(run, messages, collector)
    try:
        async for batch in batches:
            collector.outcomes_arrived(batch)
            for outcome in batch:
                yield outcome
    finally:
        if collector.done is None:
            run.stop(False)
            async for _ in batches:
                pass
    collector.finish()
