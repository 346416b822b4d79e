"""The Python faces of :class:`Client` and :class:`AsyncClient`.

They only resolve defaults (environment variables) and forward to the Rust client, which
validates, sends, retries and decodes. Resources are attributes, as in the best SDKs:
``client.messages``, ``client.business_accounts``, ``client.business_phone_numbers``.
"""

from __future__ import annotations

import math
import os
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _logging, _native
from .errors import BizmsgError, ConfigurationError, ValidationError
from ._pagination import AsyncPage, Page, PageSource, items_of, items_of_async
from .models import BusinessAccount, BusinessPhoneNumber, SendResult, Template, TemplateParameters

if TYPE_CHECKING:
    from ._campaign import BulkResult, CampaignPlan, MessageLike

__all__ = [
    "Client",
    "AsyncClient",
    "Timeout",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RESPONSE_BYTES",
]

DEFAULT_MAX_RETRIES = 2
#: Answers with a longer body raise :class:`~bizmsg.ResponseTooLargeError` (16 MiB).
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Timeout:
    """Timeouts in seconds; ``None`` leaves a part to the client's setting.

    ``connect`` bounds establishing a connection (a pool-wide setting: give it when the client
    is made), ``read`` bounds one attempt once connected, ``total`` bounds the whole call
    including retries and their waits. A plain float anywhere a timeout is taken means
    ``Timeout(total=that)``.
    """

    connect: float | None = None
    read: float | None = None
    total: float | None = None

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, (int, float)) and math.isfinite(value) and value > 0
            ):
                raise ConfigurationError(
                    f"Timeout.{name} must be a positive number of seconds, got {value!r}"
                )


DEFAULT_TIMEOUT = Timeout(connect=10.0, total=30.0)

TimeoutArg = Union[float, Timeout, None]
TokenArg = Union[str, Callable[[], str], Callable[[], Awaitable[str]], None]
RetryHook = Callable[[int, BizmsgError, float], object]


def _resolve(
    token: Any, base_url: str | None, timeout: TimeoutArg
) -> tuple[Any, str, Timeout]:
    if token is None:
        token = os.environ.get("BIZMSG_TOKEN") or None
    if base_url is None:
        base_url = os.environ.get("BIZMSG_BASE_URL") or None
    missing = [
        what
        for what, value in (
            ("a token (pass token= or set BIZMSG_TOKEN)", token),
            ("a base URL (pass base_url= or set BIZMSG_BASE_URL)", base_url),
        )
        if value is None
    ]
    if missing:
        raise ConfigurationError("bizmsg needs " + " and ".join(missing))
    if not isinstance(token, str) and not callable(token):
        raise ConfigurationError(
            f"token must be a string or a callable returning one, got {type(token).__name__}"
        )
    assert base_url is not None
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    elif not isinstance(timeout, Timeout):
        timeout = Timeout(connect=DEFAULT_TIMEOUT.connect, total=timeout)
    return token, base_url, timeout


class _BaseClient:
    __slots__ = ("_native",)
    _native: _native.NativeClient

    @property
    def base_url(self) -> str:
        """The service's base address."""
        return self._native.base_url

    @property
    def max_retries(self) -> int:
        return self._native.max_retries

    @property
    def timeout(self) -> Timeout:
        connect, read, total = self._native.timeout
        return Timeout(connect=connect, read=read, total=total)

    @property
    def max_response_bytes(self) -> int:
        """The largest answer body this client reads (see ``max_response_bytes=``)."""
        return self._native.max_response_bytes

    @property
    def is_closed(self) -> bool:
        return self._native.is_closed

    def __repr__(self) -> str:
        # The token is never shown.
        return f"{type(self).__name__}(base_url={self.base_url!r}, token=<redacted>)"


def _is_async_callable(token: object) -> bool:
    import inspect  # only for token callables: `import bizmsg` stays free of it

    return inspect.iscoroutinefunction(token)


