"""A raw-socket HTTP/1.1 server of the test suite's own, answering exactly the bytes a test
scripts: the hostile server of ``test_hostile_server.py``.

It reads each request properly (its head, then a ``Content-Length`` body), records it (method,
path, query, headers with the ``Idempotency-Key``, body, the connection it came on), and answers
with the next :class:`Script` (after the scripted ones, ``default``: an answer of the request's
own). A script is a list of actions run in order: send bytes, drip them a few at a time, sleep,
close, half-close, hold the connection open, flood it until the client hangs up, or wait
until the test's call has returned. An unsolicited extra answer N ms after the first is
``[Send(own), Sleep(N / 1000), Send(extra)]``; one that arrives between two calls, whatever the
timing, ``[Send(own), AfterTheCall(), Send(extra)]``.

Answers are told apart: the default answer to a send carries the request's idempotency key
(``smsId = "ok-<key>"``), the default page its page number and the request's sequence number
(``phoneNumberId = "page-<pageNo>-req-<seq>"``), so a test always knows whose answer it got.

What a test reads afterwards: ``requests`` (in arrival order, each with its ``connection``
number and the bytes written for it), ``connections`` (accepted, each with its request numbers
and who closed it). A connection was reused when two requests share its number.

Used as a context manager: ``close()`` (on exit) stops accepting, shuts every connection down,
joins every thread and checks none is left, so nothing leaks from one test into the next.
"""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from typing_extensions import Self

#: The largest request head read; a client never sends more (a longer one ends the connection).
MAX_REQUEST_HEAD = 64 * 1024
#: How long ``close()`` waits for the server's threads (they end within milliseconds).
JOIN_TIMEOUT = 5.0


@dataclass
class Request:
    """One request as the server read it, and what the server did about it."""

    seq: int
    """1 for the first request the server received, then 2, ... (across connections)."""
    connection: int
    """The number of the connection it came on (1 for the first accepted)."""
    method: str
    target: str
    headers: dict[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes
    written: int = 0
    """Bytes the server wrote for it (its answer, and anything the script sent after it)."""
    hung_up: bool = False
    """The client closed the connection while the server was still writing for this request."""
    done: threading.Event = field(default_factory=threading.Event)
    """Set once the script of this request has sent all it will send (a held connection: when
    the hold starts; a flood: when the client hung up, or the server stopped)."""
    proceed: threading.Event = field(default_factory=threading.Event)
    """Set by the test (:meth:`HostileServer.proceed`) once its call has returned."""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query))

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get("idempotency-key")


@dataclass
class Connection:
    number: int
    requests: list[int] = field(default_factory=list)
    """The sequence numbers of the requests that came on it."""
    closed_by: str | None = None
    """``"client"`` (the server read the end of it), ``"server"`` (a script closed it), or
    ``"stop"`` (the server was stopped with it open); ``None`` while open."""


#: What to send: bytes, or a function of the request that makes them (an answer of its own).
Data = bytes | Callable[[Request], bytes]


@dataclass(frozen=True)
class Send:
    """Writes ``data`` at once."""

    data: Data


@dataclass(frozen=True)
class Drip:
    """Writes ``data`` in pieces of ``piece`` bytes, one write each, ``gap`` seconds apart."""

    data: Data
    piece: int = 1
    gap: float = 0.0


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class AfterTheCall:
    """Waits until the test says its call has returned (:meth:`HostileServer.proceed`): what
    follows (an extra answer, a close) reaches the client between two of its calls, never while
    it is still reading the answer, however loaded the machine."""


@dataclass(frozen=True)
class Close:
    """Closes the connection (both directions); the script ends."""


@dataclass(frozen=True)
class HalfClose:
    """Shuts the server's sending side (the client reads the end of the stream); the server
    goes on reading requests on it, but can answer none."""


@dataclass(frozen=True)
class Hold:
    """Keeps the connection open without sending anything, until the client closes it (or the
    server stops); the script ends with the connection."""


@dataclass(frozen=True)
class Flood:
    """Writes ``head``, then ``unit`` again and again until the client hangs up (or the server
    stops); ``Request.written`` counts how far it got. The connection's send buffer is made
    small first, so that the count is close to what the client really read."""

    head: Data
    unit: bytes


Action = Send | Drip | Sleep | AfterTheCall | Close | HalfClose | Hold | Flood


@dataclass(frozen=True)
class Script:
    """What the server does for one request. ``early``: run the actions as soon as the head is
    read, before the body (an answer that arrives before the server took the request body)."""

    actions: Sequence[Action]
    early: bool = False


# -- Answers -------------------------------------------------------------------------------------


