"""The drivers of a campaign: ``send_many``, ``send_many_iter`` and ``plan``, sync and async.

The whole batch runs in Rust (``bizmsg._native.CampaignRun``): it asks for input when its queue
runs low, sends with up to ``concurrency`` requests in flight, and hands outcomes back in
batches. The drivers here only answer its events, once per chunk of input and once per batch of
outcomes, never per message: they pull the next chunk from your iterable (sync or async), call
``on_result`` and update the progress bar. How an event is answered (:class:`_Events`) is the
same for both; the sync and the async driver differ only in how they wait and read the input.

Stopping is always graceful first: on Ctrl-C (or a cancelled task, or an exception from your
iterable or ``on_result``) no new message is taken, messages in flight finish (or, after a
second Ctrl-C, are abandoned and reported ``unknown``), the journal is brought up to date, and
the exception is raised with the partial :class:`BulkResult` on its ``bulk_result`` attribute.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from .. import _native
from .collector import Collector, attach, progress_bar
from .message import rows_of
from .results import BulkResult, CampaignPlan

if TYPE_CHECKING:
    from .._native import SendOutcome
    from .message import AsyncMessageInput as AsyncInput
    from .message import MessageInput as Input
    from .message import MessageLike

__all__ = ["plan", "plan_async", "send_many", "send_many_async", "send_many_iter",
           "send_many_iter_async"]

#: Messages checked per call into Rust while planning.
_PLAN_CHUNK = 4096

#: Takes a batch of outcomes and its event sequence (a batch handed out again has the same).
Deliver = Callable[[int, list["SendOutcome"]], object]


def plan(planner: _native.CampaignPlanner,
         messages: Input) -> CampaignPlan:
    source = iter(rows_of(messages))
    while planner.feed(source, _PLAN_CHUNK) == _PLAN_CHUNK:
        pass
    return CampaignPlan._from_native(planner.finish())


async def plan_async(planner: _native.CampaignPlanner,
                     messages: AsyncInput) -> CampaignPlan:
    rows = rows_of(messages)  # a DataFrame: its rows
    if not isinstance(rows, AsyncIterable):
        return plan(planner, rows)
    source = aiter(rows)
    while True:
        chunk, failure = await _take(source, _PLAN_CHUNK)
        planner.feed(iter(chunk), len(chunk))
        if failure is not None:
            raise failure
        if len(chunk) < _PLAN_CHUNK:
            return CampaignPlan._from_native(planner.finish())


class _Events:
    """Answers a campaign's events for a driver, sync or async: feeds input, hands each batch
    of outcomes to ``deliver``, keeps warnings and the end.

    An event is acknowledged only once it was used: if an interruption (KeyboardInterrupt,
    raised by Python at any bytecode, or a cancellation) lands between the wait returning it and
    its use, the next wait hands it out again, and no batch of outcomes is lost."""

    def __init__(self, run: _native.CampaignRun, collector: Collector, deliver: Deliver) -> None:
        self.run = run
        self.collector = collector
        self.deliver = deliver
        #: The sequence of the last event used, for the next wait.
        self.acknowledged = 0

    def answer(self, event: tuple[int, str, Any], source: Iterator[MessageLike],
               failure: BaseException | None = None) -> str:
        """Uses ``event``, an input event from ``source`` (after which ``failure``, what an
        async input raised, stops the campaign). Returns the event's kind, ``""`` when it
        could not be used (it is handed out again)."""
        sequence, kind, value = event
        try:
            if kind == "input":
                _feed(self.run, source, value, self.collector)
                if failure is not None:
                    self.collector.interrupted(failure, self.run)
                    self.run.end_input()
            elif kind == "outcomes":
                self.deliver(sequence, value)
            elif kind == "warning":
                self.collector.warning(value)
            else:
                self.collector.done = value
            self.acknowledged = sequence
        except BaseException as exc:  # Ctrl-C or cancellation, on_result's own exception
            self.collector.interrupted(exc, self.run)
            if kind == "input":
                self.run.end_input()
            return ""
        return kind


def _feed(run: _native.CampaignRun, source: Iterator[MessageLike], wanted: int,
          collector: Collector) -> None:
    if collector.raised is not None:
        run.end_input()
        return
    try:
        run.feed(source, wanted)
    except BaseException as exc:  # the input's own failure (a DB cursor error), or Ctrl-C
        collector.interrupted(exc, run)
        run.end_input()


def drive(run: _native.CampaignRun, messages: Iterable[MessageLike], collector: Collector,
          deliver: Deliver) -> Iterator[None]:
    """Answers the campaign's events until it is done, yielding after each batch of outcomes
    (so a generator can pass them on)."""
    events = _Events(run, collector, deliver)
    source = iter(messages)
    while True:
        try:
            event = run.wait(events.acknowledged)
        except KeyboardInterrupt as exc:
            collector.interrupted(exc, run)
            continue
        if event is None:
            return
        used = events.answer(event, source)
        if used == "done":
            return
        if used == "outcomes":
            yield


async def drive_async(run: _native.CampaignRun,
                      messages: Iterable[MessageLike] | AsyncIterable[MessageLike],
                      collector: Collector, deliver: Deliver) -> AsyncIterator[None]:
    """:func:`drive` on an event loop; ``messages`` may be an async iterable, and cancelling
    the task stops the campaign like Ctrl-C stops a sync one."""
    import asyncio  # loaded already: this runs on an event loop

    events = _Events(run, collector, deliver)
    # An async input is read a chunk at a time here (``pending``); a sync one is fed as is.
    source: Iterator[MessageLike] = iter(())
    pending: AsyncIterator[MessageLike] | None = None
    if isinstance(messages, AsyncIterable):
        pending = aiter(messages)
    else:
        source = iter(messages)
    while True:
        try:
            event = await run.wait_async(events.acknowledged)
        except asyncio.CancelledError as exc:
            collector.interrupted(exc, run)
            continue
        if event is None:
            return
        if pending is not None and event[1] == "input" and collector.raised is None:
            # The chunk asked for is read first (a shorter one ends the input), then fed as a
            # sync input is; what the input raised stops the campaign once the rest is fed.
            try:
                chunk, failure = await _take(pending, event[2])
            except BaseException as exc:  # an interruption landing between _take's lines
                chunk, failure = [], exc
            used = events.answer(event, iter(chunk), failure)
        else:
            used = events.answer(event, source)
        if used == "done":
            return
        if used == "outcomes":
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


#: The exit status a program stopped by SIGTERM ends with (128 + 15, as shells report a
#: process SIGTERM killed): ``SystemExit(143)`` ends a campaign that SIGTERM stopped.
SIGTERM_STATUS = 143


class _StopOnSignals:
    """While a sync ``send_many`` runs on the main thread, Ctrl-C stops the campaign instead of
    raising KeyboardInterrupt at whatever bytecode Python is at (which could be anywhere: in
    the driver between two events, in ``on_result``, in the input's generator), and a second
    Ctrl-C abandons the messages in flight. The KeyboardInterrupt is raised, with the partial
    result, once the campaign has settled.

    With ``stop_on_sigterm`` (any campaign, sync or async), SIGTERM does the same, and the
    campaign then raises ``SystemExit(143)`` with the partial result: what systemd, Docker,
    Kubernetes, Celery's warm shutdown and ``timeout`` send becomes a graceful stop.

    A handler is installed only on the main thread (Python runs signal handlers there) and only
    over the default one (``default_int_handler`` for SIGINT, ``SIG_DFL`` for SIGTERM): a
    handler the application set itself is left alone, and for SIGTERM a WARNING says so. The
    previous handler is put back when the campaign ends.
    """

    def __init__(self, run: _native.CampaignRun, collector: Collector, *, sigint: bool,
                 sigterm: bool) -> None:
        self.run = run
        self.collector = collector
        self.sigint = sigint
        self.sigterm = sigterm
        self.previous: list[tuple[int, Any]] = []

    def __enter__(self) -> None:
        if not (self.sigint or self.sigterm):
            return
        import signal
        import threading

        main = threading.current_thread() is threading.main_thread()
        if (self.sigint and main
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.previous.append(
                (signal.SIGINT, signal.signal(signal.SIGINT, self._interrupted)))
        if not self.sigterm:
            return
        current = signal.getsignal(signal.SIGTERM)
        if main and current == signal.SIG_DFL:
            self.previous.append(
                (signal.SIGTERM, signal.signal(signal.SIGTERM, self._terminated)))
            return
        import logging  # only here: `import bizmsg` stays free of it

        why = ("it runs outside the main thread, where Python cannot handle signals" if not main
               else f"SIGTERM already has a handler ({current!r}), which is left alone")
        logging.getLogger("bizmsg").warning(
            "stop_on_sigterm=True is ignored for this campaign: %s", why)

    def _interrupted(self, signum: int, frame: object) -> None:
        self.collector.interrupted(KeyboardInterrupt(), self.run)

    def _terminated(self, signum: int, frame: object) -> None:
        self.collector.interrupted(SystemExit(SIGTERM_STATUS), self.run)

    def __exit__(self, *exc_info: object) -> None:
        if self.previous:
            import signal

            while self.previous:
                signum, handler = self.previous.pop()
                signal.signal(signum, handler)


def _collector(keep: bool, options: Mapping[str, Any], messages: object) -> Collector:
    return Collector(keep, options["on_result"], progress_bar(options["progress"], messages),
                     concurrency=options["concurrency"])


def send_many(run: _native.CampaignRun, messages: Input,
              options: Mapping[str, Any]) -> BulkResult:
    rows = rows_of(messages)  # a DataFrame: its rows
    source = iter(rows)
    collector = _collector(True, options, rows)
    with _StopOnSignals(run, collector, sigint=True, sigterm=options["stop_on_sigterm"]):
        for _ in drive(run, source, collector, collector.outcomes_arrived):
            pass
        collector.account_for_the_rest(run, rows, source)
    return collector.finish()


async def send_many_async(run: _native.CampaignRun,
                          messages: AsyncInput,
                          options: Mapping[str, Any]) -> BulkResult:
    rows = rows_of(messages)  # a DataFrame: its rows
    source = rows if isinstance(rows, AsyncIterable) else iter(rows)
    collector = _collector(True, options, rows)
    # Ctrl-C is the event loop's to handle (asyncio.run cancels the task: a graceful stop).
    with _StopOnSignals(run, collector, sigint=False, sigterm=options["stop_on_sigterm"]):
        async for _ in drive_async(run, source, collector, collector.outcomes_arrived):
            pass
        if not isinstance(source, AsyncIterable):
            collector.account_for_the_rest(run, rows, source)
        elif not run.exhausted:
            collector.unread_from = run.read
    return collector.finish()


class _Ready:
    """The batches of outcomes a ``send_many_iter`` has received and not yet yielded. By event
    sequence: a batch handed out again (an interruption before it was acknowledged) has the
    same, and is yielded once. (Keyed per batch, in one store, so an interruption cannot leave
    a batch half recorded; nothing is done per outcome.)"""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector
        self.batches: dict[int, tuple[SendOutcome, ...]] = {}

    def deliver(self, sequence: int, batch: list[SendOutcome]) -> None:
        # Copied before on_result is given the list: it may keep or change it.
        kept = tuple(batch)
        self.collector.outcomes_arrived(sequence, batch)
        self.batches[sequence] = kept

    def take(self) -> Iterator[SendOutcome]:
        """Every outcome received, once; the store is emptied after the last."""
        for batch in self.batches.values():
            yield from batch
        self.batches.clear()


class Watcher(Protocol):
    """Told when a ``send_many_iter`` begins (its first ``next()``) and when it ends, once, with
    its result or the exception that ended it (the consumer leaving the loop early is a
    ``GeneratorExit``, with what the campaign had done). The instrumentation's
    (``bizmsg.instrumentation``): it ends the campaign's span with no work per outcome. Never
    given by a user: it is set in ``WATCHER`` around the call to ``send_many_iter``, so that
    whatever else wraps that method still runs."""

    def began(self) -> None: ...

    def ended(self, result: BulkResult | None, error: BaseException | None) -> None: ...


#: The watcher of the ``send_many_iter`` called now, if any (read when it is called).
WATCHER: ContextVar[Watcher | None] = ContextVar("bizmsg_campaign_watcher", default=None)


def _ended(watcher: Watcher, collector: Collector | None, result: BulkResult | None,
           error: BaseException | None, cut_short: bool) -> None:
    """Tells ``watcher`` the campaign ended (with what it had done by then, on an exception).
    ``cut_short``: the consumer left before the campaign was done; a consumer that left while it
    read what a campaign that had ended on its own still had to say (its skipped rest) leaves
    the campaign's own end. A ``KeyboardInterrupt`` raised while the watcher is told (a second
    Ctrl-C landing in a slow span exporter) carries the campaign's result on ``bulk_result``,
    as the campaign's own interruption does."""
    if error is not None and collector is not None:
        try:
            result = collector.result()
        except Exception:  # pragma: no cover - the error that ended it is what matters
            result = None
    if isinstance(error, GeneratorExit) and not cut_short:
        error = None
    try:
        watcher.ended(result, error)
    except BaseException as interrupted:
        if result is not None and getattr(interrupted, "bulk_result", None) is None:
            attach(interrupted, result)
        raise


