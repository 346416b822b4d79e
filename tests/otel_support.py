"""What the OpenTelemetry tests record with: the SDK's in-memory span exporter and metric
reader behind a tracer and a meter provider of the test's own. Imported only by tests that
``pytest.importorskip("opentelemetry.sdk")`` first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bizmsg.instrumentation import BizmsgInstrumentor


class Raising(SpanProcessor):
    """A span processor (or the exporter behind one) that raises ``error`` in ``on_start``, in
    ``on_end`` or both, for every span or only those whose name starts with ``names``; it
    counts the spans it saw end."""

    def __init__(self, on_start: bool = False, on_end: bool = False,
                 error: type[BaseException] = RuntimeError, names: str = "") -> None:
        self.raise_on_start = on_start
        self.raise_on_end = on_end
        self.error = error
        self.names = names
        self.ended = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.raise_on_start and span.name.startswith(self.names):
            raise self.error("processor boom on start")

    def on_end(self, span: Any) -> None:
        self.ended += 1
        if self.raise_on_end and span.name.startswith(self.names):
            raise self.error("processor boom on end")


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


def instrumented(**options: Any) -> Iterator[Otel]:
    """A test's fixture body: bizmsg instrumented with a recorder of its own (``options`` as
    ``instrument()`` takes them), uninstrumented after the test."""
    telemetry = Otel()
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                            meter_provider=telemetry.meter_provider, **options)
    yield telemetry
    instrumentor.uninstrument()
