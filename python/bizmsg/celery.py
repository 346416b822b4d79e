"""Sharded campaigns on Celery: one call cuts a campaign into shard tasks, and each task runs
its shard on a worker with the shared journal (PostgreSQL) and the shared limits (Redis).

The worker's module registers the task::

    # tasks.py: the worker runs `celery -A tasks worker --concurrency=4`, with
    # BIZMSG_TOKEN, BIZMSG_BASE_URL, BIZMSG_SHARED_LIMITS=redis://... and
    # BIZMSG_JOURNAL=postgresql://... in its environment
    from celery import Celery
    import bizmsg.celery

    app = Celery("campaigns", broker="redis://127.0.0.1:6379/0",
                 backend="redis://127.0.0.1:6379/1")
    send_shard = bizmsg.celery.register(app)

and any process starts a campaign::

    from tasks import app
    import bizmsg.celery

    result = bizmsg.celery.send_campaign(app, rows, campaign_id="spring-2026", shards=8,
                                         pace="auto")
    print(result.get())     # one summary per shard: counts, the keys of messages in doubt

Why it is safe, whatever Celery does with a shard:

- **A message is known by what it is.** The journal keys every message by the campaign id and
  its content (recipient, sender, template, parameters, language), never by its position, and
  claims it before it leaves. A shard run twice (a redelivery, a retry, two workers holding
  the same task), or a campaign re-cut into another number of shards, never sends a message
  twice: one run claims it, another waits for its result and reports it ``skipped`` (with
  that result; counted in the summary's ``settled_before``). Its ``Idempotency-Key`` is derived
  from the same identity, so it is the same in every process.
- **Repeats stay together.** :func:`shards` places a message by a hash of its identity, so the
  copies of one message (``dedupe=False``) land in one shard and are counted there as the
  journal counts them.
- **A lost worker's shard comes back.** The task is ``acks_late`` (acknowledged when the shard
  is done, not when it starts) and ``reject_on_worker_lost`` (a pool child killed mid-task,
  SIGKILL or the OOM killer, has its message put back on the queue instead of acknowledged
  and marked failed). Its claims belonged to a PostgreSQL session that died with it, so the
  redelivered shard finds them in doubt at once, without waiting out a lease: reported
  ``unknown`` (their keys in the summary), or sent again with their keys with
  ``resend_unknown=True``, 5 s after the dead run's last sign of life (right only for a service
  that honours ``Idempotency-Key``).
- **The client is made in the worker's pool process**, on its first shard, never at import:
  Celery's prefork pool forks its children from the main process, and a client made before
  the fork (its connections, its runtime) is not the child's to use.

:func:`configure` (called by :func:`register`) sets the app's settings this needs, each for a
reason:

- ``worker_prefetch_multiplier = 1``: a worker reserves one task per pool process, instead of
  holding four times as many shards back from other workers while it runs its own.
- ``worker_cancel_long_running_tasks_on_connection_loss = True``: when a worker loses the
  broker, the broker redelivers its unacknowledged shards; the worker then stops running them
  too, instead of a second copy running beside the first (the journal would make that safe,
  not free).
- ``broker_transport_options["visibility_timeout"]`` (a Redis or SQS broker): a message not
  acknowledged within it is given to another worker *even if the first is still running it*.
  It must be longer than the longest shard (at 60 messages a second, 100,000 messages take
  28 minutes): the default here is Celery's hour, raised if the app set less. It is not the
  journal's ``lease``: a run's liveness is its PostgreSQL session, so a shard whose worker
  died is resumed as soon as the message comes back, and a too-short visibility timeout costs
  a second run that finds the messages claimed, not duplicates.

Two settings stay the app's own: ``task_acks_on_failure_or_timeout`` (default on: a shard that
*raises*, e.g. its journal's database went away, is acknowledged, not redelivered; run the
campaign again once the store is back, and only what never left is sent) and time limits
(never shorter than a shard). A shard that kills its pool process every time it runs would be
redelivered for ever: watch for ``WorkerLostError`` in the worker's log.

Settings of the worker process, from its environment or :func:`register`'s arguments, never
from the broker's messages (which any consumer, monitor or result backend may show): the
client (``BIZMSG_TOKEN``, ``BIZMSG_BASE_URL``, ``BIZMSG_SHARED_LIMITS``, or ``client=``) and
the journal (``BIZMSG_JOURNAL``, or ``journal=``). A message carries the shard's rows, the
campaign id and the campaign's options only.

This module imports Celery only when a task is registered or sent: :func:`shards` works
without it. ``import bizmsg`` does not import this module.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, cast

from . import Client, ConfigurationError, ValidationError

if TYPE_CHECKING:
    from ._resources.campaign_options import CampaignOptions

__all__ = ["TASK_NAME", "ShardSummary", "shards", "configure", "register", "send_campaign"]

#: The name the shard task is registered under by default.
TASK_NAME = "bizmsg.send_shard"

#: The ``send_many`` options a campaign may pass to its shards (JSON values, as the broker
#: carries them). ``journal`` and ``campaign_id`` are the task's own.
SHARD_OPTIONS = frozenset({"pace", "rate_limit", "concurrency", "dedupe", "resend_unknown",
                           "enforce_tier", "lease", "timeout", "max_retries", "stop_on_error"})

#: Celery's own default visibility timeout (seconds), which :func:`configure` keeps as a floor.
DEFAULT_VISIBILITY_TIMEOUT = 3600.0


class ShardSummary(TypedDict):
    """What a shard task returns (JSON, as a result backend stores it)."""

    campaign_id: str
    #: This shard's number, from 0, and how many the campaign was cut into.
    shard: int
    shards: int
    #: ``sent``, ``rejected``, ``unknown``, ``failed`` and ``skipped``, as ``BulkResult.counts``.
    counts: dict[str, int]
    #: The idempotency keys of the messages left in doubt (reconcile these, or run the
    #: campaign again with ``resend_unknown=True``).
    unknown: list[str]
    #: Why the campaign stopped early (``BulkResult.stop_reason``), or ``None``.
    stop_reason: str | None
    #: Whether Celery had delivered this task before (a redelivery after a lost worker).
    redelivered: bool
    #: Messages of this shard another run had already settled, by their recorded result
    #: (``sent``, ``rejected``), counted in ``counts["skipped"]``: an earlier run of the
    #: campaign, or another copy of this shard running beside this one (a redelivery while the
    #: first copy runs, whose messages this copy waits for). With them every copy's summary
    #: accounts for the whole shard, so the one the result backend keeps (the last to finish)
    #: tells the truth.
    settled_before: dict[str, int]


# -- cutting a campaign into shards ----------------------------------------------------------


def shards(messages: Iterable[object], count: int) -> list[list[dict[str, Any]]]:
    """Cuts ``messages`` (``bizmsg.Message`` objects or mappings, as ``send_many`` takes them)
    into ``count`` lists of plain dicts (JSON, for a broker), each message placed by a stable
    hash of its identity: recipient, sender, template name, parameters and language, written
    as ``send_many`` reads them (``"+86 138 0013 8000"`` and ``"8613800138000"`` are one
    recipient). The same input gives the same shards in every process; the copies of one
    message land in the same shard. Items that are not messages go to a shard too (and fail
    there, as they would in ``send_many``)."""
    if isinstance(count, bool) or not _is_int(count) or count < 1:
        raise ValidationError(f"invalid shards: must be a positive number, got {count!r}",
                              field="shards")
    cut: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for item in messages:
        row = _plain(item)
        digest = hashlib.blake2b(_identity(row).encode(), digest_size=8).digest()
        cut[int.from_bytes(digest, "big") % count].append(row)
    return cut


def _is_int(value: object) -> bool:
    return isinstance(value, int)


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _plain(item: object) -> dict[str, Any]:
    """A message as a flat dict: ``to``, ``from``, ``name``, ``parameters``, ``language``
    (and ``idempotency_key`` when it has one, and any other keys a mapping had)."""
    from ._campaign.message import Message

    if isinstance(item, Message):
        row: dict[str, Any] = {"to": item.to, "from": item.from_}
        template: Any = item.template
        if item.idempotency_key is not None:
            row["idempotency_key"] = item.idempotency_key
    elif isinstance(item, Mapping):
        mapping = cast(Mapping[str, Any], item)
        row = {str(k): v for k, v in mapping.items() if k not in ("template", "from_")}
        if "from" not in row and "from_" in mapping:
            row["from"] = mapping["from_"]
        template = mapping.get("template")
    else:
        return {"item": item}
    if template is not None:
        for part in ("name", "parameters", "language"):
            value = _part(template, part)
            if value is not None:
                row[part] = value
    if isinstance(row.get("parameters"), tuple):
        row["parameters"] = list(row["parameters"])
    return row


def _part(template: object, name: str) -> object:
    if isinstance(template, Mapping):
        return cast(Mapping[str, object], template).get(name)
    return getattr(template, name, None)


def _identity(row: Mapping[str, Any]) -> str:
    parts = (_phone(row.get("to")), _phone(row.get("from")), str(row.get("name")),
             _parameters(row.get("parameters")), _language(row.get("language")))
    return "\0".join(parts)


def _phone(value: object) -> str:
    # The digits as sent: separators dropped, "+" or the 00 prefix before the country code.
    text = str(value)
    kept = "".join(c for c in text if c not in " -.()")
    if kept.startswith("+"):
        return kept[1:]
    return kept[2:] if kept.startswith("00") else kept


def _parameters(value: object) -> str:
    if isinstance(value, str):
        return value
    # Compact JSON, key order kept, as the wire (and the journal's fingerprint) has it.
    shown = dict(cast(Mapping[object, object], value)) if isinstance(value, Mapping) else value
    try:
        return json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(shown)


def _language(value: object) -> str:
    text = str(value)
    for separator in "_-":
        if separator in text:
            language, region = text.split(separator, 1)
            return f"{language.lower()}_{region.upper()}"
    return text.lower()


# -- Celery ----------------------------------------------------------------------------------


def configure(app: Any, *, visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT) -> None:
    """Sets on ``app`` (a ``celery.Celery``) the settings that make shard tasks safe (see the
    module's documentation): a prefetch of one, long-running tasks cancelled when the broker
    connection is lost, and a broker visibility timeout of at least ``visibility_timeout``
    seconds (longer than the longest shard). Other transport options are kept."""
    conf = app.conf
    conf.worker_prefetch_multiplier = 1
    conf.worker_cancel_long_running_tasks_on_connection_loss = True
    transport = dict(conf.broker_transport_options or {})
    transport["visibility_timeout"] = max(float(transport.get("visibility_timeout") or 0),
                                          float(visibility_timeout))
    conf.broker_transport_options = transport


def register(app: Any, *, name: str = TASK_NAME, journal: str | None = None,
             client: Callable[[], Client] | None = None, configure_app: bool = True,
             visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT) -> Any:
    """Registers on ``app`` the task that runs one shard, and returns it (a Celery task).

    The task calls ``send_many(rows, campaign_id=..., journal=..., **options)`` on a client
    made in the pool process on its first shard: ``client()`` if given, else
    ``bizmsg.Client()`` (token, base URL and ``shared_limits`` from ``BIZMSG_TOKEN``,
    ``BIZMSG_BASE_URL`` and ``BIZMSG_SHARED_LIMITS``). ``journal`` (default:
    ``BIZMSG_JOURNAL`` in the worker's environment) is the journal every shard shares: a
    ``postgresql://`` URL, or an SQLite file when every worker runs on one host. It returns a
    :class:`ShardSummary`; a shard whose journal or shared store fails raises the campaign's
    error (``CampaignError`` or ``SharedStateError``, its message without passwords).

    The task is ``acks_late`` and ``reject_on_worker_lost``; ``configure_app`` also applies
    :func:`configure` with ``visibility_timeout``."""
    if configure_app:
        configure(app, visibility_timeout=visibility_timeout)
    made: dict[int, Client] = {}

    def client_here() -> Client:
        # One client per process, made in it: a pool child forked from a parent that had one
        # makes its own (the parent's connections are not the child's).
        pid = os.getpid()
        if pid not in made:
            made.clear()
            made[pid] = client() if client is not None else Client()
        return made[pid]

    def send_shard(task: Any, rows: list[dict[str, Any]], *, campaign_id: str, shard: int,
                   shards: int, options: dict[str, Any]) -> ShardSummary:
        where = journal or os.environ.get("BIZMSG_JOURNAL")
        if not where:
            raise ConfigurationError(
                "a shard needs the campaign's shared journal: pass journal= to "
                "bizmsg.celery.register() or set BIZMSG_JOURNAL in the worker's environment")
        _check_options(options)
        if client is None and not os.environ.get("BIZMSG_SHARED_LIMITS") and (
                options.get("pace") or options.get("rate_limit")):
            # Each pool process would pace alone: together, several times the number's pace.
            logging.getLogger("bizmsg").warning(
                "bizmsg.celery: shard %s of campaign %r paces without shared limits "
                "(BIZMSG_SHARED_LIMITS is not set in the worker): its pace is not shared with "
                "the other shards", shard, campaign_id)
        keywords = cast("CampaignOptions",
                        {**options, "campaign_id": campaign_id, "journal": where})
        result = client_here().messages.send_many(rows, **keywords)
        delivery: Mapping[str, Any] = getattr(task.request, "delivery_info", None) or {}
        settled_before = {"sent": 0, "rejected": 0}
        for outcome in result.outcomes:
            if outcome.status == "skipped" and outcome.result is not None:
                settled_before["sent" if outcome.result.ok else "rejected"] += 1
        return {
            "campaign_id": campaign_id, "shard": shard, "shards": shards,
            "counts": dict(result.counts),
            "unknown": [o.idempotency_key or "" for o in result.unknown()],
            "stop_reason": result.stop_reason,
            "redelivered": bool(delivery.get("redelivered")),
            "settled_before": settled_before,
        }

    send_shard.__doc__ = "Sends one shard of a campaign (bizmsg.celery)."
    return app.task(name=name, bind=True, acks_late=True, reject_on_worker_lost=True)(send_shard)


def send_campaign(app: Any, messages: Iterable[Any], *, campaign_id: str, shards: int = 8,
                  name: str = TASK_NAME, queue: str | None = None, **options: Any) -> Any:
    """Cuts ``messages`` into ``shards`` (see :func:`shards`) and sends one task per shard
    (the task :func:`register` made, by ``name``, to ``queue`` if given), as one Celery group.
    ``options`` are ``send_many``'s for every shard: ``pace``, ``rate_limit`` (with the shared
    limits, the rate of the whole campaign), ``concurrency``, ``dedupe``, ``resend_unknown``,
    ``enforce_tier``, ``lease``, ``timeout`` (seconds), ``max_retries``, ``stop_on_error``.
    Returns the ``celery.result.GroupResult``: ``.get()`` gives one :class:`ShardSummary` per
    shard, in shard order (with a result backend)."""
    if not _is_text(campaign_id) or not campaign_id.strip():
        raise ValidationError("invalid campaign_id: a sharded campaign needs a campaign_id "
                              "(its shards share one journal)", field="campaign_id")
    _check_options(options)
    cut = _cut(messages, shards)
    celery: Any = importlib.import_module("celery")  # untyped: Any from here on
    route: dict[str, Any] = {} if queue is None else {"queue": queue}
    return celery.group(
        app.signature(name, kwargs={"rows": rows, "campaign_id": campaign_id, "shard": number,
                                    "shards": len(cut), "options": dict(options)}, **route)
        for number, rows in enumerate(cut)
    ).apply_async()


_cut = shards


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - SHARD_OPTIONS)
    if unknown:
        raise ValidationError(
            f"invalid options for a shard: {', '.join(unknown)} (a shard takes "
            f"{', '.join(sorted(SHARD_OPTIONS))}; the journal and the client are the "
            "worker's settings)", field=unknown[0])