def send_many_iter(run: _native.CampaignRun, messages: Input, options: Mapping[str, Any]
                   ) -> Generator[SendOutcome, None, BulkResult]:
    """Yields each outcome as it completes; returns (``StopIteration.value``) the
    :class:`BulkResult` of the campaign, without outcomes (none was kept) but with its counts,
    warnings, ``stopped_by`` and ``stop_reason``: the CLI reads why a campaign stopped there."""
    return _outcomes(run, messages, options, WATCHER.get())


def send_many_iter_async(run: _native.CampaignRun, messages: AsyncInput,
                         options: Mapping[str, Any]) -> AsyncIterator[SendOutcome]:
    return _outcomes_async(run, messages, options, WATCHER.get())


def _outcomes(run: _native.CampaignRun, messages: Input, options: Mapping[str, Any],
              watcher: Watcher | None) -> Generator[SendOutcome, None, BulkResult]:
    if watcher is not None:
        watcher.began()
    collector: Collector | None = None
    cut_short = False
    try:
        rows = rows_of(messages)  # a DataFrame: its rows
        source = iter(rows)
        collector = _collector(False, options, rows)
        ready = _Ready(collector)
        steps = drive(run, source, collector, ready.deliver)
        with _StopOnSignals(run, collector, sigint=False, sigterm=options["stop_on_sigterm"]):
            try:
                for _ in steps:
                    for outcome in ready.take():
                        try:
                            yield outcome
                        except KeyboardInterrupt as exc:
                            # Thrown in (``.throw()``) by a consumer interrupted while it
                            # handled an outcome, as the CLI does: the campaign stops taking
                            # messages, as for a Ctrl-C during its wait, and the outcomes
                            # still to come are yielded.
                            collector.interrupted(exc, run)
            finally:
                if collector.done is None:
                    # The consumer stopped early (break, an exception): stop taking messages
                    # and let those in flight settle, so the journal ends consistent.
                    cut_short = True
                    run.stop(False)
                    for _ in steps:
                        pass
            # Ended by the campaign, not the consumer: the messages it never read too.
            yield from collector.account_for_the_rest(run, rows, source)
        result = collector.finish()
    except BaseException as error:
        if watcher is not None:
            _ended(watcher, collector, None, error, cut_short)
        raise
    if watcher is not None:
        _ended(watcher, collector, result, None, cut_short)
    return result


