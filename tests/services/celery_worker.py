"""A Celery worker as a real process: ``python -m celery -A APP worker --pool=prefork
--concurrency=4``, its broker (and result backend) a Redis started by the tests.

The broker and backend reach the worker as ``CELERY_BROKER_URL`` and ``CELERY_RESULT_BACKEND``,
which Celery reads before its app's own settings, so the test's app module needs no URL of its
own (the test process sets the same on its side: :meth:`CeleryWorker.app_env`). The worker is
ready when it logs ``<name>@<host> ready.``, which it does once its pool is up and it consumes.
Gossip, mingle and heartbeats are off: one worker needs none, and they slow the start.

:meth:`CeleryWorker.stop` sends SIGTERM (Celery's warm shutdown: running tasks finish), then
SIGKILL after the grace; pool children it left are killed by PID. :meth:`CeleryWorker.pool_pids`
gives the pool's children, for tests that SIGKILL one mid-task.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .processes import ServerProcess, children_of
from .server import Server

TESTS_DIR = str(Path(__file__).resolve().parent.parent)


class CeleryWorker(Server):
    """``app`` is what ``celery -A`` takes (``"my_tasks"`` or ``"pkg.module:app"``), importable
    from ``pythonpath`` (default: the tests folder) or ``cwd``; ``env`` is added to the worker's
    environment. ``name`` is the worker's node name (``bizmsg-<random>@<host>``)."""

    def __init__(
        self,
        app: str,
        *,
        broker_url: str,
        result_backend: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        pythonpath: Sequence[str] = (TESTS_DIR,),
        concurrency: int = 4,
        pool: str = "prefork",
        args: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.broker_url = broker_url
        self.result_backend = result_backend
        self.concurrency = concurrency
        super().__init__("celery", listens=False)
        self.log = self.dir / "worker.log"
        self.name = f"bizmsg-{secrets.token_hex(4)}@%h"
        self.cwd = cwd
        self._env = dict(os.environ)
        self._env.update(self.app_env())
        self._env["PYTHONPATH"] = os.pathsep.join(
            [*pythonpath, *filter(None, [self._env.get("PYTHONPATH")])])
        self._env.update(env or {})
        self._argv = [
            sys.executable, "-m", "celery", "-A", app, "worker", f"--pool={pool}",
            f"--concurrency={concurrency}", "--loglevel=INFO", "-n", self.name,
            "--without-gossip", "--without-mingle", "--without-heartbeat", *args,
        ]
        self._ready_timeout = 60.0

    def app_env(self) -> dict[str, str]:
        """The variables that point a Celery app at this worker's broker and backend."""
        env = {"CELERY_BROKER_URL": self.broker_url}
        if self.result_backend is not None:
            env["CELERY_RESULT_BACKEND"] = self.result_backend
        return env

    #: A worker that did not come up is killed: its pool may be half-started.
    failed_start_signal = signal.SIGKILL
    stop_grace = 15.0

    def start(self, timeout: float = 60.0) -> CeleryWorker:
        self._ready_timeout = timeout
        return super().start()

    def launch(self) -> ServerProcess:
        return ServerProcess("celery worker", self._argv, log=self.log, env=self._env,
                             cwd=self.cwd)

    def wait_ready(self, process: ServerProcess) -> None:
        process.wait_for_line(r"@\S+ ready\.", timeout=self._ready_timeout)

    def pool_pids(self) -> list[int]:
        """The pool's processes now (the worker's children), each recorded for :meth:`stop`."""
        if self.process is None:
            return []
        self.process.descendants()
        return children_of(self.process.pid)

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM: a warm shutdown, the running tasks finished within ``grace`` seconds
        (default 15), then SIGKILL."""
        if self.process is not None:
            self.process.stop(signal.SIGTERM, grace=self.stop_grace if grace is None else grace)
            self.process = None
