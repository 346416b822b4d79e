"""The lifetime of every server process the tests start: each by its PID, never by name.

Another redis-server or nginx may well run on the machine (the benchmarks start nginx, a
developer may run Redis); a test ends only the processes it started. A server is started in a
session of its own, so a Ctrl-C at the terminal reaches pytest only, which then stops the servers
in order through the fixtures' teardown. Behind that, three nets:

- every process still running when Python exits is stopped by :func:`stop_all` (``atexit``);
- ``setpriv --pdeathsig KILL`` in front of the command: if pytest itself is killed (SIGKILL,
  an OOM kill), the kernel kills its direct children too. (The kernel ties this to the *thread*
  that started the server: start servers from the main thread, as fixtures are, not from a
  thread that ends before the server should.)
- the processes a server forks (nginx's workers, PostgreSQL's backends, Celery's pool) are
  recorded with their start time, and any left when the server stops is killed, once it is
  certain the PID was not reused.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .availability import ServiceUnavailable


class ServiceStartError(RuntimeError):
    """A server is installed but did not start (or stopped answering): a real failure."""


def free_port() -> int:
    """A loopback port nobody listens on (bound and released at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_program(name: str, *, package: str, dirs: Sequence[str] = ("/usr/sbin", "/usr/bin")) -> str:
    """The path of ``name``, or :class:`ServiceUnavailable` saying how to install it."""
    # /usr/sbin is not on every user's PATH (nginx, haproxy and squid live there).
    found = shutil.which(name)
    for folder in dirs:
        if found is not None:
            break
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            found = candidate
    if found is None:
        raise ServiceUnavailable(f"{name} is not installed: apt-get install {package}, or run .ci/run")
    return found


def running_as_root() -> bool:
    return os.geteuid() == 0


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), which
    tells a process from a later one that got the same PID."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[19])


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return found


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] in (b"Z", b"X")


_running: dict[int, ServerProcess] = {}