async def _outcomes_async(run: _native.CampaignRun, messages: AsyncInput,
                          options: Mapping[str, Any], watcher: Watcher | None
                          ) -> AsyncIterator[SendOutcome]:
    if watcher is not None:
        watcher.began()
    collector: Collector | None = None
    cut_short = False
    try:
        rows = rows_of(messages)  # a DataFrame: its rows
        source = rows if isinstance(rows, AsyncIterable) else iter(rows)
        collector = _collector(False, options, rows)
        ready = _Ready(collector)
        steps = drive_async(run, source, collector, ready.deliver)
        with _StopOnSignals(run, collector, sigint=False, sigterm=options["stop_on_sigterm"]):
            try:
                async for _ in steps:
                    for outcome in ready.take():
                        yield outcome
            finally:
                if collector.done is None:
                    cut_short = True
                    run.stop(False)
                    async for _ in steps:
                        pass
            if not isinstance(source, AsyncIterable):
                for outcome in collector.account_for_the_rest(run, rows, source):
                    yield outcome
            elif not run.exhausted:
                collector.unread_from = run.read
        result = collector.finish()
    except BaseException as error:
        if watcher is not None:
            _ended(watcher, collector, None, error, cut_short)
        raise
    if watcher is not None:
        _ended(watcher, collector, result, None, cut_short)
