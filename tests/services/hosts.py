"""Other hosts on this machine: Linux network namespaces, each joined to this one by a veth pair,
for tests that run a worker "on another machine" (``ip netns exec``). A process in a namespace
has its own network stack, its own loopback and one address (``10.213.N.2``); it reaches this
machine's side of its link (``10.213.N.1``) and nothing else.

The test servers listen on 127.0.0.1 only (the sandbox refuses anything else), which a namespace
cannot reach: :meth:`Hosts.expose` relays a loopback port to the same port on every link's
address here, so a worker on another host connects over its own network stack to
``10.213.N.1:PORT``. Every host resolves the name :data:`SERVICES` to its own link's address
(``/etc/netns/NAME/hosts``, which ``ip netns exec`` mounts over ``/etc/hosts``), so processes on
different hosts use the same URLs, as hosts behind one DNS name do (bizmsg's shared limits are
kept per service URL: two URLs would be two services). The relay is a plain TCP pipe (a thread running an asyncio loop): when a
worker's connection ends (its process killed), the relayed one to the server ends with it, as a
session's liveness needs.

Needs root (network namespaces) and ``ip`` (iproute2, else :class:`ServiceUnavailable`).
Everything made is removed by :meth:`Hosts.close`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType

from .availability import ServiceUnavailable
from .processes import ServiceStartError

_SUBNET = "10.213"
#: The name by which every host reaches this machine's exposed servers.
SERVICES = "bizmsg-services"


def _ip(*args: str, netns: str | None = None) -> None:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise ServiceStartError(f"{' '.join(argv)}: {(done.stdout + done.stderr).strip()}")


class Host:
    """One namespace: ``name`` (its netns), ``address`` (its own), ``gateway`` (this machine's
    side of its link, where exposed ports are relayed)."""

    def __init__(self, name: str, address: str, gateway: str) -> None:
        self.name = name
        self.address = address
        self.gateway = gateway

    def url(self, url: str) -> str:
        """``url`` of a server on this machine's loopback, as written on any host."""
        return url.replace("127.0.0.1", SERVICES)

    def prefix(self) -> list[str]:
        """What to put before a command to run it on this host."""
        return ["ip", "netns", "exec", self.name]

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.address})"


class Hosts:
    """``count`` hosts (network namespaces) and the relays to this machine's loopback."""

    def __init__(self, count: int = 2) -> None:
        if shutil.which("ip") is None:
            raise ServiceUnavailable("ip (iproute2) is not installed: apt-get install iproute2")
        tag = f"{os.getpid() % 100000}"
        self.hosts: list[Host] = []
        self._links: list[str] = []
        self._etc: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="bizmsg-relay",
                                        daemon=True)
        self._thread.start()
        try:
            for n in range(1, count + 1):
                name, outside, inside = f"bizmsg-{tag}-{n}", f"bz{tag}h{n}a", f"bz{tag}h{n}b"
                _ip("netns", "add", name)
                host = Host(name, f"{_SUBNET}.{n}.2", f"{_SUBNET}.{n}.1")
                self.hosts.append(host)
                etc = f"/etc/netns/{name}"
                os.makedirs(etc, exist_ok=True)
                self._etc.append(etc)
                with open(f"{etc}/hosts", "w", encoding="ascii") as f:
                    f.write(f"127.0.0.1 localhost\n{host.gateway} {SERVICES}\n")
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                self._links.append(outside)
                _ip("link", "set", inside, "netns", name)
                _ip("addr", "add", f"{host.gateway}/30", "dev", outside)
                _ip("link", "set", outside, "up")
                _ip("addr", "add", f"{host.address}/30", "dev", inside, netns=name)
                _ip("link", "set", inside, "up", netns=name)
                _ip("link", "set", "lo", "up", netns=name)
        except BaseException:
            self.close()
            raise

    def expose(self, port: int) -> None:
        """Relays 127.0.0.1:``port`` to ``port`` on every host's gateway address."""
        for host in self.hosts:
            future = asyncio.run_coroutine_threadsafe(
                asyncio.start_server(self._relay(port), host.gateway, port), self._loop)
            self._servers.append(future.result(timeout=10))

    def _relay(self, port: int
               ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def accepted(client_reader: asyncio.StreamReader,
                           client_writer: asyncio.StreamWriter) -> None:
            try:
                server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                client_writer.close()
                return
            await asyncio.gather(pipe(client_reader, server_writer),
                                 pipe(server_reader, client_writer))

        return accepted

    async def _shut(self) -> None:
        for server in self._servers:
            server.close()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        if self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._shut(), self._loop).result(timeout=10)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()
        self._servers.clear()
        for host in self.hosts:
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=30)
        for link in self._links:
            # Gone with its peer's namespace already, as a rule.
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30)
        for etc in self._etc:
            shutil.rmtree(etc, ignore_errors=True)
        try:
            os.rmdir("/etc/netns")  # only if no one else keeps anything there
        except OSError:
            pass
        self.hosts.clear()
        self._links.clear()
        self._etc.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def run_on(host: Host, argv: Sequence[str]) -> list[str]:
    """``argv`` as run on ``host``."""
    return [*host.prefix(), *argv]
