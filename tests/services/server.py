"""What every server the tests start has in common, its lifecycle: a temporary folder of its
own, a free loopback port, one process started in the foreground and waited for until it is
ready, stopped by its PID (:class:`~.processes.ServerProcess`), and its folder removed at the
end. Each server says only how it is launched (:meth:`Server.launch`) and when it is ready
(:meth:`Server.wait_ready`), and how it stops if not by SIGTERM.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
from pathlib import Path
from types import TracebackType
from typing import ClassVar, TypeVar

from .processes import ServerProcess, free_port

S = TypeVar("S", bound="Server")


class Server:
    """``dir`` (its temporary folder), ``port`` (a free loopback port, for a server that
    listens), ``process`` (while it runs). A context manager: started on entry (a start that
    fails leaves nothing behind), closed on exit."""

    #: How :meth:`stop` ends the process (the server's own fast shutdown), and how long it waits
    #: before SIGKILL.
    stop_signal: ClassVar[int] = signal.SIGTERM
    stop_grace: ClassVar[float] = 10.0
    #: How a start that failed ends what it started (a half-started server may not heed
    #: ``stop_signal``).
    failed_start_signal: ClassVar[int | None] = None

    def __init__(self, name: str, *, listens: bool = True, port: int | None = None) -> None:
        self.port = port or (free_port() if listens else 0)
        self.dir = Path(tempfile.mkdtemp(prefix=f"bizmsg-{name}-"))
        self.process: ServerProcess | None = None

    def launch(self) -> ServerProcess:
        """Starts the server's process (prepared in :attr:`dir` as it needs)."""
        raise NotImplementedError

    def wait_ready(self, process: ServerProcess) -> None:
        """Returns once ``process`` serves; raises if it does not in time or dies."""
        raise NotImplementedError

    def start(self: S) -> S:
        """Starts it and waits until it is ready; again after :meth:`kill` or :meth:`stop`, on
        the same port with the same folder. A start that fails stops what it started."""
        if self.process is not None and self.process.alive():
            return self
        process = self.process = self.launch()
        try:
            self.wait_ready(process)
        except BaseException:
            process.stop(self.failed_start_signal or self.stop_signal)
            self.process = None
            raise
        return self

    def stop(self) -> None:
        """Stops the process by its PID (``stop_signal``, then SIGKILL after ``stop_grace``),
        and what it forked; the folder stays, for :meth:`start` again."""
        if self.process is not None:
            self.process.stop(self.stop_signal, grace=self.stop_grace)
            self.process = None

    def kill(self) -> None:
        """SIGKILL, as a crash; returns once the process and what it forked are gone."""
        if self.process is not None:
            self.process.kill()

    def restart(self) -> None:
        """kill -9, then start again on the same port with the same folder."""
        self.kill()
        self.process = None
        self.start()

    def close(self) -> None:
        """Stops it and removes its folder."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self: S) -> S:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
