"""What the OpenTelemetry instrumentation costs per campaign message: the same campaign against
the embedded sandbox, not instrumented, instrumented (one span per campaign), and instrumented
with ``campaign_message_spans=True`` (a span per message and one per attempt), with the SDK, a
``BatchSpanProcessor`` whose exporter drops the spans, and an in-memory metric reader. Rounds
alternate the three in one process; each figure is the median of its rounds.

    python benches/otel_cost.py                       # 5 rounds of 20,000 messages
    python benches/otel_cost.py --rounds 3 --messages 50000

Needs ``opentelemetry-sdk`` (``pip install "bizmsg[otel]" opentelemetry-sdk``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import bizmsg
from bizmsg.instrumentation import BizmsgInstrumentor
from bizmsg.testing import Sandbox


class Dropped(SpanExporter):
    """Exports nothing: the SDK's span machinery is measured, not an exporter's I/O."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def messages(sender: str, count: int) -> Iterator[bizmsg.Message]:
    template = bizmsg.Template(name="promo", parameters=["p"], language="en")
    for i in range(count):
        yield bizmsg.Message(to=f"44770{i:07d}", from_=sender, template=template)


def campaign(client: bizmsg.Client, sender: str, count: int) -> float:
    """Messages per second of one ``send_many``."""
    started = time.perf_counter()
    result = client.messages.send_many(messages(sender, count), concurrency=64)
    elapsed = time.perf_counter() - started
    assert result.counts["sent"] == count, result.counts
    return count / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()

    exporter = Dropped()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65_536))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    modes = {"not instrumented": None, "instrumented": False,
             "campaign_message_spans=True": True}
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    with Sandbox() as sandbox, sandbox.client() as client:
        sender = _a_sender(client)
        campaign(client, sender, 1000)  # warm-up: connections, code paths
        for round_ in range(args.rounds):
            for mode, message_spans in modes.items():
                instrumentor = BizmsgInstrumentor()
                if message_spans is not None:
                    instrumentor.instrument(tracer_provider=tracer_provider,
                                            meter_provider=meter_provider,
                                            campaign_message_spans=message_spans)
                try:
                    rate = campaign(client, sender, args.messages)
                finally:
                    if message_spans is not None:
                        instrumentor.uninstrument()
                tracer_provider.force_flush()
                rates[mode].append(rate)
                print(f"round {round_ + 1}: {mode}: {rate:,.0f} messages/s", file=sys.stderr)
    print(f"{args.messages:,} messages per campaign, concurrency 64, {args.rounds} rounds "
          f"(median messages/s; µs per message):")
    base = statistics.median(rates["not instrumented"])
    for mode, values in rates.items():
        rate = statistics.median(values)
        extra = (1e6 / rate - 1e6 / base) if mode != "not instrumented" else 0.0
        print(f"| {mode} | {rate:,.0f} | {1e6 / rate:.1f} µs | {extra:+.1f} µs |")
    print(f"spans exported (dropped): {exporter.spans:,}", file=sys.stderr)
    return 0


def _a_sender(client: bizmsg.Client) -> str:
    for number in client.business_phone_numbers.list(page_size=1000):
        if number.status == "CONNECTED" and number.display_phone_number:
            return "".join(c for c in number.display_phone_number if c.isdigit())
    raise SystemExit("the sandbox has no connected sender")


if __name__ == "__main__":
    raise SystemExit(main())
