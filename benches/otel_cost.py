"""What the OpenTelemetry instrumentation costs per campaign message: the same campaign against
the embedded sandbox, not instrumented, instrumented (one span per campaign), and instrumented
with ``campaign_message_spans=0.01`` and ``=True`` (a span per traced message and one per
attempt), with the SDK, a
``BatchSpanProcessor`` whose exporter drops the spans, and an in-memory metric reader. Rounds
alternate the three in one process; each figure is the median of its rounds.

    python benches/otel_cost.py                       # 5 rounds of 20,000 messages
    python benches/otel_cost.py --rounds 3 --messages 50000
    python benches/otel_cost.py --rss 1000000          # RSS along a send_many_iter, traced
    python benches/otel_cost.py --rss 1000000 --untraced   # ... and not instrumented

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
    parser.add_argument("--rss", type=int, default=0, metavar="N",
                        help="instead: the RSS along one send_many_iter of N messages with "
                             "campaign_message_spans=True")
    parser.add_argument("--untraced", action="store_true",
                        help="with --rss: not instrumented, for comparison")
    args = parser.parse_args()
    if args.rss:
        return rss_along(args.rss, traced=not args.untraced)

    exporter = Dropped()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65_536))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    modes: dict[str, bool | float | None] = {
        "not instrumented": None, "instrumented": False,
        "campaign_message_spans=0.01": 0.01, "campaign_message_spans=True": True}
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


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_along(count: int, traced: bool) -> int:
    """The RSS at each tenth of one ``send_many_iter`` of ``count`` messages, traced (with
    ``campaign_message_spans=True``) or not: the messages' traces come with their outcomes and
    are taken as each batch arrives, so tracing must not make it grow with the campaign."""
    exporter = Dropped()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    if traced:
        BizmsgInstrumentor().instrument(tracer_provider=tracer_provider,
                                        meter_provider=MeterProvider(
                                            metric_readers=[InMemoryMetricReader()]),
                                        campaign_message_spans=True)
    marks = {count * i // 10 for i in range(1, 11)}
    # The sandbox in a process of its own: the embedded one keeps every request it received
    # (sandbox.requests()), which would be measured too.
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "bizmsg", "sandbox", "--port", str(port),
                               "--accounts", "20"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        client = bizmsg.Client("sandbox-token-acme", base_url=f"http://127.0.0.1:{port}")
        _traced_iter(client, count, marks)
    finally:
        server.terminate()
        server.wait()
    tracer_provider.force_flush()
    print(f"spans exported (dropped): {exporter.spans:,} (the BatchSpanProcessor drops what "
          f"its queue cannot hold)")
    return 0


def _traced_iter(client: bizmsg.Client, count: int, marks: set[int]) -> None:
    with client:
        sender = _a_sender(client)
        started = time.perf_counter()
        done = 0
        for outcome in client.messages.send_many_iter(messages(sender, count), concurrency=64):
            done += 1
            if not outcome.ok:
                raise SystemExit(f"message {outcome.index}: {outcome.status}")
            if done in marks:
                print(f"{done:>9,} outcomes: RSS {rss_mib():.1f} MiB "
                      f"({time.perf_counter() - started:.0f} s)", flush=True)


def _a_sender(client: bizmsg.Client) -> str:
    for number in client.business_phone_numbers.list(page_size=1000):
        if number.status == "CONNECTED" and number.display_phone_number:
            return "".join(c for c in number.display_phone_number if c.isdigit())
    raise SystemExit("the sandbox has no connected sender")


if __name__ == "__main__":
    raise SystemExit(main())
