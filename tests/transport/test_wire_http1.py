"""The HTTP/1.1 transport's own codec (``src/client/http1/``) against a server that answers
exactly the bytes a test scripts: what a request looks like on the wire, and how every framing
of an answer is read — interim answers, chunked bodies with trailers, bodies ended by closing,
answers in tiny pieces — and when a connection must not be reused (``Connection: close``,
HTTP/1.0, bytes nobody asked for). A malformed answer to a send is an unknown outcome, never a
second send."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

import bizmsg

SEND_PATH = "/v1/chat/messages/send"
RESULT = b'{"smsId":"sms_1","status":"ACCEPTED","code":"0","msg":"success"}'


def answer(body: bytes = RESULT, *, status: str = "200 OK", head: str = "") -> bytes:
    """An HTTP/1.1 answer with a Content-Length (``head``: more header lines, CRLF-ended)."""
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{head}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


#: What the server does for one request: the bytes to answer, sent in pieces of ``piece``
#: bytes (0: at once), then whether to close the connection.
@dataclass
class Script:
    data: bytes
    piece: int = 0
    close: bool = False


@dataclass
class Seen:
    connection: int
    head: bytes
    body: bytes


@dataclass
class RawServer:
    """Answers each request with the next script (the last one repeats)."""

    scripts: list[Script]
    requests: list[Seen] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffered = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffered:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffered += data
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffered) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffered += data
                body, buffered = buffered[:length], buffered[length:]
                with self._lock:
                    self.requests.append(Seen(number, head, body))
                    script = self.scripts[min(len(self.requests), len(self.scripts)) - 1]
                if script.piece:
                    for start in range(0, len(script.data), script.piece):
                        conn.sendall(script.data[start:start + script.piece])
                        time.sleep(0.0005)
                else:
                    conn.sendall(script.data)
                if script.close:
                    conn.shutdown(socket.SHUT_RDWR)
                    return

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(*scripts: Script) -> RawServer:
        server = RawServer(list(scripts))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def client_for(server: RawServer, **options: object) -> bizmsg.Client:
    return bizmsg.Client(token="tok", base_url=server.base_url, max_retries=0, timeout=10,
                         **options)  # type: ignore[arg-type]


def send(client: bizmsg.Client) -> bizmsg.SendResult:
    return client.messages.send_template(
        to="8613800000001", from_="15550001111", name="n", parameters=["p"], language="en")


def test_a_send_is_written_to_the_byte(serve: Callable[..., RawServer]) -> None:
    server = serve(Script(answer()))
    with client_for(server, default_headers={"X-Team": "a b"}) as client:
        result = send(client)
    assert result.sms_id == "sms_1"
    [seen] = server.requests
    lines = seen.head.decode().split("\r\n")
    assert lines[0] == f"POST {SEND_PATH} HTTP/1.1"
    fields = [line.split(": ", 1) for line in lines[1:]]
    names = [name for name, _ in fields]
    # One of each, lower case, nothing the client does not own twice.
    assert len(names) == len(set(names)) and all(name == name.lower() for name in names)
    headers = dict(fields)
    host = server.base_url.removeprefix("http://")
    assert headers["host"] == host
    assert headers["authorization"] == "Bearer tok"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json"
    assert headers["x-team"] == "a b"
    assert result.meta is not None
    assert headers["idempotency-key"] == result.meta.idempotency_key
    assert int(headers["content-length"]) == len(seen.body)
    assert "transfer-encoding" not in headers and "connection" not in headers
    assert seen.body.startswith(b"{") and b'"to":"8613800000001"' in seen.body


def test_a_get_has_no_body_and_no_length(serve: Callable[..., RawServer]) -> None:
    page = b'{"data":[],"total":0,"size":20,"current":1,"pages":0}'
    server = serve(Script(answer(page)))
    with client_for(server) as client:
        assert list(client.business_phone_numbers.list()) == []
    [seen] = server.requests
    assert seen.head.startswith(b"GET /v1/chat/businessPhoneNumber?")
    assert b"content-length" not in seen.head.lower()
    assert seen.body == b""


CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"10;note=x\r\n" + RESULT[:16] + b"\r\n"
           + f"{len(RESULT) - 16:x}".encode() + b"\r\n" + RESULT[16:] + b"\r\n"
           b"0\r\nX-Checksum: 1\r\n\r\n")


@pytest.mark.parametrize("piece", [0, 1, 7], ids=["at-once", "byte-by-byte", "7-byte-pieces"])
@pytest.mark.parametrize("data", [answer(), CHUNKED,
                                  b"HTTP/1.1 100 Continue\r\n\r\n" + answer(),
                                  b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + CHUNKED],
                         ids=["length", "chunked-trailers", "interim-100", "interim-103-chunked"])
def test_every_framing_is_read_whole_and_the_connection_kept(
    serve: Callable[..., RawServer], data: bytes, piece: int
) -> None:
    server = serve(Script(data, piece=piece))
    with client_for(server) as client:
        for _ in range(3):
            assert send(client).sms_id == "sms_1"
    assert len(server.requests) == 3
    assert server.connections == 1, "a cleanly framed answer's connection was not reused"


@pytest.mark.parametrize("data,close", [
    (answer(head="Connection: close\r\n"), True),
    (answer().replace(b"HTTP/1.1", b"HTTP/1.0", 1), True),
    # No length and no chunking: the body runs until the server closes.
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + RESULT, True),
    # Bytes after the answer that nobody asked for: the connection cannot be trusted.
    (answer() + b"HTTP/1.1 200 OK\r\n", False),
], ids=["connection-close", "http-1.0", "until-close", "stray-bytes"])
def test_a_connection_that_cannot_be_trusted_is_not_reused(
    serve: Callable[..., RawServer], data: bytes, close: bool
) -> None:
    server = serve(Script(data, close=close))
    with client_for(server) as client:
        for _ in range(3):
            assert send(client).sms_id == "sms_1"
    assert [seen.connection for seen in server.requests] == [1, 2, 3]


def test_an_idle_connection_the_server_closed_is_not_used(
    serve: Callable[..., RawServer]
) -> None:
    """The server closes after answering, but says nothing: the pool finds the connection
    closed before lending it out, so the next send goes on a new connection, once."""
    server = serve(Script(answer(), close=True))
    with client_for(server) as client:
        send(client)
        time.sleep(0.1)  # the close has arrived
        send(client)
    assert [seen.connection for seen in server.requests] == [1, 2]


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"cut\":",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n" * 17 + answer(),
], ids=["two-lengths", "negative-length", "bad-chunk-size", "chunk-too-long", "not-http",
        "cut-body", "unasked-101", "endless-interim"])
def test_a_malformed_answer_to_a_send_is_an_unknown_outcome(
    serve: Callable[..., RawServer], data: bytes
) -> None:
    """The request was written: the service may have processed it. Not retried (even with
    retries on), raised as ``SendOutcomeUnknownError`` naming the problem."""
    server = serve(Script(data, close=True))
    with client_for(server).with_options(max_retries=3) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            send(client)
    assert len(server.requests) == 1, "a send with an unreadable answer was sent again"
    assert caught.value.idempotency_key
    assert "answer" in str(caught.value) or "closed" in str(caught.value)


def test_sixteen_interim_answers_are_still_read_through(serve: Callable[..., RawServer]) -> None:
    server = serve(Script(b"HTTP/1.1 100 Continue\r\n\r\n" * 16 + answer()))
    with client_for(server) as client:
        assert send(client).sms_id == "sms_1"


def test_a_malformed_answer_to_a_read_is_retried(serve: Callable[..., RawServer]) -> None:
    page = b'{"data":[],"total":0,"size":20,"current":1,"pages":0}'
    server = serve(Script(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", close=True),
                   Script(answer(page)))
    with client_for(server).with_options(max_retries=2) as client:
        assert list(client.business_phone_numbers.list()) == []
    assert len(server.requests) == 2


def test_a_large_answer_in_pieces_is_read_whole(serve: Callable[..., RawServer]) -> None:
    """A body much larger than one read, in 1,000-byte pieces, chunked and not."""
    items = ",".join(f'{{"phoneNumberId":"{i}","displayPhoneNumber":"+1 555 {i:07d}"}}'
                     for i in range(1000))
    page = f'{{"data":[{items}],"total":1000,"size":1000,"current":1,"pages":1}}'.encode()
    chunks = b"".join(f"{len(page[i:i + 3000]):x}\r\n".encode() + page[i:i + 3000] + b"\r\n"
                      for i in range(0, len(page), 3000))
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    server = serve(Script(answer(page), piece=1000), Script(chunked, piece=1000))
    with client_for(server) as client:
        for _ in range(2):
            numbers = client.business_phone_numbers.list(page_size=1000)
            assert len(numbers) == 1000
            assert list(numbers)[999].phone_number_id == "999"
    assert server.connections == 1


def test_the_async_client_reads_the_same_framings(serve: Callable[..., RawServer]) -> None:
    server = serve(Script(b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED, piece=5),
                   Script(answer(head="Connection: close\r\n"), close=True),
                   Script(answer()))

    async def main() -> list[str | int | None]:
        async with bizmsg.AsyncClient(token="tok", base_url=server.base_url,
                                      max_retries=0) as client:
            return [(await client.messages.send_template(
                to="8613800000001", from_="15550001111", name="n", parameters=["p"],
                language="en")).sms_id for _ in range(3)]

    assert asyncio.run(main()) == ["sms_1"] * 3
    assert [seen.connection for seen in server.requests] == [1, 1, 2]
