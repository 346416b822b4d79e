"""The HTTP attempts of a call, recorded in Rust (``_native.AttemptLog``), as one CLIENT span
each under the call's span, and as ``http.client.request.duration`` (retries and throttling
answers are counted in Rust: ``_telemetry.py``). Built after the call from the times Rust took
where each attempt began and ended."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._telemetry import Telemetry

#: ``(method, path, start_ns, end_ns, status, error_type, resend_count)``
Attempt = tuple[str, str, int, int, "int | None", "str | None", int]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class Server:
    """Where a client's requests go, as the spans name it: host, port and the URL without
    any credentials (a base URL's user and password never reach an attribute)."""

    __slots__ = ("address", "port", "origin")

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.address = parts.hostname or ""
        self.port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)
        host = f"[{self.address}]" if ":" in self.address else self.address
        self.origin = f"{parts.scheme}://{host}:{self.port}"


def record(telemetry: Telemetry, parent: trace.Span, server: Server,
           attempts: Sequence[Attempt], transport: str) -> None:
    """The attempts' CLIENT spans, then their measurements: a meter that fails costs no span."""
    _spans(telemetry, parent, server, attempts, transport)
    _measure(telemetry, server, attempts)


def _spans(telemetry: Telemetry, parent: trace.Span, server: Server,
           attempts: Sequence[Attempt], transport: str) -> None:
    context = trace.set_span_in_context(parent)
    protocol_version = "2" if transport == "http2" else "1.1"
    for method, path, start_ns, end_ns, status, error_type, resend_count in attempts:
        attributes: dict[str, str | int] = {
            "http.request.method": method,
            "server.address": server.address,
            "server.port": server.port,
            "url.full": server.origin + path,
            "url.template": path,
            "network.protocol.name": "http",
            "network.protocol.version": protocol_version,
        }
        if status is not None:
            attributes["http.response.status_code"] = status
        if error_type is not None:
            attributes["error.type"] = error_type
        if resend_count:
            attributes["http.request.resend_count"] = resend_count
        span = telemetry.tracer.start_span(f"{method} {path}", context=context,
                                           kind=SpanKind.CLIENT, attributes=attributes,
                                           start_time=start_ns)
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end_ns)


def _measure(telemetry: Telemetry, server: Server, attempts: Sequence[Attempt]) -> None:
    # Retries and throttling answers are counted in Rust (``bizmsg.retries``,
    # ``bizmsg.throttled``): only the durations are measured here.
    for method, path, start_ns, end_ns, status, error_type, _ in attempts:
        metric: dict[str, str | int] = {
            "http.request.method": method, "server.address": server.address,
            "server.port": server.port, "url.template": path,
        }
        if status is not None:
            metric["http.response.status_code"] = status
        if error_type is not None:
            metric["error.type"] = error_type
        telemetry.request_duration.record(max(end_ns - start_ns, 0) / 1e9, metric)
