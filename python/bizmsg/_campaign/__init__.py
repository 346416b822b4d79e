"""Campaigns: many messages sent as one batch by the Rust engine.

- ``message.py``: what goes in, :class:`Message` (or a mapping of the same fields);
- ``results.py``: what comes out, :class:`BulkResult` and :class:`CampaignPlan` with their
  parts;
- ``drivers.py``: ``send_many``, ``send_many_iter`` and ``plan``, sync and async, which answer
  the engine's events; ``collector.py``: what a driver gathers into the result.

The resources call the drivers (``_resources/messages.py``); ``import bizmsg`` loads none of
this until a campaign's class or method is first used.
"""

from .message import Message, MessageFrame, MessageLike, restore
from .results import (
    STATUSES,
    AccountPlan,
    BulkResult,
    CampaignPlan,
    CampaignWarning,
    SenderPlan,
)

# Pickles of messages made before this package (when it was one module) name this function.
_restore = restore

__all__ = ["Message", "MessageLike", "MessageFrame", "BulkResult", "CampaignWarning", "CampaignPlan",
           "SenderPlan", "AccountPlan", "STATUSES"]
