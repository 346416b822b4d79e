"""The Rust extension behind bizmsg. Private: use the classes of the ``bizmsg`` package.

Every function here converts its arguments, calls the Rust core and converts the answer;
errors are raised as the classes of :mod:`bizmsg.errors`.
"""

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal, final

from typing_extensions import Self

from .errors import BizmsgError
from .models import AsyncPage, Page, ResponseMeta, SendResult, Template

__version__: str
#: The send-result codes that mean success when a client is not told otherwise.
DEFAULT_SUCCESS_CODES: list[str]
#: The largest page size a list call accepts.
MAX_PAGE_SIZE: int
#: A campaign's defaults (the engine's own; the Python signatures and docs show these):
#: messages in flight, the breaker's failures in a row and seconds without an answer, and the
#: lease of a run's claims in seconds.
DEFAULT_CONCURRENCY: int
DEFAULT_UNREACHABLE_AFTER: int
DEFAULT_UNREACHABLE_FOR: float
DEFAULT_LEASE: float

@final
class Listing:
    """Which listing a call reads."""

    BusinessAccounts: Listing
    BusinessPhoneNumbers: Listing
    def __eq__(self, value: object, /) -> bool: ...
    def __int__(self) -> int: ...

@final
class AttemptLog:
    """The attempts of a traced client's calls, recorded in Rust."""

    def take(self) -> list[tuple[str, str, int, int, int | None, str | None, int]]:
        """Every attempt since the last call, oldest first: ``(method, path, start_ns, end_ns,
        status, error_type, resend_count)``, times in nanoseconds since the epoch (``status``
        ``None`` when no answer arrived, ``error_type`` ``None`` for a 2xx)."""

    def take_pauses(
        self,
    ) -> list[tuple[int, float | None, str, int | None, str | None, str | None]]:
        """A traced campaign's pauses since the last call, oldest first (at most 1000 between
        two calls): ``(at_ns, seconds, reason, status, code, sender)``; ``reason`` is
        ``retry_after``, ``throttled`` or ``unreachable`` (``seconds`` ``None``), ``sender``
        masked (``None``: every sender)."""

    @property
    def pauses_dropped(self) -> int:
        """Pauses not kept because the log was full."""

