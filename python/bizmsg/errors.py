"""The exceptions bizmsg raises: one hierarchy under :class:`BizmsgError`.

The Rust core raises these very classes (it imports them once and caches them), so
``except bizmsg.RateLimitError`` works the same for sync and async calls.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import SendResult

__all__ = [
    "BizmsgError",
    "ConfigurationError",
    "ValidationError",
    "ClientClosedError",
    "TransportError",
    "ConnectError",
    "TimeoutError",
    "ConnectionBrokenError",
    "SendOutcomeUnknownError",
    "APIError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "RateLimitError",
    "ServerError",
    "DecodeError",
    "PaginationError",
    "ResponseTooLargeError",
    "SendRejectedError",
    "InternalError",
    "CampaignError",
    "SharedStateError",
]


class BizmsgError(Exception):
    """Base of every error bizmsg raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # The keyword-only attributes are not in `args`: without this, unpickling (e.g. an
        # error crossing a process pool) fails or drops them.
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))

    def _render_traceback_(self) -> list[str]:
        """What IPython shows when this error ends a cell: the class, the message and the
        attributes that matter (``status_code``, ``code``, ``request_id``, ...), then the
        usual traceback."""
        import traceback

        try:
            from ._display import error_traceback

            return error_traceback(self)
        except Exception:  # never let the display hide the error itself
            text = "".join(traceback.format_exception(type(self), self, self.__traceback__))
            return text.rstrip("\n").split("\n")

    def _repr_html_(self) -> str:
        """The error shown as a value in a notebook (e.g. ``excinfo.value``)."""
        from ._display import error_html

        return error_html(self)


def _rebuild(cls: type[BizmsgError], message: str, state: dict[str, Any]) -> BizmsgError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class ConfigurationError(BizmsgError):
    """The client is configured wrongly: a missing token or base URL, a header value with
    CR/LF, plain ``http://`` to a remote host, ..."""


class ValidationError(BizmsgError, ValueError):
    """An argument was refused before any request was sent. ``field`` names it."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ClientClosedError(BizmsgError):
    """The client was used after ``close()``."""


class TransportError(BizmsgError):
    """No complete HTTP answer was received."""


class ConnectError(TransportError):
    """The connection could not be established: the request never reached the service."""


class TimeoutError(TransportError, builtins.TimeoutError):
    """A timeout elapsed: ``read`` (one attempt) or ``total`` (the whole call). Also a builtin
    ``TimeoutError``. A connection that could not be made within ``connect`` is a
    :class:`ConnectError` instead: the request provably never left."""


class ConnectionBrokenError(TransportError):
    """The connection was reset or closed while the request or its answer was in flight."""


class SendOutcomeUnknownError(TransportError):
    """A send may or may not have reached the recipient, and was therefore not retried.

    ``__cause__`` is what failed. Check whether the message arrived before sending again. A
    service that honours ``Idempotency-Key`` (the sandbox does; the spec does not say) answers a
    re-send with ``idempotency_key=err.idempotency_key`` with the original result instead of a
    second message.
    """

    def __init__(
        self,
        message: str,
        *,
        idempotency_key: str,
        to: str,
        template_name: str,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.idempotency_key = idempotency_key
        self.to = to
        self.template_name = template_name
        #: The service's ``X-Request-Id`` when an answer arrived (a 5xx, an unreadable 2xx).
        self.request_id = request_id


class APIError(BizmsgError):
    """The service answered with a non-2xx status.

    ``body`` is the decoded JSON when the body is JSON, else its text; ``request_id``
    comes from the ``X-Request-Id`` header.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        method: str,
        url: str,
        body: Any,
        request_id: str | None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.method = method
        self.url = url
        self.body = body
        self.request_id = request_id


class BadRequestError(APIError):
    """400: the service refused the request as malformed."""


class AuthenticationError(APIError):
    """401: the token is missing, malformed or not valid."""


class PermissionDeniedError(APIError):
    """403: the token may not do this."""


class NotFoundError(APIError):
    """404."""


class ConflictError(APIError):
    """409: e.g. an ``Idempotency-Key`` reused with a different message."""


class RateLimitError(APIError):
    """429. ``retry_after`` is the wait the service asked for, in seconds, if it said."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx."""


class DecodeError(BizmsgError):
    """A 2xx answer whose body is not the JSON the operation expects. ``snippet`` is the
    start of the body."""

    def __init__(self, message: str, *, snippet: str = "") -> None:
        super().__init__(message)
        self.snippet = snippet


class PaginationError(DecodeError):
    """A listing's pages do not add up: the service answered another page than the one
    asked for, or repeated a page (which would otherwise loop forever)."""


class ResponseTooLargeError(DecodeError):
    """An answer's body was larger than the client's ``max_response_bytes``. ``limit`` is the
    cap and ``size`` the size seen: declared by ``Content-Length`` (``declared`` is true; nothing
    was read) or read so far when a body without a length passed the cap (reading stopped
    there). The connection is closed, not reused. On a send this is the ``__cause__`` of a
    :class:`SendOutcomeUnknownError`: an answer that cannot be read says nothing about the
    message. ``request_id`` is the answer's ``X-Request-Id``, if it had one."""

    def __init__(self, message: str, *, limit: int, size: int, declared: bool,
                 request_id: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.size = size
        self.declared = declared
        self.request_id = request_id


class SendRejectedError(BizmsgError):
    """The send result reports a failed commit. ``result`` is the full
    :class:`~bizmsg.SendResult`; ``code`` and ``msg`` are copied from it."""

    def __init__(self, message: str, *, result: SendResult) -> None:
        super().__init__(message)
        self.result = result
        self.code = result.code
        self.msg = result.msg


class CampaignError(BizmsgError):
    """A campaign could not go on safely as a whole (per-message problems are outcomes, never
    this): its journal is unusable, was written by another version, or belongs to another
    campaign. Raised with the partial :class:`~bizmsg.BulkResult` on ``bulk_result``. (When the
    sender lookup of ``pace="auto"`` fails before anything is sent, that call's own error is
    raised, e.g. :class:`ServerError`.)"""


class SharedStateError(BizmsgError):
    """The store that processes share (``shared_limits=`` on Redis, a PostgreSQL journal)
    could not be reached, or refused what was asked. The message names the store without its
    password. Nothing is ever sent unpaced or unrecorded because of it: a single send raises it
    before sending; a campaign waits for the store (with backoff), and past that stops as it
    does for a journal failure, raising it with the partial result on ``bulk_result``."""


class InternalError(BizmsgError):
    """A bug in bizmsg. Please report it with the message."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitError,
}


def _api_error_class(status_code: int) -> type[APIError]:  # pyright: ignore[reportUnusedFunction]
    """The class for an HTTP status (used by the Rust side)."""
    if status_code >= 500:
        return ServerError
    return _BY_STATUS.get(status_code, APIError)
