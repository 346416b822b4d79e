"""The Python faces of :class:`Client` and :class:`AsyncClient`.

They only resolve defaults (environment variables) and hand the configuration to the Rust
client, which validates it, holds the connection pool and makes every call. Resources are
attributes, as in the best SDKs: ``client.messages``, ``client.business_accounts``,
``client.business_phone_numbers`` (their classes are in ``_resources/``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Union, cast

from . import _logging, _native
from ._native import NativeClient
from ._timeout import DEFAULT_TIMEOUT, Timeout, TimeoutArg, call_timeout
from .errors import BizmsgError, ConfigurationError, ValidationError

if TYPE_CHECKING:
    from typing_extensions import Self

    from ._resources.listings import (
        AsyncBusinessAccounts,
        AsyncBusinessPhoneNumbers,
        BusinessAccounts,
        BusinessPhoneNumbers,
    )
    from ._resources.messages import AsyncMessages, Messages

__all__ = ["Client", "AsyncClient", "DEFAULT_MAX_RETRIES", "DEFAULT_MAX_RESPONSE_BYTES"]

DEFAULT_MAX_RETRIES = 2
#: Answers with a longer body raise :class:`~bizmsg.ResponseTooLargeError` (16 MiB).
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

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

    def with_options(
        self,
        *,
        timeout: TimeoutArg = None,
        max_retries: int | None = None,
        headers: Mapping[str, str] | None = None,
        on_retry: RetryHook | None = None,
    ) -> Self:
        """A client with other defaults that shares this one's connection pool (cheap: call
        it per request if you like)."""
        clone = object.__new__(type(self))
        clone._attach(self._native.with_options(
            timeout=call_timeout(timeout), max_retries=max_retries, headers_=dict(headers or {}),
            on_retry=on_retry,
        ))
        return clone

    def _attach(self, native: NativeClient) -> None:
        raise NotImplementedError  # each client attaches its own resources

    def __repr__(self) -> str:
        # The token is never shown.
        return f"{type(self).__name__}(base_url={self.base_url!r}, token=<redacted>)"


def _is_async_callable(token: object) -> bool:
    import inspect  # only for token callables: `import bizmsg` stays free of it

    return inspect.iscoroutinefunction(token)


def _native_client(
    token: Any,
    *,
    is_async: bool,
    base_url: str | None,
    timeout: TimeoutArg,
    success_codes: Any,
    default_headers: Mapping[str, str] | None,
    shared_limits: str | None,
    idempotent_sends: bool,
    **passed: Any,
) -> _native.NativeClient:
    """The native client of a constructor's keywords: those read or resolved here by name,
    ``passed`` (max_retries, on_retry, proxy, verify, allow_insecure_http, max_response_bytes)
    as given, for the native constructor to check (stubtest checks its keywords)."""
    token, base_url, resolved = _resolve(token, base_url, timeout)
    if not is_async and callable(token) and _is_async_callable(token):
        raise ConfigurationError(
            "Client needs a plain token callable; use AsyncClient for an async one"
        )
    codes = None if success_codes is None else _codes(success_codes)
    _logging.ensure_installed()
    if "IPython" in sys.modules:
        # In a Jupyter kernel, two log records are held back or dropped (_notebook.py).
        from . import _notebook

        _notebook.attach()
        _logging.place_last()
    # A level set on the "bizmsg" logger since the last client applies from this one on.
    _native.refresh_logging()
    return _native.NativeClient(
        token=token,
        base_url=base_url,
        timeout=resolved,
        success_codes=codes,
        default_headers=dict(default_headers or {}),
        shared_limits=_shared_limits(shared_limits),
        idempotent_sends=bool(idempotent_sends),
        **passed,
    )


def _shared_limits(url: object) -> str | None:
    """``shared_limits=``, else ``$BIZMSG_SHARED_LIMITS`` (empty: none)."""
    if url is None:
        url = os.environ.get("BIZMSG_SHARED_LIMITS") or None
    if url is None or isinstance(url, str):
        return url
    raise ValidationError(f"invalid shared_limits: must be a redis:// or rediss:// URL, got "
                          f"{type(url).__name__}", field="shared_limits")


class Client(_BaseClient):
    """A synchronous client. Safe to share between threads; calls release the GIL and can be
    interrupted with Ctrl-C.

    ``token`` defaults to ``$BIZMSG_TOKEN`` and ``base_url`` to ``$BIZMSG_BASE_URL``.
    ``success_codes`` are the send-result codes that mean "committed" (default ``("0",)``,
    what the sandbox answers; compared as strings). ``shared_limits`` (default
    ``$BIZMSG_SHARED_LIMITS``) is a Redis URL (``redis://`` or ``rediss://``, a password in it
    if the server needs one): every client, in any process or host, given the same store
    shares its senders' pace, pauses, pair spacing and tier counts. ``idempotent_sends=True``
    says the service deduplicates sends by ``Idempotency-Key`` (the sandbox does): a send whose
    reused connection the server closed as it went out (the keep-alive race) is then sent again
    once, with its key, instead of raising :class:`SendOutcomeUnknownError`.
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
        shared_limits: str | None = None,
        idempotent_sends: bool = False,
    ) -> None:
        self._attach(_native_client(
            token, is_async=False, base_url=base_url, timeout=timeout, max_retries=max_retries,
            success_codes=success_codes, default_headers=default_headers, on_retry=on_retry,
            proxy=proxy, verify=verify, allow_insecure_http=allow_insecure_http,
            max_response_bytes=max_response_bytes, shared_limits=shared_limits,
            idempotent_sends=idempotent_sends,
        ))

    def _attach(self, native: _native.NativeClient) -> None:
        # The resources' modules load with the first client, not with `import bizmsg`.
        from ._resources.listings import BusinessAccounts, BusinessPhoneNumbers
        from ._resources.messages import Messages

        self._native = native
        self.messages = Messages(native)
        self.business_accounts = BusinessAccounts(native)
        self.business_phone_numbers = BusinessPhoneNumbers(native)

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
        shared_limits: str | None = None,
        idempotent_sends: bool = False,
    ) -> None:
        self._attach(_native_client(
            token, is_async=True, base_url=base_url, timeout=timeout, max_retries=max_retries,
            success_codes=success_codes, default_headers=default_headers, on_retry=on_retry,
            proxy=proxy, verify=verify, allow_insecure_http=allow_insecure_http,
            max_response_bytes=max_response_bytes, shared_limits=shared_limits,
            idempotent_sends=idempotent_sends,
        ))

    def _attach(self, native: _native.NativeClient) -> None:
        from ._resources.listings import AsyncBusinessAccounts, AsyncBusinessPhoneNumbers
        from ._resources.messages import AsyncMessages

        self._native = native
        self.messages = AsyncMessages(native)
        self.business_accounts = AsyncBusinessAccounts(native)
        self.business_phone_numbers = AsyncBusinessPhoneNumbers(native)

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
