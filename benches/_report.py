"""From samples to results: medians, ratios, and the three output files (JSON, Markdown, PNG).

A sample is what one subprocess printed (plus the round it ran in): {"value": ..., ...},
{"unavailable": why} or {"error": why}. Ratios are taken between medians of the same run, and
per round as well (both clients ran back to back in that round), so a drift of the machine's
speed shows as a spread of the per-round ratios rather than as a wrong median.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import OURS, ROWS, SCENARIO_BY_KEY, VARIANTS

Samples = dict[str, dict[str, list[dict[str, Any]]]]  # scenario -> client -> samples


def _median_of(values: list[Any]) -> Any:
    """The median of numbers, a key-wise median of dicts, else the last value."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return statistics.median(values)
    if all(isinstance(v, dict) for v in values):
        keys = [k for v in values for k in v]
        return {k: _median_of([v.get(k) for v in values]) for k in dict.fromkeys(keys)}
    return values[-1]


def summarize(samples: Samples) -> dict[str, dict[str, dict[str, Any]]]:
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario, clients in samples.items():
        for client, runs in clients.items():
            measured = [s for s in runs if "value" in s]
            unavailable = next((s["unavailable"] for s in runs if "unavailable" in s), None)
            summary.setdefault(scenario, {})[client] = {
                "samples": [round(s["value"], 2) for s in measured],
                "rounds": [s["round"] for s in measured],
                "median": _median_of([s["value"] for s in measured]),
                "count": _median_of([s.get("count") for s in measured]),
                "incomplete_samples": sum(1 for s in measured if not s.get("complete", True)),
                "maxrss_kb": _median_of([s.get("maxrss_kb") for s in measured]),
                "extra": _median_of([s.get("extra") or {} for s in measured]) or {},
                "unavailable": unavailable,
                "errors": [s["error"] for s in runs if "error" in s],
            }
    return summary


def _per_round_ratios(ours: dict[str, Any], peer: dict[str, Any]) -> list[float]:
    theirs = dict(zip(peer["rounds"], peer["samples"]))
    return [round(v / theirs[r], 3) for r, v in zip(ours["rounds"], ours["samples"])
            if theirs.get(r)]


