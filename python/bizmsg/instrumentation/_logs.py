"""The trace and span ids on bizmsg's log records, as ``opentelemetry-instrumentation-logging``
puts them (``otelTraceID``, ``otelSpanID``, ``otelTraceSampled``, ``otelServiceName``; ``"0"``
and ``False`` when no span is current), so a format or a JSON pipeline joins a log line to its
trace without installing that package.

A filter on the ``bizmsg`` logger, there only while instrumented. It reads the current context
of the thread that logs: pyo3-log hands a Rust record to ``logging`` on the thread where Rust
logged it. A sync call runs its requests on the caller's thread, where the call's span is
current, so its records carry the call's ids. Records logged on the runtime's threads (an async
call's attempts, a campaign's, the pages ``iter()`` reads ahead) see no Python context: Rust
puts the ids of the traced call it was running on them (the handle made for the call was given
them, ``_calls.observed_resource``), and the filter keeps those. A record with neither gets
``"0"``, as that package's own factory would give it.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

#: The logger every record of bizmsg's is logged to (``_logging.py``).
LOGGER = "bizmsg"


class TraceIds:
    """Puts the current span's ids on each record (``logging.Filter``'s protocol)."""

    def __init__(self, tracer_provider: Any) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        # The SDK's provider has a resource; the API's default one has none.
        resource: Any = getattr(provider, "resource", None)
        attributes: Any = getattr(resource, "attributes", None)
        name: object = attributes.get("service.name") if attributes else None
        self.service_name = str(name or "")

    def __call__(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            fields["otelSpanID"] = format(context.span_id, "016x")
            fields["otelTraceID"] = format(context.trace_id, "032x")
            fields["otelTraceSampled"] = context.trace_flags.sampled
        elif "otelTraceID" in fields:
            # Put there by Rust: the ids of the traced call or campaign it was running (a
            # record logged on one of the runtime's threads), its fields written as text.
            sampled = fields.get("otelTraceSampled")
            if isinstance(sampled, str):
                fields["otelTraceSampled"] = sampled == "true"
        else:
            fields["otelSpanID"] = "0"
            fields["otelTraceID"] = "0"
            fields["otelTraceSampled"] = False
        fields.setdefault("otelServiceName", self.service_name)
        return True


_installed: TraceIds | None = None


def install(tracer_provider: Any) -> None:
    global _installed
    uninstall()
    _installed = TraceIds(tracer_provider)
    logging.getLogger(LOGGER).addFilter(_installed)


def uninstall() -> None:
    global _installed
    if _installed is not None:
        logging.getLogger(LOGGER).removeFilter(_installed)
        _installed = None
