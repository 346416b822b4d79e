"""What a campaign's driver gathers while the campaign runs: the outcomes (kept for
``send_many``, only counted for ``send_many_iter``), the warnings, the progress bar, what
stopped it, and the :class:`~bizmsg.BulkResult` (or the exception carrying it) it ends with."""

from __future__ import annotations

import operator
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sized
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .. import _native
from .results import STATUSES, BulkResult, CampaignWarning

if TYPE_CHECKING:
    from .._native import SendOutcome

__all__ = ["Collector", "OnResult", "progress_bar", "require_tqdm"]

#: ``on_result``: called with each batch of outcomes as it arrives (on the calling thread for
#: ``Client``, on the event loop for ``AsyncClient``).
OnResult = Callable[[list["SendOutcome"]], object]

_BY_INDEX = operator.attrgetter("index")
_STATUS = operator.attrgetter("status")


def _counts(outcomes: list[SendOutcome]) -> dict[str, int]:
    counted: Counter[str] = Counter(map(_STATUS, outcomes))
    return {status: counted[status] for status in STATUSES}


class Collector:
    """What a driver gathers: outcomes (kept for ``send_many``), warnings, the end."""

    def __init__(self, keep: bool, on_result: OnResult | None, progress: Any,
                 concurrency: int = 64) -> None:
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
        #: Without ``keep`` (``send_many_iter``), the last batches handed out, so that the
        #: outcome that stopped the campaign can still be named at the end: after it, only
        #: the messages in flight (``concurrency``) and those waiting in the engine's queue
        #: (about ``max(512, 2 * concurrency)``) get an outcome. Kept per batch, never per
        #: outcome.
        self.recent: deque[tuple[SendOutcome, ...]] = deque()
        self.recent_count = 0
        self.recent_bound = 3 * concurrency + 1024
        #: The index of the first message an input without a length was not read from, when
        #: the campaign stopped before its end.
        self.unread_from: int | None = None

    def outcomes_arrived(self, sequence: int, batch: list[SendOutcome]) -> None:
        if sequence > self.counted:
            self.counted = sequence
            if self.keep:
                self.outcomes.extend(batch)
            else:
                self._remember(batch)
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

    def _remember(self, batch: list[SendOutcome]) -> None:
        recent = self.recent
        recent.append(tuple(batch))  # a copy: on_result may change the list it is given
        self.recent_count += len(batch)
        while len(recent) > 1 and self.recent_count - len(recent[0]) >= self.recent_bound:
            self.recent_count -= len(recent.popleft())

    def _stopping_outcome(self, outcomes: list[SendOutcome],
                          stopped: tuple[Any, ...]) -> SendOutcome | None:
        """The outcome that stopped the campaign, from the engine's ``(index, reason)``."""
        index = stopped[0]
        if index is None:
            return None
        pool = outcomes if self.keep else (o for batch in self.recent for o in batch)
        return next((o for o in pool if o.index == index), None)

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
        stopped_by = None if stopped is None else self._stopping_outcome(outcomes, stopped)
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
            unread_from=self.unread_from,
        )

    def account_for_the_rest(self, run: _native.CampaignRun, rows: object,
                             source: Iterator[Any]) -> list[SendOutcome]:
        """After the campaign ended: the messages it never read get their outcome. Of an input
        with a length, each one left is ``skipped`` with the stop's reason (returned, and
        counted, kept and given to ``on_result`` as a batch); of one without, only the index
        it was not read from is kept (``unread_from``)."""
        if run.exhausted:
            return []
        if not isinstance(rows, Sized):
            self.unread_from = run.read
            return []
        done = self.done or {}
        error = done.get("error")
        # What the messages it did not send were told (the engine's note), else why it ended.
        why = (done.get("not_sent") or
               ("not sent: " + (str(error) if error is not None else "the campaign was "
                                "interrupted")))
        rest = run.skip_rest(source, why)
        if rest:
            try:
                self.outcomes_arrived(self.counted + 1, rest)
            except BaseException as exc:  # on_result's own exception, or Ctrl-C inside it
                # Kept and counted already: raised at the end with the result, as any other.
                if self.raised is None:
                    self.raised = exc
        return rest

    def interrupted(self, exc: BaseException, run: _native.CampaignRun) -> None:
        """A first interruption stops taking messages; a second abandons those in flight."""
        if self.raised is None:
            self.raised = exc
            import logging  # only here: `import bizmsg` stays free of it

            cause = ("stopped by SIGTERM" if isinstance(exc, SystemExit) else "interrupted")
            logging.getLogger("bizmsg").warning(
                "campaign %s: no new message is taken; waiting for the messages in flight "
                "(interrupt again to abandon them)", cause)
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
            attach(raised, result)
            raise raised
        return result


def attach(exc: BaseException, result: BulkResult) -> None:
    """Puts ``result`` on the exception that ended its campaign (``bulk_result``, and a note)."""
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


class TextProgress:
    """``progress=True`` without tqdm: one line on stderr, rewritten at most four times a
    second (``sending: 1,200/3,000 msg (sent=1,180, failed=20)``), ended when the campaign is.
    Built in rather than a dependency: ``import bizmsg`` pulls nothing in for it, a notebook
    shows stderr in its cell, and tqdm, when installed, is still used for its richer bar."""

    EVERY = 0.25

    def __init__(self, total: int | None) -> None:
        import sys

        self.stream = sys.stderr
        self.total = total
        self.count = 0
        self.postfix: dict[str, int] = {}
        self.shown = 0.0

    def set_postfix(self, postfix: dict[str, int], refresh: bool = False) -> None:
        self.postfix = dict(postfix)

    def update(self, count: int) -> None:
        self.count += count
        now = time.monotonic()
        if now - self.shown >= self.EVERY:
            self.shown = now
            self._show()

    def _show(self, end: str = "") -> None:
        total = "" if self.total is None else f"/{self.total:,}"
        counts = ", ".join(f"{status}={count:,}" for status, count in self.postfix.items())
        line = f"\rsending: {self.count:,}{total} msg" + (f" ({counts})" if counts else "")
        try:
            self.stream.write(line + end)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: no progress, no failure
            pass

    def close(self) -> None:
        self._show("\n")


def progress_bar(progress: bool, messages: object) -> Any:
    if not progress:
        return None
    total = len(messages) if isinstance(messages, Sized) else None
    try:
        tqdm = require_tqdm()
    except ImportError:
        return TextProgress(total)
    return tqdm(total=total, unit="msg", desc="sending", dynamic_ncols=True)
