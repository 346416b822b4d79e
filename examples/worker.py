"""Sending from a job queue (Celery, RQ, arq, ...): retried jobs never send twice.

A queue retries a job that failed, and may run a job twice (a worker dies after the send but
before the ack). Both are safe here because each send's idempotency key comes from the *job*,
not from the attempt: every run of job ``42`` sends with the same key, and the service answers
a repeated key with the original result instead of sending again (the sandbox honours
``Idempotency-Key``; the spec does not say whether the real service does).

- ``send_notification(job_id, ...)`` sends one template. When the outcome is unknown (the
  connection dropped after the request left) it raises, so the queue retries; the retry
  re-sends with the same key and so learns what happened instead of sending a second message.
- ``send_campaign_shard(campaign_id, rows)`` sends one shard of a campaign with
  ``send_many(campaign_id=...)``: each message's key is derived from the campaign id and its
  content (never its position), so a re-run shard re-sends with the same keys. It raises while
  any message is in doubt, so the queue runs the shard again. (Without a journal, this is safe
  only against a service that honours ``Idempotency-Key``: ``bizmsg.celery`` shards a campaign
  over one shared journal instead.)

With Celery, for example (the job id is your own notification id, not the queue's task id, so
that a job enqueued twice is covered too)::

    @celery.task(autoretry_for=worker.RETRYABLE, retry_backoff=True, max_retries=8)
    def notify(notification_id, to, from_, template, parameters, language):
        worker.send_notification(notification_id, to, from_, template, parameters, language)

    @celery.task(autoretry_for=(*worker.RETRYABLE, worker.ShardIncomplete), retry_backoff=True)
    def send_shard(campaign_id, rows):
        worker.send_campaign_shard(campaign_id, rows)

Each worker process makes one ``bizmsg.Client`` (from ``BIZMSG_TOKEN`` and
``BIZMSG_BASE_URL``) on first use and shares it between its threads.

    python examples/worker.py      # a demo against the embedded sandbox
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import bizmsg

logger = logging.getLogger("worker")

#: The namespace of this application's notification keys (any fixed UUID of your own).
NOTIFICATIONS = uuid.UUID("1b4e28ba-2fa1-11d2-883f-0016d3cca427")

#: What a queue should retry: the outcome is unknown (safe: same key), the service could not be
#: reached or was busy. Anything else (a rejected or invalid message, a bad token) would fail
#: the same way again.
RETRYABLE: tuple[type[BaseException], ...] = (
    bizmsg.SendOutcomeUnknownError,
    bizmsg.TransportError,
    bizmsg.RateLimitError,
    bizmsg.ServerError,
)

_client: bizmsg.Client | None = None
_client_lock = threading.Lock()


def client() -> bizmsg.Client:
    """This process's client, made on first use (after a fork, in the child: bizmsg remakes
    its connection pool there anyway)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = bizmsg.Client()
        return _client


def idempotency_key(job_id: str) -> str:
    """The key of every send of job ``job_id``: a UUIDv5, the same on every run."""
    return str(uuid.uuid5(NOTIFICATIONS, f"notification:{job_id}"))


class ShardIncomplete(Exception):
    """Some messages of a shard are in doubt or could not be sent yet: run the shard again
    (it re-sends with the same keys). ``result`` is the :class:`bizmsg.BulkResult`."""

    def __init__(self, result: bizmsg.BulkResult) -> None:
        super().__init__(f"shard incomplete, run it again: {result!r}")
        self.result = result


def send_notification(job_id: str, to: str, from_: str, template: str,
                      parameters: Sequence[str] | Mapping[str, str] | str, language: str, *,
                      messaging: bizmsg.Client | None = None) -> bizmsg.SendResult:
    """Sends one template for job ``job_id``; safe to run again for the same job.

    Raises :class:`bizmsg.SendOutcomeUnknownError` (and the other :data:`RETRYABLE` errors)
    for the queue to retry, and :class:`bizmsg.SendRejectedError` or
    :class:`bizmsg.ValidationError` for a message that no retry would send.
    """
    key = idempotency_key(job_id)
    try:
        result = (messaging or client()).messages.send_template(
            to=to, from_=from_, name=template, parameters=parameters, language=language,
            idempotency_key=key,
        )
    except bizmsg.SendOutcomeUnknownError:
        logger.warning("job %s: outcome unknown; the retry re-sends with key %s", job_id, key)
        raise
    logger.info("job %s: sent %s", job_id, result.sms_id)
    return result


def send_campaign_shard(campaign_id: str, shard_rows: Sequence[Mapping[str, Any]], *,
                        messaging: bizmsg.Client | None = None) -> bizmsg.BulkResult:
    """Sends one shard of campaign ``campaign_id``: rows with ``to``, ``from``, ``name``,
    ``parameters`` and ``language`` (what a query or a queue payload gives). Give the rows in
    any order: keys follow each row's content, not its position.

    Rejected and invalid rows are outcomes, not errors (they would fail again). While a row is
    ``unknown`` or ``failed`` for want of the service, :class:`ShardIncomplete` is raised for
    the queue to run the shard again; rows already sent are then answered from their keys and
    not sent again.
    """
    result = (messaging or client()).messages.send_many(shard_rows, campaign_id=campaign_id)
    retry_later = 0
    for outcome in result:
        if outcome.status == "unknown" or (outcome.status == "failed"
                                           and isinstance(outcome.error, RETRYABLE)):
            retry_later += 1
        elif outcome.status in ("rejected", "failed"):
            logger.warning("campaign %s, row %d not sent: %s", campaign_id, outcome.index,
                           outcome.error)
    if retry_later:
        raise ShardIncomplete(result)
    return result


def demo() -> None:
    """A queue's retries, simulated against the embedded sandbox."""
    import os

    from bizmsg.testing import Sandbox

    retryable: tuple[type[BaseException], ...] = (*RETRYABLE, ShardIncomplete)

    def run_job(job: Any, *args: Any, attempts: int = 3) -> Any:
        # What the queue does: run the job, retry it on a retryable error.
        for attempt in range(1, attempts + 1):
            try:
                return job(*args)
            except retryable as error:
                print(f"  attempt {attempt}: {type(error).__name__}, retrying")
        raise RuntimeError("gave up")

    def delivered(sandbox: Sandbox) -> int:
        return sum(1 for m in sandbox.sent_messages() if not m["idempotent_replay"]
                   and (m["response_body"] or {}).get("status") == "ACCEPTED")

    with Sandbox() as sandbox:
        os.environ["BIZMSG_TOKEN"] = sandbox.token
        os.environ["BIZMSG_BASE_URL"] = sandbox.base_url
        sender = next(n for n in client().business_phone_numbers.iter()
                      if n.status == "CONNECTED").display_phone_number or ""

        print("job 42, whose first attempt loses the connection after the send:")
        sandbox.inject("send", cut_connection=True)
        result = run_job(send_notification, "42", "8613800138000", sender, "otp", ["482913"],
                         "en")
        print(f"  sent {result.sms_id}; messages delivered: {delivered(sandbox)}")

        rows = [{"to": f"86137{i:08d}", "from": sender, "name": "promo",
                 "parameters": {"code": "SPRING"}, "language": "en"} for i in range(50)]
        before = delivered(sandbox)
        print("campaign spring-sale, shard of 50 rows, one connection lost on the first run:")
        sandbox.inject("send", cut_connection=True)
        shard = run_job(send_campaign_shard, "spring-sale", rows)
        print(f"  {shard!r}; messages delivered: {delivered(sandbox) - before}")
        client().close()


if __name__ == "__main__":
    demo()