def _native_client(
    token: Any,
    base_url: str | None,
    timeout: TimeoutArg,
    max_retries: int,
    success_codes: Any,
    default_headers: Mapping[str, str] | None,
    on_retry: RetryHook | None,
    proxy: str | None,
    verify: bool | str,
    allow_insecure_http: bool,
    max_response_bytes: int,
    is_async: bool,
) -> _native.NativeClient:
    token, base_url, resolved = _resolve(token, base_url, timeout)
    if not is_async and callable(token) and _is_async_callable(token):
        raise ConfigurationError(
            "Client needs a plain token callable; use AsyncClient for an async one"
        )
    codes = None if success_codes is None else _codes(success_codes)
    _logging.ensure_installed()
    # A level set on the "bizmsg" logger since the last client applies from this one on.
    _native.refresh_logging()
    return _native.NativeClient(
        token,
        base_url,
        resolved,
        max_retries,
        codes,
        dict(default_headers or {}),
        on_retry,
        proxy,
        verify,
        allow_insecure_http,
        max_response_bytes,
    )


class Client(_BaseClient):
    """A synchronous client. Safe to share between threads; calls release the GIL and can be
    interrupted with Ctrl-C.

    ``token`` defaults to ``$BIZMSG_TOKEN`` and ``base_url`` to ``$BIZMSG_BASE_URL``.
    ``success_codes`` are the send-result codes that mean "committed" (default ``("0",)``,
    what the sandbox answers; compared as strings).
    """

    __slots__ = ("messages", "business_accounts", "business_phone_numbers")
    messages: Messages
    business_accounts: BusinessAccounts
    business_phone_numbers: BusinessPhoneNumbers

    def __init__(
        self,
        token: str | Callable[[], str] | None = None,
        *,
        base_url: str | None = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        success_codes: Any = None,
        default_headers: Mapping[str, str] | None = None,
        on_retry: RetryHook | None = None,
        proxy: str | None = None,
        verify: bool | str = True,
        allow_insecure_http: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        native = _native_client(
            token, base_url, timeout, max_retries, success_codes, default_headers,
            on_retry, proxy, verify, allow_insecure_http, max_response_bytes, False,
        )
        self._attach(native)

    def _attach(self, native: _native.NativeClient) -> None:
        self._native = native
        self.messages = Messages(native)
        self.business_accounts = BusinessAccounts(native)
        self.business_phone_numbers = BusinessPhoneNumbers(native)

    def with_options(
        self,
        *,
        timeout: TimeoutArg = None,
        max_retries: int | None = None,
        headers: Mapping[str, str] | None = None,
        on_retry: RetryHook | None = None,
    ) -> Client:
        """A client with other defaults that shares this one's connection pool (cheap: call
        it per request if you like)."""
        clone = object.__new__(Client)
        clone._attach(
            self._native.with_options(_timeout_arg(timeout), max_retries, dict(headers or {}), on_retry)
        )
        return clone

    def close(self) -> None:
        """Closes the connection pool. Later calls raise :class:`ClientClosedError`."""
        self._native.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient(_BaseClient):
    """An asyncio client with the same surface as :class:`Client`; every call is awaitable
    and works on any running loop (a Jupyter notebook's included). Cancelling the task
    cancels the request. ``token`` may also be an ``async`` callable."""

    __slots__ = ("messages", "business_accounts", "business_phone_numbers")
    messages: AsyncMessages
    business_accounts: AsyncBusinessAccounts
    business_phone_numbers: AsyncBusinessPhoneNumbers

    def __init__(
        self,
        token: TokenArg = None,
        *,
        base_url: str | None = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        success_codes: Any = None,
        default_headers: Mapping[str, str] | None = None,
        on_retry: RetryHook | None = None,
        proxy: str | None = None,
        verify: bool | str = True,
        allow_insecure_http: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        native = _native_client(
            token, base_url, timeout, max_retries, success_codes, default_headers,
            on_retry, proxy, verify, allow_insecure_http, max_response_bytes, True,
        )
        self._attach(native)

    def _attach(self, native: _native.NativeClient) -> None:
        self._native = native
        self.messages = AsyncMessages(native)
        self.business_accounts = AsyncBusinessAccounts(native)
        self.business_phone_numbers = AsyncBusinessPhoneNumbers(native)

    def with_options(
        self,
        *,
        timeout: TimeoutArg = None,
        max_retries: int | None = None,
        headers: Mapping[str, str] | None = None,
        on_retry: RetryHook | None = None,
    ) -> AsyncClient:
        """A client with other defaults sharing this one's connection pool."""
        clone = object.__new__(AsyncClient)
        clone._attach(
            self._native.with_options(_timeout_arg(timeout), max_retries, dict(headers or {}), on_retry)
        )
        return clone

    async def aclose(self) -> None:
        """Closes the connection pool. Later calls raise :class:`ClientClosedError`."""
        self._native.close()

    def close(self) -> None:
        """Same as :meth:`aclose`, for code that cannot await."""
        self._native.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _codes(success_codes: object) -> list[str]:
    # A lone string would otherwise be split into one-character codes: "10" -> "1", "0".
    if isinstance(success_codes, (str, bytes, int)) or not isinstance(success_codes, Iterable):
        raise ConfigurationError(
            f"success_codes must be a list of codes, like ['0'], not {success_codes!r}"
        )
    codes = [str(code).strip() for code in cast("Iterable[object]", success_codes)]
    if not codes or not all(codes):
        raise ConfigurationError("success_codes must name at least one non-empty code")
    return codes


def _timeout_arg(timeout: TimeoutArg) -> Timeout | None:
    if timeout is None or isinstance(timeout, Timeout):
        return timeout
    return Timeout(total=timeout)


class _Resource:
    __slots__ = ("_native",)

    def __init__(self, native: _native.NativeClient) -> None:
        self._native = native


#: ``on_result``: called with each batch of outcomes as it arrives (on the calling thread for
#: ``Client``, on the event loop for ``AsyncClient``).
OnResult = Callable[[list[_native.SendOutcome]], object]


def _campaign_run(native: _native.NativeClient, *, concurrency: int, rate_limit: float | None,
                  pace: str | None, stop_on_error: bool, journal: str | os.PathLike[str] | None,
                  campaign_id: str | None, dedupe: bool, resend_unknown: bool,
                  timeout: TimeoutArg, max_retries: int | None,
                  progress: bool) -> _native.CampaignRun:
    if progress:
        # Before the campaign starts: a missing tqdm is a usage error, not a half-started run.
        from ._campaign.collector import require_tqdm

        require_tqdm()
    return native.campaign(
        concurrency, _campaign_rate(rate_limit), _optional_text("pace", pace), stop_on_error,
        dedupe, _journal_path(journal), _optional_text("campaign_id", campaign_id),
        resend_unknown, _timeout_arg(timeout), max_retries,
    )


def _campaign_rate(rate_limit: object) -> float | None:
    # A number, not whatever float() accepts ("5" is a mistake in a rate, not a rate).
    if rate_limit is None:
        return None
    if isinstance(rate_limit, bool) or not isinstance(rate_limit, (int, float)):
        raise ValidationError(
            f"invalid rate_limit: must be a number of messages per second, got "
            f"{type(rate_limit).__name__} {rate_limit!r}", field="rate_limit")
    try:
        return float(rate_limit)
    except OverflowError:
        raise ValidationError(f"invalid rate_limit: {rate_limit} is out of range",
                              field="rate_limit") from None


def _optional_text(field: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValidationError(f"invalid {field}: must be a string, got {type(value).__name__} "
                          f"{value!r}", field=field)


def _journal_path(journal: object) -> str | None:
    if journal is None:
        return None
    try:
        path = os.fspath(journal)  # type: ignore[call-overload]
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise ValidationError(f"invalid journal: must be a file path, got "
                              f"{type(journal).__name__} {journal!r}", field="journal")
    return path


class Messages(_Resource):
    """``client.messages``: sending template messages."""

    __slots__ = ()

    @overload
    def send_many(
        self, messages: Iterable[MessageLike], *, concurrency: int = ...,
        rate_limit: float | None = ..., pace: Literal["auto"] | None = ..., progress: bool = ...,
        on_result: OnResult | None = ..., stop_on_error: bool = ...,
        journal: str | os.PathLike[str] | None = ..., campaign_id: str | None = ...,
        dedupe: bool = ..., resend_unknown: bool = ..., timeout: TimeoutArg = ...,
        max_retries: int | None = ..., dry_run: Literal[False] = ...,
    ) -> BulkResult: ...
    @overload
    def send_many(
        self, messages: Iterable[MessageLike], *, concurrency: int = ...,
        rate_limit: float | None = ..., pace: Literal["auto"] | None = ..., progress: bool = ...,
        on_result: OnResult | None = ..., stop_on_error: bool = ...,
        journal: str | os.PathLike[str] | None = ..., campaign_id: str | None = ...,
        dedupe: bool = ..., resend_unknown: bool = ..., timeout: TimeoutArg = ...,
        max_retries: int | None = ..., dry_run: Literal[True],
    ) -> CampaignPlan: ...

    def send_many(
        self, messages: Iterable[MessageLike], *, concurrency: int = 64,
        rate_limit: float | None = None, pace: Literal["auto"] | None = None,
        progress: bool = False, on_result: OnResult | None = None, stop_on_error: bool = False,
        journal: str | os.PathLike[str] | None = None, campaign_id: str | None = None,
        dedupe: bool = True, resend_unknown: bool = False, timeout: TimeoutArg = None,
        max_retries: int | None = None, dry_run: bool = False,
    ) -> BulkResult | CampaignPlan:
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

        ``dry_run=True`` sends nothing and returns the :meth:`plan` instead.
        """
        if dry_run:
            return self.plan(messages, rate_limit=rate_limit, pace=pace, dedupe=dedupe,
                             timeout=timeout, max_retries=max_retries)
        run = _campaign_run(
            self._native, concurrency=concurrency, rate_limit=rate_limit, pace=pace,
            stop_on_error=stop_on_error, journal=journal, campaign_id=campaign_id,
            dedupe=dedupe, resend_unknown=resend_unknown, timeout=timeout,
            max_retries=max_retries, progress=progress,
        )
        from ._campaign import drivers

        return drivers.send_many(run, messages, on_result=on_result, progress=progress)

    def plan(
        self, messages: Iterable[MessageLike], *, rate_limit: float | None = None,
        pace: Literal["auto"] | None = None, dedupe: bool = True, timeout: TimeoutArg = None,
        max_retries: int | None = None,
    ) -> CampaignPlan:
        """Checks a campaign without sending anything: every message validated, duplicates
        found, each sender looked up once (status, quality, throughput) and each account's
        unique recipients counted against its messaging tier, and the duration estimated at
        the chosen pace. Reads ``messages`` once, in chunks: cheap for a million rows."""
        planner = self._native.planner(
            _campaign_rate(rate_limit), _optional_text("pace", pace), dedupe,
            _timeout_arg(timeout), max_retries,
        )
        from ._campaign import drivers

        return drivers.plan(planner, messages)

    def send_many_iter(
        self, messages: Iterable[MessageLike], *, concurrency: int = 64,
        rate_limit: float | None = None, pace: Literal["auto"] | None = None,
        progress: bool = False, on_result: OnResult | None = None, stop_on_error: bool = False,
        journal: str | os.PathLike[str] | None = None, campaign_id: str | None = None,
        dedupe: bool = True, resend_unknown: bool = False, timeout: TimeoutArg = None,
        max_retries: int | None = None,
    ) -> Iterator[_native.SendOutcome]:
        """:meth:`send_many`, yielding each outcome as it completes (completion order) and
        keeping none: memory stays bounded however many messages go through. Leaving the
        loop early stops the campaign (messages in flight finish)."""
        run = _campaign_run(
            self._native, concurrency=concurrency, rate_limit=rate_limit, pace=pace,
            stop_on_error=stop_on_error, journal=journal, campaign_id=campaign_id,
            dedupe=dedupe, resend_unknown=resend_unknown, timeout=timeout,
            max_retries=max_retries, progress=progress,
        )
        from ._campaign import drivers

        return drivers.send_many_iter(run, messages, on_result=on_result, progress=progress)

    @overload
    def send(self, *, to: str, from_: str, template: Template, raw: Literal[False] = ...,
             timeout: TimeoutArg = ..., max_retries: int | None = ...,
             idempotency_key: str | None = ...) -> SendResult: ...
    @overload
    def send(self, *, to: str, from_: str, template: Template, raw: Literal[True],
             timeout: TimeoutArg = ..., max_retries: int | None = ...,
             idempotency_key: str | None = ...) -> dict[str, Any]: ...

    def send(self, *, to: str, from_: str, template: Template, raw: bool = False,
             timeout: TimeoutArg = None, max_retries: int | None = None,
             idempotency_key: str | None = None) -> SendResult | dict[str, Any]:
        """Sends ``template`` from the business number ``from_`` to ``to``.

        Phone numbers may contain ``+``, spaces, dashes, dots and parentheses; 8 to 15 digits
        must remain. Raises :class:`SendRejectedError` when the service reports a failed
        commit, and :class:`SendOutcomeUnknownError` when the message may or may not have been
        sent (it is then not retried; see that class for reconciling). ``idempotency_key``
        (1 to 255 visible ASCII characters) replaces the fresh key every send gets.
        ``raw=True`` returns the decoded JSON body as received.
        """
        return self._native.send(
            to, from_, template.name, template.parameters, template.language,
            raw, _timeout_arg(timeout), max_retries, idempotency_key,
        )

    @overload
    def send_template(self, *, to: str, from_: str, name: str, parameters: TemplateParameters,
                      language: str, raw: Literal[False] = ..., timeout: TimeoutArg = ...,
                      max_retries: int | None = ..., idempotency_key: str | None = ...
                      ) -> SendResult: ...
    @overload
    def send_template(self, *, to: str, from_: str, name: str, parameters: TemplateParameters,
                      language: str, raw: Literal[True], timeout: TimeoutArg = ...,
                      max_retries: int | None = ..., idempotency_key: str | None = ...
                      ) -> dict[str, Any]: ...

    def send_template(self, *, to: str, from_: str, name: str, parameters: TemplateParameters,
                      language: str, raw: bool = False, timeout: TimeoutArg = None,
                      max_retries: int | None = None, idempotency_key: str | None = None
                      ) -> SendResult | dict[str, Any]:
        """:meth:`send` with the template given field by field."""
        return self._native.send(
            to, from_, name, parameters, language,
            raw, _timeout_arg(timeout), max_retries, idempotency_key,
        )


class AsyncMessages(_Resource):
    """``client.messages`` of an :class:`AsyncClient`."""

    __slots__ = ()

    @overload
    async def send_many(
        self, messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
        concurrency: int = ..., rate_limit: float | None = ...,
        pace: Literal["auto"] | None = ..., progress: bool = ...,
        on_result: OnResult | None = ..., stop_on_error: bool = ...,
        journal: str | os.PathLike[str] | None = ..., campaign_id: str | None = ...,
        dedupe: bool = ..., resend_unknown: bool = ..., timeout: TimeoutArg = ...,
        max_retries: int | None = ..., dry_run: Literal[False] = ...,
    ) -> BulkResult: ...
    @overload
    async def send_many(
        self, messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
        concurrency: int = ..., rate_limit: float | None = ...,
        pace: Literal["auto"] | None = ..., progress: bool = ...,
        on_result: OnResult | None = ..., stop_on_error: bool = ...,
        journal: str | os.PathLike[str] | None = ..., campaign_id: str | None = ...,
        dedupe: bool = ..., resend_unknown: bool = ..., timeout: TimeoutArg = ...,
        max_retries: int | None = ..., dry_run: Literal[True],
    ) -> CampaignPlan: ...

    async def send_many(
        self, messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
        concurrency: int = 64, rate_limit: float | None = None,
        pace: Literal["auto"] | None = None, progress: bool = False,
        on_result: OnResult | None = None, stop_on_error: bool = False,
        journal: str | os.PathLike[str] | None = None, campaign_id: str | None = None,
        dedupe: bool = True, resend_unknown: bool = False, timeout: TimeoutArg = None,
        max_retries: int | None = None, dry_run: bool = False,
    ) -> BulkResult | CampaignPlan:
        """Awaitable :meth:`Messages.send_many`; ``messages`` may also be an async iterable.
        Cancelling the task stops it like Ctrl-C does a sync one: ``CancelledError`` is raised
        once the messages in flight settled, with the partial result on ``.bulk_result``.
        ``dry_run=True`` sends nothing and returns the :meth:`plan` instead."""
        if dry_run:
            return await self.plan(messages, rate_limit=rate_limit, pace=pace, dedupe=dedupe,
                                   timeout=timeout, max_retries=max_retries)
        run = _campaign_run(
            self._native, concurrency=concurrency, rate_limit=rate_limit, pace=pace,
            stop_on_error=stop_on_error, journal=journal, campaign_id=campaign_id,
            dedupe=dedupe, resend_unknown=resend_unknown, timeout=timeout,
            max_retries=max_retries, progress=progress,
        )
        from ._campaign import drivers

        return await drivers.send_many_async(run, messages, on_result=on_result, progress=progress)

    async def plan(
        self, messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
        rate_limit: float | None = None, pace: Literal["auto"] | None = None,
        dedupe: bool = True, timeout: TimeoutArg = None, max_retries: int | None = None,
    ) -> CampaignPlan:
        """Awaitable :meth:`Messages.plan`; ``messages`` may also be an async iterable."""
        planner = await self._native.planner_async(
            _campaign_rate(rate_limit), _optional_text("pace", pace), dedupe,
            _timeout_arg(timeout), max_retries,
        )
        from ._campaign import drivers

        return await drivers.plan_async(planner, messages)

    def send_many_iter(
        self, messages: Iterable[MessageLike] | AsyncIterable[MessageLike], *,
        concurrency: int = 64, rate_limit: float | None = None,
        pace: Literal["auto"] | None = None, progress: bool = False,
        on_result: OnResult | None = None, stop_on_error: bool = False,
        journal: str | os.PathLike[str] | None = None, campaign_id: str | None = None,
        dedupe: bool = True, resend_unknown: bool = False, timeout: TimeoutArg = None,
        max_retries: int | None = None,
    ) -> AsyncIterator[_native.SendOutcome]:
        """``async for`` over each outcome as it completes (see :meth:`send_many`)."""
        run = _campaign_run(
            self._native, concurrency=concurrency, rate_limit=rate_limit, pace=pace,
            stop_on_error=stop_on_error, journal=journal, campaign_id=campaign_id,
            dedupe=dedupe, resend_unknown=resend_unknown, timeout=timeout,
            max_retries=max_retries, progress=progress,
        )
        from ._campaign import drivers

        return drivers.send_many_iter_async(run, messages, on_result=on_result, progress=progress)

    @overload
    async def send(self, *, to: str, from_: str, template: Template, raw: Literal[False] = ...,
                   timeout: TimeoutArg = ..., max_retries: int | None = ...,
                   idempotency_key: str | None = ...) -> SendResult: ...
    @overload
    async def send(self, *, to: str, from_: str, template: Template, raw: Literal[True],
                   timeout: TimeoutArg = ..., max_retries: int | None = ...,
                   idempotency_key: str | None = ...) -> dict[str, Any]: ...

    async def send(self, *, to: str, from_: str, template: Template, raw: bool = False,
                   timeout: TimeoutArg = None, max_retries: int | None = None,
                   idempotency_key: str | None = None) -> SendResult | dict[str, Any]:
        """Awaitable :meth:`Messages.send`."""
        return await self._native.send_async(
            to, from_, template.name, template.parameters, template.language,
            raw, _timeout_arg(timeout), max_retries, idempotency_key,
        )

    @overload
    async def send_template(self, *, to: str, from_: str, name: str,
                            parameters: TemplateParameters, language: str,
                            raw: Literal[False] = ..., timeout: TimeoutArg = ...,
                            max_retries: int | None = ..., idempotency_key: str | None = ...
                            ) -> SendResult: ...
    @overload
    async def send_template(self, *, to: str, from_: str, name: str,
                            parameters: TemplateParameters, language: str,
                            raw: Literal[True], timeout: TimeoutArg = ...,
                            max_retries: int | None = ..., idempotency_key: str | None = ...
                            ) -> dict[str, Any]: ...

    async def send_template(self, *, to: str, from_: str, name: str,
                            parameters: TemplateParameters, language: str, raw: bool = False,
                            timeout: TimeoutArg = None, max_retries: int | None = None,
                            idempotency_key: str | None = None) -> SendResult | dict[str, Any]:
        """Awaitable :meth:`Messages.send_template`."""
        return await self._native.send_async(
            to, from_, name, parameters, language,
            raw, _timeout_arg(timeout), max_retries, idempotency_key,
        )


ItemT = TypeVar("ItemT", BusinessAccount, BusinessPhoneNumber)


class _Listing(_Resource, Generic[ItemT]):
    """What both listings share; ``_KIND`` tells the Rust side which one."""

    __slots__ = ()
    _KIND: ClassVar[_native.Listing]

    def _source(self, page_size: int, timeout: TimeoutArg, max_retries: int | None
                ) -> PageSource:
        return PageSource(self._native, self._KIND, page_size, _timeout_arg(timeout),
                          max_retries)


class _SyncListing(_Listing[ItemT]):
    __slots__ = ()

    @overload
    def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[False] = ...,
             timeout: TimeoutArg = ..., max_retries: int | None = ...) -> Page[ItemT]: ...
    @overload
    def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[True],
             timeout: TimeoutArg = ..., max_retries: int | None = ...) -> dict[str, Any]: ...

    def list(self, *, page_no: int = 1, page_size: int = 20, raw: bool = False,
             timeout: TimeoutArg = None, max_retries: int | None = None
             ) -> Page[ItemT] | dict[str, Any]:
        """One page (``page_no`` from 1, ``page_size`` 1 to 1000). ``raw=True`` returns the
        JSON object exactly as received."""
        return self._source(page_size, timeout, max_retries).page(page_no, raw)

    def iter(self, *, page_size: int = 100, limit: int | None = None, timeout: TimeoutArg = None,
             max_retries: int | None = None) -> Iterator[ItemT]:
        """Every item across pages, lazily. ``limit`` caps the number of items in total;
        ``page_size`` is only the request size. The next page is fetched in the background
        while you consume the current one (one page ahead, never more)."""
        return items_of(self._source(page_size, timeout, max_retries).stream(1, limit))

    def iter_pages(self, *, page_size: int = 100, page_no: int = 1, timeout: TimeoutArg = None,
                   max_retries: int | None = None) -> Iterator[Page[ItemT]]:
        """Every page from ``page_no`` on, lazily, reading one page ahead."""
        source = self._source(page_size, timeout, max_retries)
        return source.pages(source.stream(page_no, None))


class _AsyncListing(_Listing[ItemT]):
    __slots__ = ()

    @overload
    async def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[False] = ...,
                   timeout: TimeoutArg = ..., max_retries: int | None = ...) -> AsyncPage[ItemT]: ...
    @overload
    async def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[True],
                   timeout: TimeoutArg = ..., max_retries: int | None = ...) -> dict[str, Any]: ...

    async def list(self, *, page_no: int = 1, page_size: int = 20, raw: bool = False,
                   timeout: TimeoutArg = None, max_retries: int | None = None
                   ) -> AsyncPage[ItemT] | dict[str, Any]:
        """Awaitable: one page (``page_no`` from 1, ``page_size`` 1 to 1000). ``raw=True``
        returns the JSON object exactly as received."""
        return await self._source(page_size, timeout, max_retries).page_async(page_no, raw)

    def iter(self, *, page_size: int = 100, limit: int | None = None, timeout: TimeoutArg = None,
             max_retries: int | None = None) -> AsyncIterator[ItemT]:
        """``async for`` over every item across pages; ``limit`` caps the items in total,
        ``page_size`` is only the request size; one page is read ahead."""
        return items_of_async(self._source(page_size, timeout, max_retries).stream(1, limit))

    def iter_pages(self, *, page_size: int = 100, page_no: int = 1, timeout: TimeoutArg = None,
                   max_retries: int | None = None) -> AsyncIterator[AsyncPage[ItemT]]:
        """``async for`` over every page from ``page_no`` on, reading one page ahead."""
        source = self._source(page_size, timeout, max_retries)
        return source.pages_async(source.stream(page_no, None))


class BusinessAccounts(_SyncListing[BusinessAccount]):
    """``client.business_accounts``: the caller's business accounts, each with its numbers."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessAccounts


class BusinessPhoneNumbers(_SyncListing[BusinessPhoneNumber]):
    """``client.business_phone_numbers``: the caller's business phone numbers."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessPhoneNumbers


class AsyncBusinessAccounts(_AsyncListing[BusinessAccount]):
    """``client.business_accounts`` of an :class:`AsyncClient`."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessAccounts


class AsyncBusinessPhoneNumbers(_AsyncListing[BusinessPhoneNumber]):
    """``client.business_phone_numbers`` of an :class:`AsyncClient`."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessPhoneNumbers
