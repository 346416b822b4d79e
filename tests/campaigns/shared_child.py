"""One process of a multi-process test (``test_shared_limits.py``, ``test_shared_journal.py``):
``python shared_child.py SPEC.json`` does what the spec says with a client of its own and prints
one JSON line with what it saw. Started by ``shared_support.Child``.

The spec (a JSON object; a file, so no password is on a command line):

- ``client``: ``"sync"`` or ``"async"``; ``base_url``, ``token``; ``shared_limits`` (a URL or
  absent); ``timeout``, ``max_retries`` and ``allow_insecure_http`` for the client (optional);
- ``kind``: ``"campaign"`` (``send_many(rows, **options)``) or ``"single"`` (``messages.send``
  of every row, ``threads`` at a time: threads for a sync client, tasks for an async one);
- ``rows``: the path of a JSON file with the messages (flat dicts: ``to``, ``from``, ``name``,
  ``parameters``, ``language``);
- ``options``: keywords of ``send_many`` (``journal``, ``campaign_id``, ``pace``...);
- ``barrier``: print ``ready`` and wait for a line on stdin before sending, so that several
  children start together.

The printed line: ``counts`` (a campaign's, or for single sends ``sent`` and ``errors``),
``outcomes`` (``[to, status, idempotency_key, reason, error]`` of every message of a
campaign),
``error`` (``type``, ``message``, ``field`` of an exception the call raised, with the counts and
outcomes of its ``.bulk_result``), ``stop_reason``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import bizmsg


def described(error: BaseException) -> dict[str, Any]:
    return {"type": type(error).__name__, "message": str(error), "repr": repr(error),
            "field": getattr(error, "field", None)}


def campaign_record(result: Any) -> dict[str, Any]:
    return {
        "counts": dict(result.counts),
        "stop_reason": result.stop_reason,
        "repr": repr(result),
        "outcomes": [[o.message["to"], o.status, o.idempotency_key, o.reason,
                      None if o.error is None else f"{type(o.error).__name__}: {o.error}"]
                     for o in result.outcomes],
    }


def run_campaign_sync(spec: dict[str, Any], rows: list[dict[str, Any]],
                      client: bizmsg.Client) -> dict[str, Any]:
    try:
        result = client.messages.send_many(rows, **spec.get("options", {}))
    except (bizmsg.BizmsgError, KeyboardInterrupt) as error:
        partial = getattr(error, "bulk_result", None)
        return {"error": described(error),
                **(campaign_record(partial) if partial is not None else {})}
    return campaign_record(result)


async def run_campaign_async(spec: dict[str, Any], rows: list[dict[str, Any]],
                             client: bizmsg.AsyncClient) -> dict[str, Any]:
    try:
        result = await client.messages.send_many(rows, **spec.get("options", {}))
    except bizmsg.BizmsgError as error:
        partial = getattr(error, "bulk_result", None)
        return {"error": described(error),
                **(campaign_record(partial) if partial is not None else {})}
    return campaign_record(result)


def template(row: dict[str, Any]) -> bizmsg.Template:
    return bizmsg.Template(name=row["name"], parameters=row["parameters"],
                           language=row["language"])


def run_single_sync(spec: dict[str, Any], rows: list[dict[str, Any]],
                    client: bizmsg.Client) -> dict[str, Any]:
    def send(row: dict[str, Any]) -> str | None:
        try:
            client.messages.send(to=row["to"], from_=row["from"], template=template(row))
        except bizmsg.BizmsgError as error:
            return type(error).__name__
        return None

    with ThreadPoolExecutor(spec.get("threads", 8)) as pool:
        errors = [e for e in pool.map(send, rows) if e is not None]
    return {"counts": {"sent": len(rows) - len(errors), "errors": len(errors)},
            "error_types": sorted(set(errors))}


async def run_single_async(spec: dict[str, Any], rows: list[dict[str, Any]],
                           client: bizmsg.AsyncClient) -> dict[str, Any]:
    gate = asyncio.Semaphore(spec.get("threads", 8))

    async def send(row: dict[str, Any]) -> str | None:
        async with gate:
            try:
                await client.messages.send(to=row["to"], from_=row["from"],
                                           template=template(row))
            except bizmsg.BizmsgError as error:
                return type(error).__name__
            return None

    errors = [e for e in await asyncio.gather(*(send(r) for r in rows)) if e is not None]
    return {"counts": {"sent": len(rows) - len(errors), "errors": len(errors)},
            "error_types": sorted(set(errors))}


def client_options(spec: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {"base_url": spec["base_url"]}
    for name in ("shared_limits", "timeout", "max_retries", "allow_insecure_http"):
        if spec.get(name) is not None:
            options[name] = spec[name]
    return options


def wait_for_go(spec: dict[str, Any]) -> None:
    if spec.get("barrier"):
        print("ready", flush=True)
        sys.stdin.readline()


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    with open(spec["rows"], encoding="utf-8") as f:
        rows: list[dict[str, Any]] = json.load(f)
    kind = spec.get("kind", "campaign")
    record: dict[str, Any]
    try:
        if spec.get("client", "sync") == "sync":
            with bizmsg.Client(spec["token"], **client_options(spec)) as client:
                wait_for_go(spec)
                record = (run_campaign_sync(spec, rows, client) if kind == "campaign"
                          else run_single_sync(spec, rows, client))
        else:
            async def run() -> dict[str, Any]:
                async with bizmsg.AsyncClient(spec["token"], **client_options(spec)) as client:
                    wait_for_go(spec)
                    if kind == "campaign":
                        return await run_campaign_async(spec, rows, client)
                    return await run_single_async(spec, rows, client)

            record = asyncio.run(run())
    except bizmsg.BizmsgError as error:
        record = {"error": described(error)}
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
