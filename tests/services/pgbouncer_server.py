"""PgBouncer (Debian's ``pgbouncer``) on a free loopback port, in front of a
:class:`PostgresServer`, in transaction mode: each transaction goes to any of the pool's server
sessions. What the journal must refuse: a run is one PostgreSQL session (its lock is its
liveness). Two server sessions are opened at once and handed out in turn
(``server_round_robin``), so that two statements in a row reach two sessions, as they do on a
busy production pool.

PgBouncer refuses to run as root: as for PostgreSQL, it runs as ``postgres`` then. Clients are
trusted (loopback only); PgBouncer logs in to PostgreSQL with the server's password, which is in
the config file (mode 0600, owned by the user it runs as), never on the command line.
"""

from __future__ import annotations

import os
import signal

from .postgres_server import PostgresServer
from .processes import ServerProcess, ServiceStartError, chown_to, find_program, running_as_root
from .server import Server


class PgBouncerServer(Server):
    """``url`` (``postgresql://bizmsg@127.0.0.1:PORT/bizmsg``: the database through the pool)."""

    def __init__(self, postgres: PostgresServer, *, pool_mode: str = "transaction") -> None:
        self.program = find_program("pgbouncer", package="pgbouncer")
        self.postgres = postgres
        super().__init__("pgbouncer")
        self.os_user = "postgres" if running_as_root() else None
        self.url = f"postgresql://{postgres.user}@127.0.0.1:{self.port}/{postgres.database}"
        users = self.dir / "users.txt"
        users.write_text(f'"{postgres.user}" ""\n')
        config = self.dir / "pgbouncer.ini"
        config.write_text("\n".join([
            "[databases]",
            f"{postgres.database} = host=127.0.0.1 port={postgres.port} "
            f"dbname={postgres.database} user={postgres.user} password={postgres.password}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {users}",
            f"pool_mode = {pool_mode}",
            "default_pool_size = 2",
            "min_pool_size = 2",
            "server_round_robin = 1",
            "ignore_startup_parameters = extra_float_digits,application_name",
            "",
        ]))
        config.chmod(0o600)
        users.chmod(0o600)
        if self.os_user is not None:
            chown_to(self.dir, self.os_user)
        self.config = config

    #: SIGINT: PgBouncer's safe shutdown.
    stop_signal = signal.SIGINT

    def launch(self) -> ServerProcess:
        return ServerProcess("pgbouncer", [self.program, str(self.config)],
                             log=self.dir / "pgbouncer.log", user=self.os_user)

    def wait_ready(self, process: ServerProcess) -> None:
        process.wait_listening(self.port, timeout=30)
        self._open_both_server_sessions()

    def _open_both_server_sessions(self) -> None:
        """Two transactions at once, so that the pool holds two server sessions from now on,
        handed out in turn (PgBouncer opens its ``min_pool_size`` only over time)."""
        import psycopg

        first = psycopg.connect(self.url, autocommit=False)
        second = psycopg.connect(self.url, autocommit=False)
        try:
            pids = {connection.execute("SELECT pg_backend_pid()").fetchone()
                    for connection in (first, second)}
            if len(pids) != 2:
                raise ServiceStartError(f"PgBouncer gave two transactions one session: {pids}")
            # Ended, not dropped: a session left in a transaction is closed by PgBouncer.
            first.commit()
            second.commit()
        finally:
            first.close()
            second.close()

    def __repr__(self) -> str:
        return f"PgBouncerServer({self.url}, {os.fspath(self.config)})"