def http(status: str, body: bytes = b"", *, headers: Sequence[str] = (),
         version: str = "HTTP/1.1", length: bool = True) -> bytes:
    """An answer: ``version status``, ``headers`` (``"Name: value"``), a ``Content-Length``
    unless ``length=False``, and ``body``."""
    lines = [f"{version} {status}", "Content-Type: application/json", *headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(body: bytes, *, piece: int = 16, extension: bytes = b"",
            trailers: bytes = b"") -> bytes:
    """``body`` in the chunked coding: chunks of ``piece`` bytes, each size line followed by
    ``extension`` (e.g. ``b";a=1"``), then ``trailers`` (CRLF-ended field lines)."""
    out = bytearray()
    for start in range(0, len(body), piece):
        part = body[start:start + piece]
        out += f"{len(part):x}".encode() + extension + b"\r\n" + part + b"\r\n"
    return bytes(out + b"0\r\n" + trailers + b"\r\n")


def send_result(sms_id: str) -> bytes:
    return json.dumps({"smsId": sms_id, "status": "ACCEPTED", "code": "0",
                       "msg": "success"}).encode()


def page(item_id: str, current: int = 1, size: int = 20) -> bytes:
    item = {"phoneNumberId": item_id, "bizAccountId": "100000000000001",
            "displayPhoneNumber": "+1 555 0100", "status": "CONNECTED"}
    return json.dumps({"data": [item], "total": 1, "size": size, "current": current,
                       "pages": 1}).encode()


def own_id(request: Request) -> str:
    """The id in the request's own answer: ``ok-<Idempotency-Key>`` for a send,
    ``page-<pageNo>-req-<seq>`` for a listing (a test gives each listing call its own page
    number)."""
    if request.method == "POST":
        return f"ok-{request.idempotency_key}"
    return f"page-{request.query.get('pageNo', '1')}-req-{request.seq}"


def own_body(request: Request) -> bytes:
    """The body of the request's own answer: a send result, or a page of one item, named by
    :func:`own_id`."""
    if request.method == "POST":
        return send_result(own_id(request))
    query = request.query
    return page(own_id(request), int(query.get("pageNo", 1)), int(query.get("pageSize", 20)))


def own(request: Request) -> bytes:
    """The request's own answer, ``200`` with a ``Content-Length``."""
    return http("200 OK", own_body(request))


def stray(request: Request) -> bytes:
    """An answer of nobody's: like ``own`` in shape, with ``STRAY`` as its id."""
    body = send_result("STRAY") if request.method == "POST" else page("STRAY")
    return http("200 OK", body)


DEFAULT = Script([Send(own)])


# -- The server ----------------------------------------------------------------------------------


class _Stopped(Exception):
    """The server is stopping: the connection's thread ends."""


class _Ended(Exception):
    """The connection is over (closed by either side, or held to its end)."""


class HostileServer:
    """Binds 127.0.0.1 on a free port; ``scripts[i]`` answers the server's ``i+1``-th request,
    ``default`` every request after them."""

    def __init__(self, scripts: Sequence[Script] = (), default: Script = DEFAULT) -> None:
        self.scripts = list(scripts)
        self.default = default
        self.requests: list[Request] = []
        self.connections: list[Connection] = []
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._sockets: dict[int, socket.socket] = {}
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = int(self._listener.getsockname()[1])
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept, name="hostile-accept",
                                          daemon=True)
        self._acceptor.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # What a test asks.

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[Request]:
        """The first ``count`` requests, once received (``AssertionError`` after ``timeout``)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"the server received {len(self.requests)} requests, "
                                     f"not {count}, within {timeout}s")
            return self.requests[:count]

    def settle(self, timeout: float = 5.0) -> None:
        """Waits until the script of every request received so far has sent all it will."""
        with self._lock:
            pending = list(self.requests)
        for request in pending:
            if not request.done.wait(timeout):
                raise AssertionError(f"the script of request {request.seq} did not finish "
                                     f"within {timeout}s")

    def proceed(self) -> None:
        """Tells every script waiting in :class:`AfterTheCall` that the test's call returned."""
        with self._lock:
            pending = list(self.requests)
        for request in pending:
            request.proceed.set()

    def requests_on(self, connection: int) -> list[Request]:
        return [r for r in self.requests if r.connection == connection]

    # Running.

    def _accept(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(timeout=0.02):
                    continue
                try:
                    sock, _ = self._listener.accept()
                except OSError:
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with self._lock:
                    if self._stop.is_set():
                        sock.close()
                        return
                    number = len(self.connections) + 1
                    self.connections.append(Connection(number))
                    self._sockets[number] = sock
                    thread = threading.Thread(target=self._serve, args=(sock, number),
                                              name=f"hostile-conn-{number}", daemon=True)
                    self._threads.append(thread)
                thread.start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        connection = self.connections[number - 1]
        buffered = bytearray()
        request: Request | None = None
        try:
            while True:
                request, rest = self._read_head(sock, number, buffered)
                buffered = rest
                with self._lock:
                    index = request.seq - 1
                    script = self.scripts[index] if index < len(self.scripts) else self.default
                if script.early:
                    self._run(sock, request, script)
                buffered = self._read_body(sock, request, buffered)
                if not script.early:
                    self._run(sock, request, script)
                request.done.set()
        except _Ended:
            pass
        except _Stopped:
            with self._lock:
                connection.closed_by = connection.closed_by or "stop"
        finally:
            if request is not None:
                request.done.set()
            with self._lock:
                self._sockets.pop(number, None)
            sock.close()

    def _recv(self, sock: socket.socket, number: int) -> bytes:
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if self._stop.is_set():
            raise _Stopped
        if not data:
            with self._lock:
                connection = self.connections[number - 1]
                connection.closed_by = connection.closed_by or "client"
            raise _Ended
        return data

    def _read_head(self, sock: socket.socket, number: int,
                   buffered: bytearray) -> tuple[Request, bytearray]:
        while (end := buffered.find(b"\r\n\r\n")) < 0:
            if len(buffered) > MAX_REQUEST_HEAD:
                raise _Ended
            buffered += self._recv(sock, number)
        head = bytes(buffered[:end]).decode("latin-1")
        rest = buffered[end + 4:]
        request_line, *lines = head.split("\r\n")
        try:
            method, target, _ = request_line.split(" ", 2)
        except ValueError:
            # Not HTTP/1.1 (the rest of an HTTP/2 preface, say): the connection ends.
            raise _Ended from None
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        with self._lock:
            request = Request(seq=len(self.requests) + 1, connection=number, method=method,
                              target=target, headers=headers, body=b"")
            self.requests.append(request)
            self.connections[number - 1].requests.append(request.seq)
            self._lock.notify_all()
        return request, rest

    def _read_body(self, sock: socket.socket, request: Request,
                   buffered: bytearray) -> bytearray:
        length = int(request.headers.get("content-length", "0"))
        while len(buffered) < length:
            buffered += self._recv(sock, request.connection)
        request.body = bytes(buffered[:length])
        return buffered[length:]

    def _write(self, sock: socket.socket, request: Request, data: bytes) -> None:
        if self._stop.is_set():
            raise _Stopped
        try:
            sock.sendall(data)
        except OSError:
            if self._stop.is_set():
                raise _Stopped from None
            request.hung_up = True
            with self._lock:
                connection = self.connections[request.connection - 1]
                connection.closed_by = connection.closed_by or "client"
            raise _Ended from None
        request.written += len(data)

    def _run(self, sock: socket.socket, request: Request, script: Script) -> None:
        connection = self.connections[request.connection - 1]
        for action in script.actions:
            if isinstance(action, Send):
                self._write(sock, request, _bytes(action.data, request))
            elif isinstance(action, Drip):
                data = _bytes(action.data, request)
                for start in range(0, len(data), action.piece):
                    self._write(sock, request, data[start:start + action.piece])
                    if action.gap and self._stop.wait(action.gap):
                        raise _Stopped
            elif isinstance(action, Sleep):
                if self._stop.wait(action.seconds):
                    raise _Stopped
            elif isinstance(action, AfterTheCall):
                while not request.proceed.wait(0.02):
                    if self._stop.is_set():
                        raise _Stopped
            elif isinstance(action, Close):
                with self._lock:
                    connection.closed_by = connection.closed_by or "server"
                _shutdown(sock, socket.SHUT_RDWR)
                raise _Ended
            elif isinstance(action, HalfClose):
                _shutdown(sock, socket.SHUT_WR)
            elif isinstance(action, Hold):
                request.done.set()
                self._hold(sock, request.connection)
            elif isinstance(action, Flood):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
                self._write(sock, request, _bytes(action.head, request))
                while True:
                    self._write(sock, request, action.unit)
            else:  # pragma: no cover - a test's mistake
                raise TypeError(f"not an action: {action!r}")

    def _hold(self, sock: socket.socket, number: int) -> None:
        """Until the client closes the connection (what it sends meanwhile is read and
        dropped) or the server stops."""
        while True:
            self._recv(sock, number)

    def close(self) -> None:
        """Stops accepting, shuts every connection, joins every thread, closes every socket."""
        self._stop.set()
        self._acceptor.join(JOIN_TIMEOUT)
        self._listener.close()
        with self._lock:
            live = list(self._sockets.values())
            threads = list(self._threads)
        for sock in live:
            # Wakes a thread blocked in recv() or sendall() on it.
            _shutdown(sock, socket.SHUT_RDWR)
        deadline = time.monotonic() + JOIN_TIMEOUT
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in [self._acceptor, *threads] if t.is_alive()]
        assert not left, f"threads of the hostile server still running: {left}"
        assert not self._sockets, "sockets of the hostile server still open"


def _bytes(data: Data, request: Request) -> bytes:
    return data(request) if callable(data) else data


def _shutdown(sock: socket.socket, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass  # already closed by the other side
