"""A trivial Celery app for checking the worker fixture (``test_services.py``). Its broker and
result backend come from ``CELERY_BROKER_URL`` / ``CELERY_RESULT_BACKEND``, set by the fixture."""

from __future__ import annotations

import os

from celery import Celery

app = Celery("bizmsg_celery_check")
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1, broker_connection_retry_on_startup=True)


@app.task(name="bizmsg_check.add")  # type: ignore[untyped-decorator]
def add(x: int, y: int) -> dict[str, int]:
    """The sum, and which pool process computed it."""
    return {"sum": x + y, "pid": os.getpid()}
