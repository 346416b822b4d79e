"""PostgreSQL 15 on a free loopback port, in a temporary folder, with a password user and a
database.

The machine's binaries (``/usr/lib/postgresql/15/bin``, Debian's ``postgresql-15``) are run
directly, not through ``pg_ctl`` or a service: ``postgres`` itself is the process started, so its
PID is the one that :meth:`PostgresServer.kill` kills. PostgreSQL refuses to run as root: when the
tests run as root the folder is given to the ``postgres`` user and the binaries run as that user
(``setpriv``); otherwise they run as the current user.

``fsync=off`` (and ``full_page_writes=off``) costs nothing in truth here: a commit is still
written to the WAL before it is answered, so a kill -9 of the server loses nothing committed (the
kernel holds it); only a machine crash would. ``synchronous_commit`` stays on: off, a commit is
answered before its WAL is written, and a kill -9 within the next 200 ms loses it, which would
make the fault tests see a journal lose rows that PostgreSQL had acknowledged.

Local (unix-socket) connections are trusted and the socket's folder is private to the server's
user; TCP connections need the password (SCRAM).
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import signal

from .availability import ServiceUnavailable
from .processes import ServerProcess, ServiceStartError, chown_to, run, running_as_root
from .server import Server

USER = "bizmsg"
DATABASE = "bizmsg"
_READY = r"database system is ready to accept connections"


def find_postgres_bin() -> str:
    """``$BIZMSG_POSTGRES_BIN``, else PostgreSQL 15's, else the newest installed from 15 on."""
    given = os.environ.get("BIZMSG_POSTGRES_BIN")
    candidates = [given] if given else []
    candidates.append("/usr/lib/postgresql/15/bin")
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                   key=lambda p: int(re.sub(r"\D", "", p.split("/")[-2]) or 0), reverse=True)
    candidates += [p for p in found if int(re.sub(r"\D", "", p.split("/")[-2]) or 0) >= 15]
    for folder in candidates:
        if all(os.access(os.path.join(folder, name), os.X_OK)
               for name in ("initdb", "postgres", "createdb")):
            return folder
    raise ServiceUnavailable("PostgreSQL 15 is not installed (no /usr/lib/postgresql/15/bin): "
                             "apt-get install postgresql-15, or run .ci/run")


class PostgresServer(Server):
    """``url`` (``postgresql://bizmsg:PASSWORD@127.0.0.1:PORT/bizmsg``), ``url_without_password``,
    ``password``, ``port``, ``user``, ``database``, ``socket_dir``, ``dir``."""

    def __init__(self) -> None:
        self.bin = find_postgres_bin()
        self.os_user = "postgres" if running_as_root() else None
        if self.os_user is not None:
            import pwd

            try:
                pwd.getpwnam(self.os_user)
            except KeyError:
                raise ServiceUnavailable("the tests run as root and there is no 'postgres' user "
                                         "to run PostgreSQL as: apt-get install postgresql-15, "
                                         "or run .ci/run") from None
        super().__init__("postgres")
        self.user = USER
        self.database = DATABASE
        self.password = f"pw-{secrets.token_hex(12)}"
        self.data_dir = self.dir / "data"
        self.socket_dir = self.dir / "sock"
        self.url_without_password = f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"
        self.url = f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"
        self._initialized = False
        self._first_start = False

    def _initdb(self) -> None:
        self.socket_dir.mkdir()
        pwfile = self.dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if self.os_user is not None:
            chown_to(self.dir, self.os_user)
        run([os.path.join(self.bin, "initdb"), "-D", str(self.data_dir), "-U", USER,
             f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            user=self.os_user, what="initdb", timeout=120)
        pwfile.unlink()
        self._initialized = True

    #: SIGINT: PostgreSQL's fast shutdown (SIGTERM would wait for every client to leave).
    stop_signal = signal.SIGINT
    stop_grace = 20.0

    def launch(self) -> ServerProcess:
        self._first_start = not self._initialized
        if self._first_start:
            self._initdb()
        return ServerProcess(
            "postgres",
            [os.path.join(self.bin, "postgres"), "-D", str(self.data_dir),
             "-p", str(self.port), "-k", str(self.socket_dir),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "full_page_writes=off",
             "-c", "max_connections=100", "-c", "shared_buffers=32MB",
             "-c", "logging_collector=off", "-c", "log_destination=stderr"],
            log=self.dir / "postgres.log", user=self.os_user)

    def wait_ready(self, process: ServerProcess) -> None:
        # After a kill -9 this line comes once crash recovery is done (:meth:`kill` returns
        # once the backends are gone too: they notice the postmaster's death by themselves).
        process.wait_for_line(_READY, timeout=60)
        if self._first_start:
            run([os.path.join(self.bin, "createdb"), "-h", str(self.socket_dir),
                 "-p", str(self.port), "-U", USER, DATABASE],
                user=self.os_user, what="createdb")

    def psql(self, sql: str) -> str:
        """Runs ``sql`` with psql over the unix socket (no password needed); its output
        (unaligned, tuples only)."""
        psql = os.path.join(self.bin, "psql")
        if not os.access(psql, os.X_OK):
            raise ServiceStartError(f"{psql} is missing: apt-get install postgresql-client-15")
        return run([psql, "-h", str(self.socket_dir), "-p", str(self.port), "-U", USER,
                    "-d", DATABASE, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                   user=self.os_user, what="psql").strip()

    def __repr__(self) -> str:
        return f"PostgresServer({self.url_without_password})"
