"""bizmsg: the Python SDK for the Business Chat Messaging Service, on a Rust core.

>>> import bizmsg
>>> client = bizmsg.Client()          # token from $BIZMSG_TOKEN, base_url from $BIZMSG_BASE_URL
>>> client.messages.send_template(to="8613800000000", from_="8613900000000",
...     name="order_update", parameters=["A1"], language="en_US")

Across processes and hosts: ``Client(shared_limits="redis://...")`` shares pacing, pauses and
tier counts; ``send_many(..., journal="postgresql://...", campaign_id=...)`` shares the
journal. ``bizmsg.celery`` (imported on its own, ``import bizmsg.celery``; ``import bizmsg``
does not load it, nor Celery) runs a campaign as shard tasks on Celery workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _logging
from ._client import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRIES, AsyncClient, Client
from ._native import SendOutcome, __version__
from ._pagination import to_pandas
from ._timeout import DEFAULT_TIMEOUT, Timeout
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
    SharedStateError,
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
    AsyncPage,
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
    "AsyncPage",
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
    "SharedStateError",
    "refresh_logging",
    "to_pandas",
]

refresh_logging = _logging.refresh_logging
_logging.configure_from_env()

if TYPE_CHECKING:
    from ._campaign import (
        AccountPlan,
        BulkResult,
        CampaignPlan,
        CampaignWarning,
        Message,
        SenderPlan,
    )

# Campaigns are imported when first used, not by `import bizmsg` (which must stay cheap: a CLI
# call or a serverless cold start pays for it); pandas is imported when a frame is built.
_LAZY = {
    "Message": "._campaign",
    "BulkResult": "._campaign",
    "CampaignWarning": "._campaign",
    "CampaignPlan": "._campaign",
    "SenderPlan": "._campaign",
    "AccountPlan": "._campaign",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bizmsg' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