class ServerProcess:
    """One program started by a test: its PID, its log, and how to stop it.

    ``user``: run it as this user when the tests run as root (PostgreSQL refuses root); ignored
    otherwise. Output (stdout and stderr) goes to ``log``.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        user: str | None = None,
    ) -> None:
        self.name = name
        self.log = log
        prefix: list[str] = []
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            prefix = [setpriv, "--pdeathsig", "KILL"]
        if user is not None and running_as_root():
            if setpriv is None:
                raise ServiceUnavailable(f"setpriv is needed to run {name} as {user}: "
                                         "apt-get install util-linux")
            prefix += ["--reuid", user, "--regid", user, "--init-groups"]
        if prefix:
            prefix.append("--")
        # A restarted server appends to the same log: readiness is read from here on.
        self.log_offset = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [*prefix, *argv], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=None if env is None else dict(env), cwd=cwd, start_new_session=True)
        self.pid = self.process.pid
        # (pid, start time) of every process seen under this one, killed if left at the end.
        self._descendants: dict[int, int] = {}
        _running[self.pid] = self

    # -- state --------------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.process.poll() is None

    def descendants(self) -> list[int]:
        """PIDs running under this process now (recorded, so that :meth:`stop` finds them)."""
        found: list[int] = []
        queue = [self.pid]
        while queue:
            for child in children_of(queue.pop()):
                started = _start_time(child)
                if started is not None:
                    self._descendants[child] = started
                    found.append(child)
                    queue.append(child)
        return found

    def tail(self, chars: int = 3000, *extra: Path) -> str:
        text = ""
        for path in (self.log, *extra):
            try:
                text += path.read_text(errors="replace")[-chars:]
            except OSError:
                pass
        return text.strip() or "(no output)"

    # -- readiness ----------------------------------------------------------------------------

    def wait_listening(self, port: int, *, timeout: float = 30.0, extra_logs: Sequence[Path] = ()) -> None:
        """Returns once something accepts TCP connections on 127.0.0.1:``port``."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(extra_logs)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise ServiceStartError(
                        f"{self.name} (pid {self.pid}) did not listen on port {port} within "
                        f"{timeout:.0f} s:\n{self.tail(3000, *extra_logs)}") from None
                time.sleep(0.05)
        self.descendants()

    def wait_for_line(self, pattern: str, *, path: Path | None = None, timeout: float = 30.0) -> str:
        """Returns the first line of the log (or of ``path``) matching the regex ``pattern``."""
        regex = re.compile(pattern)
        path = path or self.log
        offset = self.log_offset if path == self.log else 0
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    text = f.read().decode(errors="replace")
                for line in text.splitlines():
                    if regex.search(line):
                        self.descendants()
                        return line
            except OSError:
                pass
            self._check_alive([path])
            if time.monotonic() > deadline:
                raise ServiceStartError(f"{self.name} (pid {self.pid}) wrote no line matching "
                                        f"{pattern!r} within {timeout:.0f} s:\n{self.tail(3000, path)}")
            time.sleep(0.05)

    def _check_alive(self, extra_logs: Sequence[Path] = ()) -> None:
        if not self.alive():
            raise ServiceStartError(f"{self.name} exited with status {self.process.returncode}:\n"
                                    f"{self.tail(3000, *extra_logs)}")

    # -- stopping -----------------------------------------------------------------------------

    def send_signal(self, sig: int) -> None:
        if self.alive():
            try:
                self.process.send_signal(sig)
            except ProcessLookupError:
                pass

    def stop(self, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
        """Ends it by its PID: ``sig``, then SIGKILL after ``grace`` seconds; then whatever it
        had started and left behind. Idempotent."""
        self.descendants()
        if self.alive():
            self.send_signal(sig)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._end_descendants(grace=3.0)
        _running.pop(self.pid, None)

    def kill(self) -> None:
        """SIGKILL at once, as a crash; waits until it and what it had started are gone (a
        PostgreSQL restart needs its old backends out of the shared memory)."""
        self.stop(signal.SIGKILL)

    def _end_descendants(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        for pid, started in list(self._descendants.items()):
            while self._same(pid, started) and time.monotonic() < deadline:
                time.sleep(0.02)
            if self._same(pid, started):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid, started in list(self._descendants.items()):
            # Reaped by init, which may take a moment after SIGKILL.
            limit = time.monotonic() + 5
            while self._same(pid, started) and time.monotonic() < limit:
                time.sleep(0.02)
            self._descendants.pop(pid, None)

    @staticmethod
    def _same(pid: int, started: int) -> bool:
        return _start_time(pid) == started and not _is_zombie(pid)


def still_running() -> list[str]:
    """``name (pid N)`` of every process started here and not stopped since."""
    return [f"{p.name} (pid {p.pid})" for p in _running.values()]


def stop_all() -> None:
    """Stops every process started here and not stopped yet (at exit: the last net)."""
    for process in list(_running.values()):
        try:
            process.stop(grace=3.0)
        except Exception:  # noqa: BLE001 - at exit, stop the others whatever one did
            pass


atexit.register(stop_all)


def run(argv: Sequence[str], *, user: str | None = None, timeout: float = 60.0,
        env: Mapping[str, str] | None = None, what: str | None = None) -> str:
    """Runs a short command to its end (initdb, createdb), as ``user`` when root; its output,
    or :class:`ServiceStartError` with it."""
    prefix: list[str] = []
    if user is not None and running_as_root():
        prefix = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "--"]
    try:
        done = subprocess.run([*prefix, *argv], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, env=None if env is None else dict(env))
    except subprocess.TimeoutExpired as error:
        raise ServiceStartError(f"{what or argv[0]} did not finish within {timeout:.0f} s") from error
    if done.returncode != 0:
        raise ServiceStartError(f"{what or argv[0]} failed with status {done.returncode}:\n"
                                f"{(done.stdout + done.stderr).strip()[-3000:]}")
    return done.stdout + done.stderr


def chown_to(path: Path, user: str) -> None:
    """Gives ``path`` (recursively) to ``user`` when running as root: the servers that drop
    privileges (PostgreSQL, Squid, nginx's workers) must write their own files."""
    if not running_as_root():
        return
    import pwd

    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
