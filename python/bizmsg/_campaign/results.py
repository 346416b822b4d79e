"""What a campaign returns: :class:`BulkResult` (what ``send_many`` did, with a
:class:`CampaignWarning` for each thing worth knowing) and :class:`CampaignPlan` (what ``plan()``
found, per :class:`SenderPlan` and :class:`AccountPlan`). Plain values: they pickle, and the
drivers that fill them are in ``drivers.py``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, overload

from ..errors import BizmsgError
from .message import message_columns

if TYPE_CHECKING:
    from .._native import SendOutcome

__all__ = ["STATUSES", "BulkResult", "CampaignWarning", "CampaignPlan", "SenderPlan",
           "AccountPlan"]

#: Every status an outcome can have, in the order counts are shown.
STATUSES = ("sent", "rejected", "unknown", "failed", "skipped")


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


#: The columns of :meth:`BulkResult.to_records` and ``to_pandas()``: the outcome's (those of
#: ``SendOutcome.to_record()``), with the message's own after ``index``, so that a result joins
#: back to its input by them.
_MESSAGE_COLUMNS = ("to", "from", "template", "parameters", "language")
_RECORD_COLUMNS = ("index", *_MESSAGE_COLUMNS, "status", "ok", "idempotency_key", "sms_id",
                   "code", "msg", "error", "duplicate_of", "reason")


@dataclass(frozen=True)
class BulkResult:
    """What a campaign did: one :class:`SendOutcome` per message taken from the input, in
    input order, and figures.

    ``counts`` has every status (``sent``, ``rejected``, ``unknown``, ``failed``,
    ``skipped``); ``elapsed`` is the wall time and ``rate`` the messages handled per second.
    ``stopped_by`` is the outcome that stopped the campaign early (``stop_on_error=True``, or
    an error no other message could survive, such as a revoked token), ``stop_reason`` says
    why (also for Ctrl-C). ``campaign_id`` is the id keys were derived from, if any.

    Every message of an input with a length (a list, a DataFrame) has an outcome, those the
    campaign never read after an early stop too (``skipped``, with the stop's reason). An
    input without one (a generator, a cursor) is read only as far as the campaign went:
    ``unread_from`` is then the index of the first message it did not read (``None`` when
    every message has an outcome); run the campaign again with its journal to go on.

    It reads like a sequence of its outcomes: ``len(result)``, iteration, ``result[i]`` (the
    outcome of the input's message ``i``) and ``result[i:j]`` (a ``list`` of outcomes).
    """

    outcomes: list[SendOutcome]
    counts: dict[str, int]
    elapsed: timedelta
    rate: float
    warnings: list[CampaignWarning] = field(default_factory=list[CampaignWarning])
    stopped_by: SendOutcome | None = None
    stop_reason: str | None = None
    campaign_id: str | None = None
    unread_from: int | None = None

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
        """How many messages were taken from the input (each has one outcome)."""
        return len(self.outcomes)

    def __iter__(self) -> Iterator[SendOutcome]:
        return iter(self.outcomes)

    @overload
    def __getitem__(self, position: int) -> SendOutcome: ...
    @overload
    def __getitem__(self, position: slice) -> list[SendOutcome]: ...

    def __getitem__(self, position: int | slice) -> SendOutcome | list[SendOutcome]:
        """``result[i]``: the outcome of the input's message ``i`` (the outcomes are in input
        order, one per message taken, so ``result[i].index == i``); negative positions count
        from the end. ``result[i:j]`` is a ``list`` of outcomes."""
        return self.outcomes[position]

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per message: ``index``; the message's own ``to``, ``from``,
        ``template`` (its name), ``parameters`` and ``language``, as given (``None`` for an
        item that was not a message); then ``status``, ``ok``, ``idempotency_key``,
        ``sms_id``, ``code``, ``msg``, ``error``, ``duplicate_of``, ``reason``."""
        return [_record(outcome) for outcome in self.outcomes]

    def to_pandas(self) -> Any:
        """The records as a ``pandas.DataFrame``, one row per message, with the columns of
        :meth:`to_records` (install ``bizmsg[pandas]``): it joins back to the input by
        ``to`` (and ``from``, the template), or by ``index``, its position. Its
        ``attrs["unread_from"]`` is :attr:`unread_from`."""
        from .._dataframes import records_to_frame

        frame = records_to_frame(
            (_record(outcome) for outcome in self.outcomes), columns=_RECORD_COLUMNS,
            what="BulkResult.to_pandas()",
        )
        # Where an input without a length was not read from (None: every message is a row).
        frame.attrs["unread_from"] = self.unread_from
        return frame

    def _repr_html_(self) -> str:
        # Counts as badges, why it stopped, warnings, the first messages not sent (_display.py).
        from .._display import bulk_result_html

        return bulk_result_html(self)

    def __repr__(self) -> str:
        counts = ", ".join(f"{status}={self.counts[status]:,}" for status in STATUSES)
        unread = ("" if self.unread_from is None else
                  f"; the input was not read from message #{self.unread_from:,} on")
        return (f"BulkResult({_count(len(self.outcomes), 'message')}: {counts}; "
                f"{self.elapsed.total_seconds():.2f}s, {self.rate:,.0f}/s{unread})")


def _record(outcome: SendOutcome) -> dict[str, Any]:
    record = outcome.to_record()
    return {"index": record.pop("index"),
            **dict(zip(_MESSAGE_COLUMNS, message_columns(outcome.message))), **record}


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
        from .._display import plan_html

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
