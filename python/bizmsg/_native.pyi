"""The Rust extension behind bizmsg. Private: use the classes of the ``bizmsg`` package.

Every function here converts its arguments, calls the Rust core and converts the answer;
errors are raised as the classes of :mod:`bizmsg.errors`.
"""

from collections.abc import Awaitable, Callable
from typing import Any, final

from .models import Page, SendResult

__version__: str
#: The send-result codes that mean success when a client is not told otherwise.
DEFAULT_SUCCESS_CODES: list[str]
#: The largest page size a list call accepts.
MAX_PAGE_SIZE: int

@final
class Listing:
    """Which listing a call reads."""

    BusinessAccounts: Listing
    BusinessPhoneNumbers: Listing
    def __eq__(self, value: object, /) -> bool: ...
    def __int__(self) -> int: ...

@final
class NativeClient:
    """The Rust client: connection pool, token, retries, timeouts, decoding."""

    def __new__(
        cls,
        token: str | Callable[[], Any],
        base_url: str,
        timeout: Any,
        max_retries: int,
        success_codes: list[str] | None,
        default_headers: dict[str, str],
        on_retry: Callable[[int, Any, float], object] | None,
        proxy: str | None,
        verify: bool | str,
        allow_insecure_http: bool,
    ) -> NativeClient:
        """Validates the configuration (raises ``ConfigurationError``) and builds the pool."""

    @property
    def base_url(self) -> str:
        """The base URL, without a trailing slash."""

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt, by default."""

    @property
    def timeout(self) -> tuple[float | None, float | None, float | None]:
        """``(connect, read, total)`` in seconds."""

    @property
    def is_closed(self) -> bool:
        """Whether ``close()`` was called."""

    def close(self) -> None:
        """Drops the pool; later calls raise ``ClientClosedError``."""

    def with_options(
        self,
        timeout: Any,
        max_retries: int | None,
        headers_: dict[str, str],
        on_retry: Callable[[int, Any, float], object] | None,
    ) -> NativeClient:
        """A client with other defaults sharing this one's pool."""

    def send(
        self,
        to: str,
        from_: str,
        name: str,
        parameters: Any,
        language: str,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
        idempotency_key: str | None,
    ) -> SendResult | dict[str, Any]:
        """Sends a template message, waiting with the GIL released (Ctrl-C aborts it)."""

    def send_async(
        self,
        to: str,
        from_: str,
        name: str,
        parameters: Any,
        language: str,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
        idempotency_key: str | None,
    ) -> Awaitable[SendResult | dict[str, Any]]:
        """:meth:`send` as an awaitable on the running asyncio loop."""

    def list(
        self,
        kind: Listing,
        page_no: int,
        page_size: int,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
    ) -> Page[Any] | dict[str, Any]:
        """One page of a listing."""

    def pages(
        self,
        kind: Listing,
        page_no: int,
        page_size: int,
        limit: int | None,
        timeout: Any,
        max_retries: int | None,
    ) -> PageStream:
        """A stream of pages that stops once ``limit`` items were delivered."""

    def list_async(
        self,
        kind: Listing,
        page_no: int,
        page_size: int,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
    ) -> Awaitable[Page[Any] | dict[str, Any]]:
        """:meth:`list` as an awaitable."""

@final
class PageStream:
    """A listing walked page by page, one page read ahead in Rust."""

    def next(self) -> Page[Any] | None:
        """The next page, or ``None`` after the last (GIL released while waiting)."""

    def next_async(self) -> Awaitable[Page[Any] | None]:
        """Awaitable :meth:`next`."""

@final
class SandboxServer:
    """The embedded service, running on the shared runtime."""

    def __new__(
        cls,
        host: str,
        port: int,
        seed: int,
        tenants: list[str],
        accounts_per_tenant: int,
        numbers_per_account: tuple[int, int],
        delay: float,
    ) -> SandboxServer:
        """Starts listening before it returns."""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""

    @property
    def port(self) -> int:
        """The port it listens on."""

    @property
    def token(self) -> str:
        """The first tenant's token."""

    @property
    def tenant_tokens(self) -> list[tuple[str, str]]:
        """``(tenant, token)`` pairs in configuration order."""

    def requests(self) -> list[dict[str, Any]]:
        """Every request received."""

    def sent_messages(self) -> list[dict[str, Any]]:
        """The send requests received."""

    def clear_requests(self) -> None:
        """Forgets the recorded requests."""

    def set_delay(self, delay: float) -> None:
        """Seconds added before each answer."""

    def inject(
        self,
        route: str,
        times: int,
        status: int | None,
        headers: list[tuple[str, str]],
        body: str | None,
        delay: float,
        cut_connection: bool,
    ) -> None:
        """Queues a fault for the route."""

    def clear_faults(self) -> None:
        """Drops every queued fault."""

    def shutdown(self) -> None:
        """Stops the server (idempotent)."""

def model_from_dict(kind: str, data: Any, fallbacks: tuple[int, int] | None = None) -> Any:
    """Decodes a wire object into the model named ``kind``; ``fallbacks`` are a page's
    ``(current, size)`` for when the object leaves them out."""

def has_next_page(current: int, size: int, items: int, pages: int | None, total: int | None) -> bool:
    """Whether another page may follow (the rule the page stream follows)."""

def is_success_code(code: object, success_codes: list[str]) -> bool:
    """Whether ``code`` is one of ``success_codes``, compared as text."""

def refresh_logging() -> None:
    """Forgets cached logging levels."""

def shutdown() -> None:
    """Stops the runtime before the interpreter finalizes (registered with ``atexit``)."""