def rows(summary: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in ROWS:
        clients = summary.get(row.scenario)
        if clients is None:
            continue  # not run (--only)
        ours = clients.get(row.client, {})
        pyreqwest = clients.get("pyreqwest", {})
        others = {name: c["median"] for name, c in clients.items()
                  if name not in OURS and name != "pyreqwest" and c.get("median")}
        best = max(others, key=lambda n: others[n]) if others else None
        entry: dict[str, Any] = {
            "row": row.title, "scenario": row.scenario, "client": row.client,
            "unit": SCENARIO_BY_KEY[row.scenario].unit,
            "bizmsg": ours.get("median"), "bizmsg_unavailable": ours.get("unavailable"),
            "pyreqwest": pyreqwest.get("median"),
            "best_other": best, "best_other_value": others.get(best) if best else None,
            "target": row.target,
            "vs": "wrk" if row.vs_ceiling else row.vs_client or "pyreqwest",
        }
        if row.vs_ceiling:
            reference = summary.get("ceiling", {}).get("wrk", {})
        elif row.vs_client is not None:
            # With / without: both ran in every round of this scenario, back to back.
            reference = clients.get(row.vs_client, {})
            entry["pyreqwest"] = entry["best_other"] = entry["best_other_value"] = None
            entry["baseline"] = reference.get("median")
        else:
            reference = pyreqwest
        if ours.get("median") and reference.get("median"):
            entry["ratio"] = round(ours["median"] / reference["median"], 3)
            entry["ratio_per_round"] = _per_round_ratios(ours, reference)
        else:
            entry["ratio"] = None
        if row.vs_ceiling:
            entry["wrk"] = reference.get("median")
        entry["met"] = (None if entry["ratio"] is None or row.target is None
                        else entry["ratio"] >= row.target)
        out.append(entry)
    return out


# --- Markdown ----------------------------------------------------------------------------------


def _n(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _mib(kb: float | None) -> str:
    return "–" if kb is None else f"{kb / 1024:,.1f}"


def _against_variant(entry: dict[str, Any]) -> bool:
    """A row of a bizmsg variant against plain bizmsg (with / without), not against a peer."""
    return entry["vs"] not in ("wrk", "pyreqwest")


def _target(entry: dict[str, Any]) -> str:
    if entry["target"] is None:
        return "–"
    return f"{entry['target']:.0%} of wrk" if entry["vs"] == "wrk" else f"{entry['target']:.2f}"


def _ratio(entry: dict[str, Any]) -> str:
    if entry["ratio"] is None:
        return "–"
    if _against_variant(entry):
        return f"{entry['ratio']:.0%} of without"
    return f"{entry['ratio']:.0%} of wrk" if entry["vs"] == "wrk" else f"{entry['ratio']:.2f}"


def markdown(results: dict[str, Any]) -> str:
    m, cfg, summary = results["machine"], results["config"], results["scenarios"]
    pk = m["packages"]
    lines = [f"# bizmsg benchmarks, {m['date']}", ""]
    if results["server"]["kind"] != "nginx":
        lines += ["**Server: the embedded sandbox, not nginx (nginx was not found or "
                  "--server sandbox): these figures are not comparable with nginx runs.**", ""]
    if cfg["client_cpu"] is None:
        lines += [f"**{cfg['pinning']}.**", ""]
    lines += [
        f"- server: **{results['server']['kind']}** ({results['server']['note']}"
        + (f", {results['server']['version']}" if results["server"].get("version") else "")
        + ")",
        f"- pinning: {cfg['pinning']}",
        f"- load: {cfg['rounds']} interleaved round(s); each sample stops after "
        f"{cfg['requests']:,} requests or {cfg['seconds']} s (iter/send_many: the whole job, "
        f"cut at {cfg['timeout']} s); every figure is the median of its rounds",
        f"- machine: {m['cpu_model']}, {m['cores']} cores (allowed {m['cpus_allowed']}), "
        f"Linux {m['kernel']}, Python {m['python']}, load average at start "
        f"{m['load_average_at_start']}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v)
        + "".join(f", {v}" for v in results["tools"].values() if v)
        + (f"; git {m['git']}" if m.get("git") else ""),
    ]
    services = results.get("services") or {}
    if services:
        lines.append("- optional scenarios' servers: " + "; ".join(
            f"{name}: " + (s.get("note") or f"unavailable ({s.get('unavailable') or s.get('failed')})")
            for name, s in services.items()))
    lines += [
        "",
        "| scenario | bizmsg | pyreqwest | best other peer | ratio | target | met |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    for entry in results["rows"]:
        if entry["vs"] == "wrk":
            other = f"wrk {_n(entry.get('wrk'))}" if entry.get("wrk") else "wrk: not run"
            pyreqwest = "–"
        elif _against_variant(entry):
            other = f"without {_n(entry.get('baseline'))}"
            pyreqwest = "–"
        else:
            other = (f"{entry['best_other']} {_n(entry['best_other_value'])}"
                     if entry["best_other"] else "–")
            pyreqwest = _n(entry["pyreqwest"])
        ours = (_n(entry["bizmsg"]) if entry["bizmsg"] is not None
                else "not available" if entry["bizmsg_unavailable"] else "failed")
        met = {True: "met", False: "**not met**", None: "–"}[entry["met"]]
        lines.append(f"| {entry['row']} ({entry['unit']}) | {ours} | {pyreqwest} | {other} | "
                     f"{_ratio(entry)} | {_target(entry)} | {met} |")
    ceiling = summary.get("ceiling")
    if ceiling:
        tools = ", ".join(f"{t} {_n(c['median'])}" if c["median"] else f"{t}: {c['unavailable'] or 'failed'}"
                          for t, c in ceiling.items())
        lines.append(f"| ceiling, 64 connections on the client CPU (requests/s) | – | – | {tools} | "
                     "– | – | – |")
    lines += ["", "Ratios are bizmsg / pyreqwest (above 1: bizmsg is faster), except send_many: "
              "bizmsg / wrk. \"best other peer\" is the fastest of httpx, requests and aiohttp."]
    if any(_against_variant(entry) for entry in results["rows"]):
        lines[-1] += (" The shared-limits and journal rows: bizmsg with the option / bizmsg "
                      "without it (\"without\"), same job, same rounds.")
    lines += _iter_section(summary.get("iter"))
    lines += _bulk_section(summary.get("send_many"), summary.get("million"))
    lines += _proxy_section(summary.get("proxy"), summary.get("sequential"))
    lines += _variants_section("shared_limits", "send_many_iter with shared limits (Redis)",
                               summary.get("shared_limits"), "redis_commands", "Redis commands")
    lines += _variants_section("journal", "send_many_iter with a journal", summary.get("journal"),
                               "journal_rows", "journal rows")
    notes = results["notes"] + [
        f"{scenario}/{client}: {error.strip().splitlines()[0] if error.strip() else error}"
        for scenario, clients in summary.items() for client, c in clients.items()
        for error in c["errors"]]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def _iter_section(clients: dict[str, dict[str, Any]] | None) -> list[str]:
    if not clients:
        return []
    if not any(c["median"] for c in clients.values()):
        why = next((c["unavailable"] for c in clients.values() if c["unavailable"]), "failed")
        return ["", "## iter over 100,000 numbers (page_size=1000)", "", f"- not run: {why}"]
    names = list(clients)
    lines = ["", "## iter over 100,000 numbers (page_size=1000)", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(clients[n]) for n in names) + " |")

    def at(key: str, marks: tuple[str, ...],
           fmt: Callable[[Any], str]) -> Callable[[dict[str, Any]], str]:
        def cell(c: dict[str, Any]) -> str:
            taken: dict[str, Any] = c["extra"].get(key, {})
            return " / ".join(fmt(taken.get(k)) for k in marks)
        return cell

    def rate(c: dict[str, Any]) -> str:
        if c["median"]:
            return _n(c["median"])
        return "not available" if c["unavailable"] else "failed"

    def seconds(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    row("items/s", rate)
    row("peak RSS of the process (MiB)", lambda c: _mib(c["maxrss_kb"]))
    row("RSS at 10k / 50k / 100k items (MiB)", at("rss_kb_at", ("10000", "50000", "100000"), _mib))
    row("seconds at 25k / 50k / 75k / 100k items",
        at("seconds_at", ("25000", "50000", "75000", "100000"), seconds))
    lines.append("")
    lines.append("Flat RSS and evenly spaced times mean memory does not grow with the number of "
                 "items and every page costs the same.")
    return lines


def _bulk_section(bulk: dict[str, dict[str, Any]] | None,
                  million: dict[str, dict[str, Any]] | None) -> list[str]:
    lines: list[str] = []
    for title, clients in (("send_many_iter", bulk), ("send_many_iter, 1,000,000 messages", million)):
        c = (clients or {}).get("bizmsg")
        if c is None:
            continue
        lines += ["", f"## {title}", ""]
        if not c["median"]:
            lines.append(f"- {c['unavailable'] or 'failed: ' + '; '.join(c['errors'])[:300]}")
            continue
        extra = c["extra"]
        marks = extra.get("rss_kb_at", {})
        lines += [
            f"- {extra.get('messages', 0):,} messages ({extra.get('message_type')}) from a "
            f"generator through `{extra.get('api')}`, concurrency 64: {_n(c['median'])} "
            f"messages/s, {extra.get('failures', 0):,} failures"
            + (f"; {c['incomplete_samples']} sample(s) cut by the timeout (median "
               f"{c['count']:,.0f} messages sent)" if c["incomplete_samples"] else ""),
            f"- peak RSS of the process: {_mib(c['maxrss_kb'])} MiB; RSS after "
            + ", ".join(f"{int(k):,} outcomes: {_mib(v)} MiB" for k, v in marks.items()),
        ]
    return lines


def _median_text(c: dict[str, Any]) -> str:
    if c["median"]:
        return _n(c["median"])
    return "not available" if c["unavailable"] else "failed"


def _in_scenario_order(scenario: str, clients: dict[str, dict[str, Any]]) -> list[str]:
    """The clients as the scenario lists them (skipped ones were recorded first)."""
    order = SCENARIO_BY_KEY[scenario].clients
    return sorted(clients, key=lambda n: order.index(n) if n in order else len(order))


def _not_run(title: str, clients: dict[str, dict[str, Any]]) -> list[str] | None:
    """The section's one line when no client was measured at all (its server is missing)."""
    if any(c["median"] for c in clients.values()):
        return None
    why = next((c["unavailable"] for c in clients.values() if c["unavailable"]), None)
    errors = [e for c in clients.values() for e in c["errors"]]
    return ["", f"## {title}", "",
            f"- not run: {why or 'failed: ' + '; '.join(errors)[:300]}"]


def _proxy_section(proxy: dict[str, dict[str, Any]] | None,
                   direct: dict[str, dict[str, Any]] | None) -> list[str]:
    """Each client through Squid, against pyreqwest through Squid, and (when the sequential
    scenario ran too) against itself without the proxy; and what Squid forwarded."""
    if not proxy:
        return []
    title = "sequential sync send through a forward proxy (Squid)"
    not_run = _not_run(title, proxy)
    if not_run is not None:
        return not_run
    reference = proxy.get("pyreqwest", {}).get("median")
    header = ("| client | sends/s | / pyreqwest | % of direct (sequential) | forwarded by Squid "
              "| measured sends |")
    lines = ["", f"## {title}", "", header, "|---|---:|---:|---:|---:|---:|"]
    for name in _in_scenario_order("proxy", proxy):
        c = proxy[name]
        alone = (direct or {}).get(name, {}).get("median")
        lines.append(
            f"| {name} | {_median_text(c)} | "
            + (f"{c['median'] / reference:.2f}" if c["median"] and reference else "–") + " | "
            + (f"{c['median'] / alone:.0%}" if c["median"] and alone else "–") + " | "
            + f"{_n(c['extra'].get('forwarded_by_squid'))} | {_n(c['count'])} |")
    lines += ["", ("Every client is given `proxy=\"http://127.0.0.1:PORT\"` (pyreqwest: "
                   "`.proxy(ProxyBuilder.http(...))`; requests: `Session.proxies`) and sends to "
                   "nginx on plain http. \"forwarded by Squid\" counts the 200 lines of its "
                   "access log during the sample (the answer check and the warmup included): a "
                   "sample that did not go through the proxy is a failure, not a figure.")]
    return lines


def _variants_section(scenario: str, title: str, clients: dict[str, dict[str, Any]] | None,
                      proof: str, proof_label: str) -> list[str]:
    """bizmsg's bulk send without and with an option, each as a share of without; `proof`:
    the extra that shows the option's server did the work (Redis's commands, journal rows)."""
    if not clients:
        return []
    not_run = _not_run(title, clients)
    if not_run is not None:
        return not_run
    baseline = clients.get("bizmsg", {})
    header = (f"| variant | adds | messages/s | % of without | per round | failures | "
              f"{proof_label} | messages |")
    lines = ["", f"## {title}", "", header, "|---|---|---:|---:|---|---:|---:|---:|"]
    for name in _in_scenario_order(scenario, clients):
        c = clients[name]
        share = (f"{c['median'] / baseline['median']:.0%}"
                 if c["median"] and baseline.get("median") else "–")
        # From the samples, not _per_round_ratios (rounded for the JSON, then again here).
        without = dict(zip(baseline.get("rounds", []), baseline.get("samples", [])))
        per_round = ", ".join(f"{v / without[r]:.0%}" for r, v in zip(c["rounds"], c["samples"])
                              if name != "bizmsg" and without.get(r)) or "–"
        extra = c["extra"]
        messages = f"{_n(c['count'])} of {_n(extra.get('messages'))}" if c["median"] else "–"
        if c["incomplete_samples"]:
            messages += f" ({c['incomplete_samples']} cut by the timeout)"
        lines.append(f"| {name} | {VARIANTS.get(name, '')} | {_median_text(c)} | {share} | "
                     f"{per_round} | {_n(extra.get('failures'))} | {_n(extra.get(proof))} | "
                     f"{messages} |")
    sqlite, postgres = clients.get("bizmsg-sqlite", {}), clients.get("bizmsg-postgres", {})
    if sqlite.get("median") and postgres.get("median"):
        commits = postgres["extra"].get("commits_per_s")
        lines += ["", f"PostgreSQL journal / SQLite journal: "
                  f"{postgres['median'] / sqlite['median']:.0%} (target: at least 50 %)"
                  + (f"; PostgreSQL committed {_n(commits)} transactions a second" if commits
                     else "") + "."]
    return lines


# --- Files -------------------------------------------------------------------------------------


def write_json(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=2) + "\n")


def write_png(results: dict[str, Any], path: Path) -> str | None:
    """The ratios as bars with their targets; returns why not, if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: write the file only
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart (pip install matplotlib)"
    entries = [e for e in results["rows"] if e["ratio"] is not None]
    if not entries:
        return "no ratio to chart"
    labels = [textwrap.fill(e["row"], 18) + ("\n[vs wrk]" if e["vs"] == "wrk" else
                                             "\n[vs without]" if _against_variant(e) else "")
              for e in entries]
    ratios = [e["ratio"] for e in entries]
    # Green: target met, red: not met, blue: no target (iter).
    colors = ["#3b6ea5" if e["met"] is None else "#4c9a2a" if e["met"] else "#c0392b"
              for e in entries]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(entries)), 4.8))
    xs = list(range(len(entries)))
    ax.bar(xs, ratios, color=colors, width=0.6)
    for x, e in zip(xs, entries):
        ax.text(x, e["ratio"], f"{e['ratio']:.2f}", ha="center", va="bottom", fontsize=9)
        if e["target"] is not None:
            ax.hlines(e["target"], x - 0.4, x + 0.4, colors="black", linestyles="--", linewidth=1.5)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("bizmsg / pyreqwest (send_many: / wrk; variants: / without)")
    server = results["server"]["kind"]
    ax.set_title(f"bizmsg vs pyreqwest, {server}, median of {results['config']['rounds']} "
                 f"round(s); dashed: target", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
