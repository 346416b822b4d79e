"""The Celery app of ``test_celery.py``'s worker: bizmsg's shard task, registered as a user
would (``bizmsg.celery.register(app)``), with its client and journal from the worker's
environment (``BIZMSG_TOKEN``, ``BIZMSG_BASE_URL``, ``BIZMSG_SHARED_LIMITS``,
``BIZMSG_JOURNAL``), and its broker and result backend from ``CELERY_BROKER_URL`` /
``CELERY_RESULT_BACKEND`` (set by the worker fixture).

For the test only: each pool process marks the shard it is running with a file
``<BIZMSG_TEST_RUNNING>/<shard>.<pid>`` while it runs it, so the test can SIGKILL a child that
is mid-task.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery  # type: ignore[import-untyped]
from celery.signals import task_postrun, task_prerun  # type: ignore[import-untyped]

import bizmsg.celery

app = Celery("bizmsg_campaigns")
app.conf.update(broker_connection_retry_on_startup=True, result_expires=600)
send_shard = bizmsg.celery.register(app)


def _mark(kwargs: Any) -> Path | None:
    folder = os.environ.get("BIZMSG_TEST_RUNNING")
    if not folder or not isinstance(kwargs, dict) or "shard" not in kwargs:
        return None
    return Path(folder) / f"{kwargs['shard']}.{os.getpid()}"


@task_prerun.connect  # type: ignore[untyped-decorator]
def _started(task: Any = None, kwargs: Any = None, **_: Any) -> None:
    mark = _mark(kwargs)
    if mark is not None and task is not None and task.name == bizmsg.celery.TASK_NAME:
        mark.touch()


@task_postrun.connect  # type: ignore[untyped-decorator]
def _finished(task: Any = None, kwargs: Any = None, **_: Any) -> None:
    mark = _mark(kwargs)
    if mark is not None:
        mark.unlink(missing_ok=True)
