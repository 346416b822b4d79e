"""The resources of a client, as attributes: ``client.messages`` (``messages.py``),
``client.business_accounts`` and ``client.business_phone_numbers`` (``listings.py``), each with
its sync and its async class side by side. The keywords of a campaign are declared once, in
``campaign_options.py``. The client imports the resource classes from those modules; this one
holds what they all are."""

from __future__ import annotations

from .. import _native

__all__ = ["Resource"]


class Resource:
    """``client.messages``, ``client.business_accounts``, ...: a group of operations of the
    service on one client (resources are made by the client, never by hand)."""

    __slots__ = ("_native",)

    def __init__(self, native: _native.NativeClient) -> None:
        self._native = native
