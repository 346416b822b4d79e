"""Testing with the embedded sandbox: a faithful implementation of the service that runs on
127.0.0.1 inside this process (Rust, on a free port).

>>> from bizmsg.testing import Sandbox
>>> with Sandbox() as sandbox:
...     client = sandbox.client()
...     page = client.business_phone_numbers.list()
...     sandbox.sent_messages()          # every send request, as received

Faults are scripted per route (``"send"``, ``"business_accounts"``,
``"business_phone_numbers"`` or ``"*"``): the next ``times`` requests (or every ``every``-th, or
each with a ``probability``) get a status (without being processed), a delay, an oversized
body, or a connection cut after processing. They can also come from a fault file. With
``enforce_limits=True`` the sandbox acts like the platform's throughput and messaging tiers.
See docs/sandbox.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from . import _logging, _native
from ._client import AsyncClient, Client
from .errors import ValidationError

__all__ = ["Sandbox", "Fault"]


@dataclass(frozen=True)
class Fault:
    """What the sandbox does to requests of a route.

    ``status``: answer with this status, headers and body *without processing* the request
    (a 503 or 429 "before processing"). ``delay``: wait this many seconds before answering
    (after processing). ``cut_connection``: process the request (a message is sent), then
    close the connection without answering; together with ``status``, close it *without*
    processing (a failure in front of the service). ``body_bytes``: answer with a JSON body of
    exactly that many bytes (an oversized answer), sent ``chunked`` (without
    ``Content-Length``) if asked.

    Which requests: the next ``times`` ones (``None``: all, for as long as the fault is
    queued), only every ``every``-th matching one, each with ``probability`` (drawn from the
    sandbox's seeded generator, so a seed replays the same faults).
    """

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    body: str | None = None
    delay: float = 0.0
    cut_connection: bool = False
    times: int | None = 1
    every: int = 1
    probability: float = 1.0
    body_bytes: int | None = None
    chunked: bool = False


class Sandbox:
    """The service, embedded. Starts at once; stop it with ``close()`` or a ``with`` block.

    ``tenants`` are seeded with ``accounts_per_tenant`` accounts of ``numbers_per_account``
    (low, high) numbers each, deterministically from ``seed``; ``seed_data`` (a JSON file's
    path, or its content as a mapping) serves your own accounts and numbers instead.
    ``delay`` (seconds) is added to every answer. ``faults`` maps a route to one fault or a
    list of them, or is the path of a fault file. ``enforce_limits=True`` refuses sends over a
    number's throughput (``429`` with ``Retry-After``, code ``130429``) and new recipients past
    an account's messaging tier (failed commit ``1007``). ``max_logged_requests`` bounds the
    request log (the oldest go first) for long runs; :meth:`stats` counts everything anyway.
    ``honour_idempotency_keys=False`` acts like a service that does not deduplicate: a
    repeated ``Idempotency-Key`` commits a new message (to test what holds without it).
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        tenants: Iterable[str] = ("acme", "globex"),
        accounts_per_tenant: int = 3,
        numbers_per_account: tuple[int, int] = (2, 4),
        delay: float = 0.0,
        faults: Mapping[str, Fault | Iterable[Fault]] | str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        enforce_limits: bool = False,
        max_logged_requests: int | None = None,
        seed_data: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        honour_idempotency_keys: bool = True,
    ) -> None:
        data = None
        if isinstance(seed_data, Mapping):
            data = json.dumps(seed_data)
        elif isinstance(seed_data, (str, os.PathLike)):
            with open(seed_data, encoding="utf-8") as file:
                data = file.read()
        elif seed_data is not None:
            raise ValidationError(
                f"seed_data must be a mapping or the path of a JSON file, not "
                f"{type(seed_data).__name__}", field="seed_data")
        _logging.ensure_installed()
        self._server = _native.SandboxServer(
            host=host, port=port, seed=seed, tenants=list(tenants),
            accounts_per_tenant=accounts_per_tenant,
            numbers_per_account=(int(numbers_per_account[0]), int(numbers_per_account[1])),
            delay=float(delay), enforce_limits=enforce_limits,
            max_logged_requests=max_logged_requests, seed_data=data,
            honour_idempotency_keys=honour_idempotency_keys,
        )
        self._delay = float(delay)
        if isinstance(faults, (str, os.PathLike)):
            self.load_faults(faults)
        else:
            for route, planned in (faults or {}).items():
                for fault in [planned] if isinstance(planned, Fault) else planned:
                    self.inject(route, fault)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return self._server.base_url

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def token(self) -> str:
        """The token of the first tenant."""
        return self._server.token

    @property
    def tenant_tokens(self) -> dict[str, str]:
        """Tenant name to its token; each tenant sees only its own accounts and numbers."""
        return dict(self._server.tenant_tokens)

    def client(self, **options: Any) -> Client:
        """A :class:`~bizmsg.Client` for this sandbox (first tenant's token unless given)."""
        options.setdefault("token", self.token)
        return Client(base_url=self.base_url, **options)

    def async_client(self, **options: Any) -> AsyncClient:
        """An :class:`~bizmsg.AsyncClient` for this sandbox."""
        options.setdefault("token", self.token)
        return AsyncClient(base_url=self.base_url, **options)

    def requests(self) -> list[dict[str, Any]]:
        """Every request received, oldest first: ``method``, ``path``, ``query``, ``headers``
        (lower-case names), ``body`` (decoded JSON or ``None``), ``body_text``, ``tenant``,
        ``status``, ``response_body``, ``idempotent_replay``, ``request_id``, ``connection`` (the
        TCP connection it came on, numbered from 1: equal numbers mean keep-alive reuse)."""
        return self._server.requests()

    def sent_messages(self) -> list[dict[str, Any]]:
        """The send requests among :meth:`requests`, as received. One whose
        ``idempotent_replay`` is true repeated an ``Idempotency-Key``: no message went out."""
        return self._server.sent_messages()

    def clear_requests(self) -> None:
        self._server.clear_requests()

    @property
    def delay(self) -> float:
        """Seconds added before every answer."""
        return self._delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self._server.set_delay(float(seconds))
        self._delay = float(seconds)

    def inject(self, route: str, fault: Fault | None = None, **fields: Any) -> None:
        """Queues a fault for ``route``: ``inject("send", status=503, times=2)`` or
        ``inject("send", Fault(cut_connection=True))``."""
        fault = fault if fault is not None else Fault(**fields)
        self._server.inject(
            route=route, times=fault.times, every=fault.every,
            probability=float(fault.probability), status=fault.status,
            headers=list(dict(fault.headers).items()), body=fault.body,
            body_bytes=fault.body_bytes, chunked=fault.chunked, delay=float(fault.delay),
            cut_connection=fault.cut_connection,
        )

    def load_faults(self, path: str | os.PathLike[str]) -> None:
        """Queues the faults of a fault file (format in docs/sandbox.md, "Fault files")."""
        with open(path, encoding="utf-8") as file:
            self._server.load_faults(file.read())

    def stats(self) -> dict[str, int]:
        """Counts since the sandbox started: ``requests``, ``sends``, ``accepted`` (messages
        that went out), ``failed_commits``, ``replayed`` (answered from the Idempotency-Key
        cache) and ``throttled`` (over a number's throughput, with ``enforce_limits``)."""
        return self._server.stats()

    def traffic(self) -> dict[str, Any]:
        """What a run of many processes did: ``senders``, one dict per sender with
        ``accepted`` (messages committed), ``busiest_second`` (the most it committed within one
        second) and ``throttled`` (refused over its throughput, with ``enforce_limits``);
        ``repeated_recipients`` (recipients that got more than one message) and
        ``most_to_one_recipient``. A standalone sandbox (``bizmsg sandbox``) answers the same,
        with :meth:`stats`' counts, at ``GET /_sandbox/traffic``."""
        return self._server.traffic()

    def clear_faults(self) -> None:
        self._server.clear_faults()

    def close(self) -> None:
        """Stops the server (idempotent)."""
        self._server.shutdown()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox(base_url={self.base_url!r})"