@final
class NativeClient:
    """The Rust client: connection pool, token, retries, timeouts, decoding."""

    def __new__(
        cls,
        *,
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
        max_response_bytes: int,
        shared_limits: str | None,
        idempotent_sends: bool,
    ) -> NativeClient:
        """Validates the configuration (raises ``ConfigurationError``) and builds the pool."""

    @property
    def max_response_bytes(self) -> int:
        """The largest answer body the client reads."""

    def campaign(
        self,
        *,
        concurrency: int,
        rate_limit: float | None,
        pace: str | None,
        stop_on_error: bool,
        dedupe: bool,
        journal: str | None,
        campaign_id: str | None,
        resend_unknown: bool,
        enforce_tier: bool,
        lease: float | None,
        unreachable_after: int | None,
        unreachable_for: float,
        timeout: Any,
        max_retries: int | None,
        in_loop: bool = False,
    ) -> CampaignRun:
        """Starts a campaign on the shared runtime; raises ``ValidationError`` for bad options
        and ``ClientClosedError`` on a closed client. ``in_loop``: called in a running event
        loop, whose context the campaign's callbacks into Python (an async token) run in."""

    def planner(
        self,
        *,
        rate_limit: float | None,
        pace: str | None,
        dedupe: bool,
        timeout: Any,
        max_retries: int | None,
    ) -> CampaignPlanner:
        """Looks the senders up (one account listing) and returns a planner to feed."""

    def planner_async(
        self,
        *,
        rate_limit: float | None,
        pace: str | None,
        dedupe: bool,
        timeout: Any,
        max_retries: int | None,
    ) -> Awaitable[CampaignPlanner]:
        """Awaitable :meth:`planner`."""

    @property
    def transport(self) -> str:
        """``"http1"`` (bizmsg's own HTTP/1.1 connections, through a proxy too) or
        ``"http2"`` (reqwest speaking HTTP/2 only, when ``BIZMSG_TRANSPORT=http2`` forces
        it)."""

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
        *,
        timeout: Any,
        max_retries: int | None,
        headers_: dict[str, str],
        on_retry: Callable[[int, Any, float], object] | None,
    ) -> NativeClient:
        """A client with other defaults sharing this one's pool."""

    def observed(
        self, *, headers_: dict[str, str], record_attempts: bool, message_sample: float = 0.0,
        log_ids: tuple[str, str, bool] | None = None,
    ) -> tuple[NativeClient, AttemptLog]:
        """A client for one traced call or campaign (``bizmsg.instrumentation``): its requests
        carry ``headers_`` (the trace context) besides the client's; it records in the
        returned log each attempt with ``record_attempts``, a campaign's pauses, and which of a
        campaign's messages are traced on their own (``message_sample``, 0 to 1: their times
        and attempts come with their outcomes, ``SendOutcome._take_trace``). ``log_ids``
        (``(trace_id, span_id, sampled)``, hex) go on the records Rust logs while its calls or
        its campaign run, as ``otelTraceID``, ``otelSpanID``, ``otelTraceSampled``."""

    def send(
        self,
        *,
        to: str,
        from_: str,
        name: str,
        parameters: Any,
        language: str,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
        idempotency_key: str | None,
    ) -> SendResult[ResponseMeta] | dict[str, Any]:
        """Sends a template message, waiting with the GIL released (Ctrl-C aborts it)."""

    def send_async(
        self,
        *,
        to: str,
        from_: str,
        name: str,
        parameters: Any,
        language: str,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
        idempotency_key: str | None,
    ) -> Awaitable[SendResult[ResponseMeta] | dict[str, Any]]:
        """:meth:`send` as an awaitable on the running asyncio loop."""

    def list(
        self,
        *,
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
        *,
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
        *,
        kind: Listing,
        page_no: int,
        page_size: int,
        raw: bool,
        timeout: Any,
        max_retries: int | None,
    ) -> Awaitable[AsyncPage[Any] | dict[str, Any]]:
        """:meth:`list` as an awaitable; its pages are ``AsyncPage``."""

@final
class PageStream:
    """A listing walked page by page, one page read ahead in Rust."""

    def next(self) -> Page[Any] | None:
        """The next page, or ``None`` after the last (GIL released while waiting)."""

    def next_async(self) -> Awaitable[AsyncPage[Any] | None]:
        """Awaitable :meth:`next`; its pages are ``AsyncPage``."""

@final
class SandboxServer:
    """The embedded service, running on the shared runtime."""

    def __new__(
        cls,
        *,
        host: str,
        port: int,
        seed: int,
        tenants: list[str],
        accounts_per_tenant: int,
        numbers_per_account: tuple[int, int],
        delay: float,
        enforce_limits: bool,
        max_logged_requests: int | None,
        seed_data: str | None,
        honour_idempotency_keys: bool,
    ) -> SandboxServer:
        """Starts listening before it returns. ``seed_data`` is the JSON text of a seed data
        file (its tenants replace ``tenants``)."""

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
        *,
        route: str,
        times: int | None,
        every: int,
        probability: float,
        status: int | None,
        headers: list[tuple[str, str]],
        body: str | None,
        body_bytes: int | None,
        chunked: bool,
        delay: float,
        cut_connection: bool,
    ) -> None:
        """Queues a fault for the route."""

    def load_faults(self, text: str) -> None:
        """Queues the faults of a fault file's JSON text (raises ``ValidationError``)."""

    def traffic(self) -> dict[str, Any]:
        """Per sender: messages committed, the most in one second, throughput refusals; and
        how many recipients got more than one message."""

    def stats(self) -> dict[str, int]:
        """Counts since the sandbox started."""

    def clear_faults(self) -> None:
        """Drops every queued fault."""

    def shutdown(self) -> None:
        """Stops the server and returns once its port is closed (idempotent)."""

