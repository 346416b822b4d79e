"""bizmsg: the Python SDK for the Business Chat Messaging Service, on a Rust core.

>>> import bizmsg
>>> client = bizmsg.Client()          # token from $BIZMSG_TOKEN, base_url from $BIZMSG_BASE_URL
>>> client.messages.send_template(to="8613800000000", from_="8613900000000",
...     name="order_update", parameters=["A1"], language="en_US")
"""

from __future__ import annotations

from . import _logging
from ._client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AsyncClient,
    Client,
    Timeout,
)
from ._campaign import (
    AccountPlan,
    BulkResult,
    CampaignPlan,
    CampaignWarning,
    Message,
    SenderPlan,
)
from ._frames import to_pandas
from ._native import SendOutcome, __version__
from .errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    BizmsgError,
    ClientClosedError,
    ConfigurationError,
    ConflictError,
    ConnectError,
    ConnectionBrokenError,
    DecodeError,
    CampaignError,
    InternalError,
    NotFoundError,
    PaginationError,
    PermissionDeniedError,
    ResponseTooLargeError,
    RateLimitError,
    SendOutcomeUnknownError,
    SendRejectedError,
    ServerError,
    TimeoutError,
    TransportError,
    ValidationError,
)
from .models import (
    BusinessAccount,
    BusinessPhoneNumber,
    Page,
    ResponseMeta,
    SendResult,
    Template,
)

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "Timeout",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Template",
    "Message",
    "SendOutcome",
    "BulkResult",
    "CampaignWarning",
    "CampaignPlan",
    "SenderPlan",
    "AccountPlan",
    "SendResult",
    "BusinessAccount",
    "BusinessPhoneNumber",
    "Page",
    "ResponseMeta",
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
    "refresh_logging",
    "to_pandas",
]

refresh_logging = _logging.refresh_logging
_logging.configure_from_env()
