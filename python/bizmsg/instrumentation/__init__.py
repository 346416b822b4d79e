"""OpenTelemetry for bizmsg: ``BizmsgInstrumentor().instrument()`` (or
``opentelemetry-instrument``, which finds it under the ``opentelemetry_instrumentor`` entry
point) gives every send, listing and campaign a span, with one CLIENT span per HTTP attempt
under it timed in Rust; injects the current trace context into every request; and records
``http.client.request.duration`` and bizmsg's own metrics; and puts the trace and span ids on
its log records (``_logs.py``). docs/observability.md has the spans, metrics and attributes.

Needs ``pip install bizmsg[otel]``. ``import bizmsg`` never imports this module, and until
``instrument()`` nothing of it runs: it replaces the methods of the resource classes with traced
ones, and ``uninstrument()`` puts the plain ones back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from .. import _native
from .._resources import listings, messages
from . import _calls, _campaigns, _logs, _telemetry

__all__ = ["BizmsgInstrumentor"]

_INSTRUMENTS = ("opentelemetry-api >= 1.20",)

#: (class, method, how it is traced, the span's name).
_Wrap = Callable[[_telemetry.Telemetry, Any, str], Any]


def _send(telemetry: _telemetry.Telemetry, wrapped: Any, name: str) -> Any:
    return _calls.sync_call(telemetry, wrapped, name, is_send=True)


def _send_async(telemetry: _telemetry.Telemetry, wrapped: Any, name: str) -> Any:
    return _calls.async_call(telemetry, wrapped, name, is_send=True)


def _list(telemetry: _telemetry.Telemetry, wrapped: Any, name: str) -> Any:
    return _calls.sync_call(telemetry, wrapped, name, is_send=False)


def _list_async(telemetry: _telemetry.Telemetry, wrapped: Any, name: str) -> Any:
    return _calls.async_call(telemetry, wrapped, name, is_send=False)


def _targets() -> list[tuple[type, str, _Wrap, str]]:
    targets: list[tuple[type, str, _Wrap, str]] = [
        (messages.Messages, "send", _send, "send"),
        (messages.Messages, "send_template", _send, "send"),
        (messages.AsyncMessages, "send", _send_async, "send"),
        (messages.AsyncMessages, "send_template", _send_async, "send"),
        (messages.Messages, "send_many", _campaigns.sync_campaign, "send_many"),
        (messages.AsyncMessages, "send_many", _campaigns.async_campaign, "send_many"),
        (messages.Messages, "send_many_iter", _campaigns.campaign_iter, "send_many_iter"),
        (messages.AsyncMessages, "send_many_iter", _campaigns.campaign_iter, "send_many_iter"),
    ]
    for cls, listing in ((listings.BusinessAccounts, "business_accounts"),
                         (listings.BusinessPhoneNumbers, "business_phone_numbers")):
        targets += [(cls, "list", _list, f"list {listing}"),
                    (cls, "iter", _calls.sync_iter, f"list {listing}")]
    for acls, listing in ((listings.AsyncBusinessAccounts, "business_accounts"),
                          (listings.AsyncBusinessPhoneNumbers, "business_phone_numbers")):
        targets += [(acls, "list", _list_async, f"list {listing}"),
                    (acls, "iter", _calls.async_iter, f"list {listing}")]
    return targets


class BizmsgInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments bizmsg. ``instrument(tracer_provider=..., meter_provider=...)`` (the global
    providers by default); ``uninstrument()`` stops every span, metric and injected header.

    ``instrument(campaign_message_spans=True)`` also gives each message of a campaign a span
    of its own under the campaign's (with a CLIENT span per attempt under it, and
    ``http.client.request.duration`` for those attempts); a share from 0 to 1 (``0.01``) traces
    that share of the messages, chosen by their position. Off by default: a campaign then has
    one span, and nothing is done in Python per message."""

    _originals: list[tuple[type, str, Any]] = []

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ours = version("bizmsg")
        except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
            ours = "0"
        share = _telemetry.message_share(kwargs.get("campaign_message_spans", False))
        telemetry = _telemetry.make(kwargs.get("tracer_provider"), kwargs.get("meter_provider"),
                                    ours, share)
        originals: list[tuple[type, str, Any]] = []
        for cls, method, wrap, name in _targets():
            # The class's own attribute (inherited ones stay with their class: the listings'
            # methods are defined once on their base, and each subclass gets its own wrapper).
            plain = cls.__dict__.get(method)
            originals.append((cls, method, plain))
            setattr(cls, method, wrap(telemetry, getattr(cls, method), name))
        BizmsgInstrumentor._originals = originals
        _logs.install(kwargs.get("tracer_provider"))
        _telemetry.mark_start()
        _telemetry.observing = True
        _native.count_for_metrics(True)

    def _uninstrument(self, **kwargs: Any) -> None:
        _logs.uninstall()
        _telemetry.observing = False
        _native.count_for_metrics(False)
        for cls, method, plain in reversed(BizmsgInstrumentor._originals):
            if plain is None:
                delattr(cls, method)
            else:
                setattr(cls, method, plain)
        BizmsgInstrumentor._originals = []