def model_from_json(*, kind: str, json: bytes, item_kind: str | None = None,
                    fallbacks: tuple[int, int] | None = None) -> Any:
    """Decodes JSON text into the model named ``kind`` (a page's items are ``item_kind``);
    ``fallbacks`` are a page's ``(current, size)`` for when the object leaves them out."""

def model_fields(kind: str) -> list[tuple[str, str]]:
    """The ``(field, wire name)`` pairs of a model, in the spec's order, from its table."""

def json_loads(json: bytes) -> Any:
    """JSON text as Python objects, like ``json.loads`` (exact for big integers and floats)."""

def has_next_page(*, current: int, size: int, items: int, pages: int | None,
                  total: int | None) -> bool:
    """Whether another page may follow (the rule the page stream follows)."""

def mask_phone(value: str) -> str:
    """A phone number as logs and spans show it: ``8613800000000`` -> ``8613****0000``."""

def seconds_waited_to_send() -> float:
    """Seconds this process's sends have waited for their pacing slots and pauses, in total,
    while counting (``count_for_metrics``)."""

def seconds_waited_to_send_by_sender() -> list[tuple[str, float]]:
    """The same, per sender: each masked as the logs mask numbers, those past the first 1,000
    counted together as ``_OTHER``."""

def shared_state_outages() -> tuple[int, int]:
    """Times a shared limits' store became unreachable in this process, and how many are
    unreachable now."""

def retries_counted() -> list[tuple[str, str, int]]:
    """HTTP attempts retried while counting: ``(error.type of the attempt retried, URL
    template, count)``."""

def throttled_counted() -> list[tuple[int, str, int]]:
    """Throttling answers (429, 503) received while counting: ``(status, URL template,
    count)``."""

def count_for_metrics(on: bool) -> None:
    """Starts or stops counting the seconds sends waited and the campaign messages in flight
    (on while ``BizmsgInstrumentor`` instruments: counts no one reads cost nothing)."""

def campaign_messages_in_flight() -> int:
    """Campaign messages this process has dispatched and not finished (waiting for their
    pacing slot, or on the wire)."""

def is_success_code(code: object, success_codes: list[str]) -> bool:
    """Whether ``code`` is one of ``success_codes``, compared as text."""

def install_logging() -> None:
    """Installs the bridge from Rust log records to Python's ``logging`` (once)."""

def refresh_logging() -> None:
    """Forgets cached logging levels."""

def shutdown() -> None:
    """Stops the runtime before the interpreter finalizes (registered with ``atexit``)."""

def template_wire(name: Any, parameters: Any, language: Any) -> tuple[str, str, str]:
    """``(name, parameters, language)`` as the wire carries them; raises ``ValidationError``
    (with ``field``) for the first bad one, with the same messages as a send."""

@final
class CampaignRun:
    """A running campaign, fed and polled by the drivers of ``bizmsg._campaign.drivers``."""

    def feed(self, items: Iterator[Any], limit: int) -> int:
        """Pulls up to ``limit`` items from ``items`` and hands them to the engine; returns how
        many were taken (fewer: the input ended, and the engine is told)."""

    def end_input(self) -> None:
        """Tells the engine the input has ended."""

    def wait(self, acknowledged: int) -> tuple[int, str, Any] | None:
        """The next event (GIL released; Ctrl-C raises here) as ``(sequence, kind, value)``:
        ``"input"`` (how many items), ``"outcomes"`` ([SendOutcome, ...]), ``"warning"``
        ((kind, message, account_id, sender)) or ``"done"`` ({"campaign_id", "stopped",
        "not_sent", "error"}); ``None`` after done. Events after ``acknowledged`` that were handed out but
        not used are handed out again first."""

    def wait_async(self, acknowledged: int) -> Awaitable[tuple[int, str, Any] | None]:
        """Awaitable :meth:`wait`."""

    def stop(self, abandon: bool) -> None:
        """Stops taking messages; ``abandon`` also stops waiting for those in flight."""

    @property
    def read(self) -> int:
        """How many items were read from the input."""

    @property
    def exhausted(self) -> bool:
        """Whether the input was read to its end."""

    def skip_rest(self, items: Iterator[Any], reason: str) -> list[SendOutcome]:
        """After an early stop: every item left in ``items`` as a ``skipped`` outcome with
        ``reason``, numbered on from the items read."""

