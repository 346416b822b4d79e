"""What bizmsg's OpenTelemetry instrumentation costs per call: sends per second, sync and
asyncio, not instrumented and instrumented, measured as `run.py` measures (the server pinned to
one CPU, every sample a fresh client subprocess pinned to the other, interleaved rounds,
medians). A measurement, not a test: it prints a Markdown table and asserts nothing. The cost
per campaign message, with and without per-message spans, is `otel_cost.py`'s.

    python benches/otel_call_cost.py                  # 3 rounds against nginx (or the sandbox)
    python benches/otel_call_cost.py --rounds 5 --sends 5000

"Instrumented" is what a production setup pays: `BizmsgInstrumentor().instrument()` with the
OpenTelemetry SDK's `TracerProvider` and a `BatchSpanProcessor` (its exporter drops the spans,
so the figure is bizmsg's and the SDK's work, not a collector's), and a `MeterProvider` with an
in-memory reader. The added cost is reported per call, in microseconds: 1/rate instrumented
minus 1/rate not.

Needs `pip install "bizmsg[otel]" opentelemetry-sdk`; nginx (`benches/setup.sh`) or else the
embedded sandbox as the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _procs  # noqa: E402
import _servers  # noqa: E402
from _shared import FROM, LANGUAGE, TEMPLATE_NAME, TEMPLATE_PARAMETERS, TO, TOKEN  # noqa: E402

SCENARIOS = ("sync_send", "async_send")
IN_FLIGHT = 64


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- The client subprocess -----------------------------------------------------------------


def _instrument(mode: str) -> Any:
    """Instruments bizmsg as a production process would, unless `mode` is "off"."""
    if mode == "off":
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from bizmsg.instrumentation import BizmsgInstrumentor

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            return None

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    options: dict[str, Any] = {"tracer_provider": tracer_provider,
                               "meter_provider": meter_provider}
    instrumentor = BizmsgInstrumentor()
    instrumentor.instrument(**options)
    return tracer_provider


def _send_kwargs() -> dict[str, Any]:
    return {"to": TO, "from_": FROM, "name": TEMPLATE_NAME, "parameters": TEMPLATE_PARAMETERS,
            "language": LANGUAGE}


def _sync_send(base_url: str, count: int) -> float:
    import bizmsg

    with bizmsg.Client(TOKEN, base_url=base_url, max_retries=0) as client:
        send = client.messages.send_template
        kwargs = _send_kwargs()
        for _ in range(200):  # warm up: connections open, caches filled
            send(**kwargs)
        start = time.perf_counter()
        for _ in range(count):
            send(**kwargs)
        return count / (time.perf_counter() - start)


def _async_send(base_url: str, count: int) -> float:
    import bizmsg

    async def main() -> float:
        async with bizmsg.AsyncClient(TOKEN, base_url=base_url, max_retries=0) as client:
            send = client.messages.send_template
            kwargs = _send_kwargs()
            left = count

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    await send(**kwargs)

            await asyncio.gather(*(send(**kwargs) for _ in range(IN_FLIGHT)))  # warm up
            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
            return count / (time.perf_counter() - start)

    return asyncio.run(main())


def child(args: argparse.Namespace) -> int:
    tracer_provider = _instrument(args.mode)
    measure = {"sync_send": _sync_send, "async_send": _async_send}
    rate = measure[args.scenario](args.base_url, args.sends)
    if tracer_provider is not None:
        tracer_provider.shutdown()  # the batch processor's last export, outside the timing
    print(json.dumps({"rate": rate}))
    return 0


# --- The orchestrator ----------------------------------------------------------------------


def sample(pinning: _procs.Pinning, base_url: str, scenario: str, mode: str,
           args: argparse.Namespace) -> float:
    argv = [*pinning.prefix("client"), sys.executable, __file__, "--child",
            "--scenario", scenario, "--mode", mode, "--base-url", base_url,
            "--sends", str(args.sends)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"{scenario} ({mode}) failed:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["rate"])


def orchestrate(args: argparse.Namespace) -> int:
    _procs.install_signal_handlers()
    pinning = _procs.choose_pinning()
    nginx = _servers.find_nginx()
    kind = "nginx" if nginx is not None else "sandbox"
    modes = ["off", "on"]
    server = _servers.Server(kind, pinning, nginx)
    rates: dict[tuple[str, str], list[float]] = {}
    try:
        log(f"server: {server.note}; {pinning.note}")
        for round_number in range(args.rounds):
            for scenario in SCENARIOS:
                # The order of the modes alternates each round.
                order = modes if round_number % 2 == 0 else list(reversed(modes))
                for mode in order:
                    rate = sample(pinning, server.base_url, scenario, mode, args)
                    rates.setdefault((scenario, mode), []).append(rate)
                    log(f"round {round_number + 1}: {scenario} {mode}: {rate:,.0f}/s")
    finally:
        server.close()
        _procs.stop_all()
    print(f"Server: {server.note}. {pinning.note}. {args.rounds} rounds, medians; "
          f"{args.sends:,} sends per sample.\n")
    print("| scenario | not instrumented, /s | instrumented, /s | ratio | added per unit |")
    print("|---|---:|---:|---:|---:|")
    for scenario in SCENARIOS:
        off = statistics.median(rates[(scenario, "off")])
        on = statistics.median(rates[(scenario, "on")])
        added = 1e6 / on - 1e6 / off
        print(f"| {scenario} | {off:,.0f} | {on:,.0f} | {on / off:.2f} | {added:+.1f} µs per call |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sends", type=int, default=3000, help="sends per send sample")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound of one sample")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", choices=SCENARIOS, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("off", "on"), help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    return child(args) if args.child else orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
