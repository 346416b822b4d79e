"""``client.messages``: sending template messages, one at a time or as a campaign.

:class:`Messages` and :class:`AsyncMessages` have the same surface; each method only checks
its arguments (the campaign's in ``campaign_options.py``, shared by both) and calls the Rust
client, which validates, sends, retries and decodes. A campaign is then driven by
``bizmsg._campaign.drivers``, imported on the first campaign (``import bizmsg`` stays lean).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Literal, overload

from .. import _native
from .._timeout import TimeoutArg, call_timeout
from ..models import ResponseMeta, SendResult, Template, TemplateParameters
from .campaign_options import (
    CampaignOptions,
    PlanOptions,
    planner_arguments,
    resolve,
    spelled_out,
    start_campaign,
)
from . import Resource

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .._campaign import BulkResult, CampaignPlan
    from .._campaign.message import AsyncMessageInput as AsyncInput
    from .._campaign.message import MessageInput as Input

__all__ = ["Messages", "AsyncMessages"]

#: What a send returns: a result whose ``meta`` is the call's (never ``None``).
Sent = SendResult[ResponseMeta]


class Messages(Resource):
    """``client.messages``: sending template messages."""

    __slots__ = ()

    @overload
    def send_many(self, messages: Input, *, dry_run: Literal[False] = ...,
                  **options: Unpack[CampaignOptions]) -> BulkResult: ...
    @overload
    def send_many(self, messages: Input, *, dry_run: Literal[True],
                  **options: Unpack[CampaignOptions]) -> CampaignPlan: ...

    @spelled_out(CampaignOptions)
    def send_many(self, messages: Input, *, dry_run: bool = False,
                  **options: Unpack[CampaignOptions]) -> BulkResult | CampaignPlan:
        """Sends every message of ``messages`` (any iterable, read lazily in chunks) with up to
        ``concurrency`` requests in flight, and returns a :class:`BulkResult` with one outcome
        per message, in input order.

        A per-message problem never raises: an invalid message is a ``failed`` outcome with a
        :class:`ValidationError`, a failed commit ``rejected``, an ambiguous failure
        ``unknown`` (never retried blindly). ``rate_limit`` paces the whole batch (messages
        per second); ``pace="auto"`` looks every sender up once, fails the messages of senders
        that cannot send, paces each sender under its throughput and warns when an account's
        unique recipients pass its messaging tier. ``dedupe`` skips exact repeats.
        ``journal`` (a SQLite file) makes the campaign resumable after a crash or Ctrl-C;
        ``campaign_id`` derives every idempotency key from the campaign, so a re-run sends
        with the same keys; ``resend_unknown`` re-sends, with their keys, messages an earlier
        run left in doubt. ``stop_on_error`` stops at the first message that is not sent.
        Ctrl-C stops taking messages, lets those in flight finish and raises
        ``KeyboardInterrupt`` with the partial result on ``.bulk_result``.
        ``stop_on_sigterm=True`` makes SIGTERM (systemd, Docker, Kubernetes, Celery's warm
        shutdown, ``timeout``) do the same, then raise ``SystemExit(143)`` with
        ``.bulk_result``; it is installed only on the main thread, over the default
        disposition (an application's own handler is left alone), and removed afterwards.

        ``dry_run=True`` sends nothing and returns the :meth:`plan` instead.
        """
        resolved = resolve(options, CampaignOptions, "Messages.send_many")
        if dry_run:
            return self._plan(messages, resolved)
        run = start_campaign(self._native, resolved)
        from .._campaign import drivers

        return drivers.send_many(run, messages, resolved)

    @spelled_out(PlanOptions)
    def plan(self, messages: Input, **options: Unpack[PlanOptions]
             ) -> CampaignPlan:
        """Checks a campaign without sending anything: every message validated, duplicates
        found, each sender looked up once (status, quality, throughput) and each account's
        unique recipients counted against its messaging tier, and the duration estimated at
        the chosen pace. Reads ``messages`` once, in chunks: cheap for a million rows."""
        return self._plan(messages, resolve(options, PlanOptions, "Messages.plan"))

    def _plan(self, messages: Input, resolved: dict[str, Any]) -> CampaignPlan:
        planner = self._native.planner(**planner_arguments(resolved))
        from .._campaign import drivers

        return drivers.plan(planner, messages)

    @spelled_out(CampaignOptions)
    def send_many_iter(self, messages: Input,
                       **options: Unpack[CampaignOptions]) -> Iterator[_native.SendOutcome]:
        """:meth:`send_many`, yielding each outcome as it completes (completion order) and
        keeping none: memory stays bounded however many messages go through. Leaving the
        loop early stops the campaign (messages in flight finish)."""
        resolved = resolve(options, CampaignOptions, "Messages.send_many_iter")
        run = start_campaign(self._native, resolved)
        from .._campaign import drivers

        return drivers.send_many_iter(run, messages, resolved)

    @overload
    def send(self, *, to: str, from_: str, template: Template, raw: Literal[False] = ...,
             timeout: TimeoutArg = ..., max_retries: int | None = ...,
             idempotency_key: str | None = ...) -> Sent: ...
    @overload
    def send(self, *, to: str, from_: str, template: Template, raw: Literal[True],
             timeout: TimeoutArg = ..., max_retries: int | None = ...,
             idempotency_key: str | None = ...) -> dict[str, Any]: ...

    def send(self, *, to: str, from_: str, template: Template, raw: bool = False,
             timeout: TimeoutArg = None, max_retries: int | None = None,
             idempotency_key: str | None = None) -> Sent | dict[str, Any]:
        """Sends ``template`` from the business number ``from_`` to ``to``.

        Phone numbers may contain ``+``, spaces, dashes, dots and parentheses; 8 to 15 digits
        must remain. Raises :class:`SendRejectedError` when the service reports a failed
        commit, and :class:`SendOutcomeUnknownError` when the message may or may not have been
        sent (it is then not retried; see that class for reconciling). ``idempotency_key``
        (1 to 255 visible ASCII characters) replaces the fresh key every send gets.
        ``raw=True`` returns the decoded JSON body as received.
        """
        return self._native.send(
            to=to, from_=from_, name=template.name, parameters=template.parameters,
            language=template.language, raw=raw, timeout=call_timeout(timeout),
            max_retries=max_retries, idempotency_key=idempotency_key,
        )

    @overload
    def send_template(self, *, to: str, from_: str, name: str, parameters: TemplateParameters,
                      language: str, raw: Literal[False] = ..., timeout: TimeoutArg = ...,
                      max_retries: int | None = ..., idempotency_key: str | None = ...
                      ) -> Sent: ...
    @overload
    def send_template(self, *, to: str, from_: str, name: str, parameters: TemplateParameters,
                      language: str, raw: Literal[True], timeout: TimeoutArg = ...,
                      max_retries: int | None = ..., idempotency_key: str | None = ...
                      ) -> dict[str, Any]: ...

    def send_template(self, *, to: str, from_: str, name: str, parameters: TemplateParameters,
                      language: str, raw: bool = False, timeout: TimeoutArg = None,
                      max_retries: int | None = None, idempotency_key: str | None = None
                      ) -> Sent | dict[str, Any]:
        """:meth:`send` with the template given field by field."""
        return self._native.send(
            to=to, from_=from_, name=name, parameters=parameters, language=language, raw=raw,
            timeout=call_timeout(timeout), max_retries=max_retries,
            idempotency_key=idempotency_key,
        )


class AsyncMessages(Resource):
    """``client.messages`` of an :class:`AsyncClient`."""

    __slots__ = ()

    @overload
    async def send_many(self, messages: AsyncInput, *,
                        dry_run: Literal[False] = ...,
                        **options: Unpack[CampaignOptions]) -> BulkResult: ...
    @overload
    async def send_many(self, messages: AsyncInput, *,
                        dry_run: Literal[True],
                        **options: Unpack[CampaignOptions]) -> CampaignPlan: ...

    @spelled_out(CampaignOptions)
    async def send_many(self, messages: AsyncInput, *,
                        dry_run: bool = False,
                        **options: Unpack[CampaignOptions]) -> BulkResult | CampaignPlan:
        """Awaitable :meth:`Messages.send_many`; ``messages`` may also be an async iterable.
        Cancelling the task stops it like Ctrl-C does a sync one: ``CancelledError`` is raised
        once the messages in flight settled, with the partial result on ``.bulk_result``.
        ``dry_run=True`` sends nothing and returns the :meth:`plan` instead."""
        resolved = resolve(options, CampaignOptions, "AsyncMessages.send_many")
        if dry_run:
            return await self._plan(messages, resolved)
        run = start_campaign(self._native, resolved, in_loop=True)
        from .._campaign import drivers

        return await drivers.send_many_async(run, messages, resolved)

    @spelled_out(PlanOptions)
    async def plan(self, messages: AsyncInput,
                   **options: Unpack[PlanOptions]) -> CampaignPlan:
        """Awaitable :meth:`Messages.plan`; ``messages`` may also be an async iterable."""
        return await self._plan(messages, resolve(options, PlanOptions, "AsyncMessages.plan"))

    async def _plan(self, messages: AsyncInput,
                    resolved: dict[str, Any]) -> CampaignPlan:
        planner = await self._native.planner_async(**planner_arguments(resolved))
        from .._campaign import drivers

        return await drivers.plan_async(planner, messages)

    @spelled_out(CampaignOptions)
    def send_many_iter(self, messages: AsyncInput,
                       **options: Unpack[CampaignOptions]
                       ) -> AsyncIterator[_native.SendOutcome]:
        """``async for`` over each outcome as it completes (see :meth:`send_many`)."""
        resolved = resolve(options, CampaignOptions, "AsyncMessages.send_many_iter")
        run = start_campaign(self._native, resolved, in_loop=_loop_running())
        from .._campaign import drivers

        return drivers.send_many_iter_async(run, messages, resolved)

    @overload
    async def send(self, *, to: str, from_: str, template: Template, raw: Literal[False] = ...,
                   timeout: TimeoutArg = ..., max_retries: int | None = ...,
                   idempotency_key: str | None = ...) -> Sent: ...
    @overload
    async def send(self, *, to: str, from_: str, template: Template, raw: Literal[True],
                   timeout: TimeoutArg = ..., max_retries: int | None = ...,
                   idempotency_key: str | None = ...) -> dict[str, Any]: ...

    async def send(self, *, to: str, from_: str, template: Template, raw: bool = False,
                   timeout: TimeoutArg = None, max_retries: int | None = None,
                   idempotency_key: str | None = None) -> Sent | dict[str, Any]:
        """Awaitable :meth:`Messages.send`."""
        return await self._native.send_async(
            to=to, from_=from_, name=template.name, parameters=template.parameters,
            language=template.language, raw=raw, timeout=call_timeout(timeout),
            max_retries=max_retries, idempotency_key=idempotency_key,
        )

    @overload
    async def send_template(self, *, to: str, from_: str, name: str,
                            parameters: TemplateParameters, language: str,
                            raw: Literal[False] = ..., timeout: TimeoutArg = ...,
                            max_retries: int | None = ..., idempotency_key: str | None = ...
                            ) -> Sent: ...
    @overload
    async def send_template(self, *, to: str, from_: str, name: str,
                            parameters: TemplateParameters, language: str,
                            raw: Literal[True], timeout: TimeoutArg = ...,
                            max_retries: int | None = ..., idempotency_key: str | None = ...
                            ) -> dict[str, Any]: ...

    async def send_template(self, *, to: str, from_: str, name: str,
                            parameters: TemplateParameters, language: str, raw: bool = False,
                            timeout: TimeoutArg = None, max_retries: int | None = None,
                            idempotency_key: str | None = None) -> Sent | dict[str, Any]:
        """Awaitable :meth:`Messages.send_template`."""
        return await self._native.send_async(
            to=to, from_=from_, name=name, parameters=parameters, language=language, raw=raw,
            timeout=call_timeout(timeout), max_retries=max_retries,
            idempotency_key=idempotency_key,
        )


def _loop_running() -> bool:
    """Whether an event loop runs in this thread (``send_many_iter`` is a plain method: it may
    be called before the loop that iterates it runs)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