class MessageFields:
    """The fields of a ``bizmsg.Message``, held by a Rust object (the class ``Message`` is a
    frozen dataclass built on it): unchecked when made, read by a campaign without ``getattr``.
    """

    to: str
    from_: str
    template: Template
    idempotency_key: str | None
    def __new__(
        cls,
        to: str,
        from_: str,
        template: Template,
        idempotency_key: str | None = None,
    ) -> Self: ...

@final
class SendOutcome:
    """What became of one message of a campaign (``send_many``, ``send_many_iter``)."""

    @property
    def index(self) -> int:
        """Position of the message in the input, from 0."""

    @property
    def message(self) -> Any:
        """The input item as given: a ``Message``, a mapping, or what was not a message."""

    @property
    def status(self) -> Literal["sent", "rejected", "unknown", "failed", "skipped"]:
        """``sent`` (committed), ``rejected`` (a failed commit), ``unknown`` (may or may not
        have been sent: reconcile with ``idempotency_key``), ``failed`` (never sent) or
        ``skipped`` (a duplicate, done by an earlier run, or left when the campaign stopped)."""

    @property
    def ok(self) -> bool:
        """True only when the message was sent."""

    @property
    def idempotency_key(self) -> str | None:
        """The ``Idempotency-Key`` the message went out with (for ``unknown``: the key to
        reconcile with)."""

    @property
    def result(self) -> SendResult | None:
        """The send result, when sent or rejected (or recorded by an earlier run)."""

    @property
    def error(self) -> BizmsgError | None:
        """The exception a single send would have raised: ``SendRejectedError``,
        ``SendOutcomeUnknownError``, ``ValidationError``, ``ConnectError``, ..."""

    @property
    def duplicate_of(self) -> int | None:
        """For a skipped duplicate: the index of the message it repeats."""

    @property
    def reason(self) -> str | None:
        """Why the message was skipped (or other context), in a few words."""

    def to_record(self) -> dict[str, Any]:
        """A flat dict: index, status, ok, idempotency_key, sms_id, code, msg, error,
        duplicate_of, reason."""

    def _take_trace(
        self,
    ) -> tuple[int, int, str, str, str | None, str | None,
               list[tuple[str, str, int, int, int | None, str | None, int]]] | None:
        """A message traced on its own (``bizmsg.instrumentation``'s message spans), once:
        ``(start_ns, end_ns, recipient, sender (both masked), sms_id, code, attempts)``, attempts as
        ``AttemptLog.take`` gives them; ``None`` after the first call and for other messages."""

    def __reduce__(self) -> tuple[Any, ...]: ...

def restore_send_outcome(index: int, message: Any, status: str, idempotency_key: str | None,
                         result: SendResult | None, error: BizmsgError | None,
                         duplicate_of: int | None, reason: str | None) -> SendOutcome:
    """Rebuilds a pickled ``SendOutcome``. (Positional: pickle calls it with the arguments of
    ``SendOutcome.__reduce__``.)"""

@final
class CampaignPlanner:
    """A campaign's preflight, fed like a run."""

    def feed(self, items: Iterator[Any], limit: int) -> int:
        """Checks up to ``limit`` items; returns how many were taken."""

    def finish(self) -> dict[str, Any]:
        """The plan as plain values (once)."""
