"""Timeouts: the :class:`Timeout` a client and every call take, and the client's default.

A client is made with one (its ``connect`` part configures the connection pool, so it is fixed
then); each call may give another, whose parts override the client's for that call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

from .errors import ConfigurationError

__all__ = ["Timeout", "TimeoutArg", "DEFAULT_TIMEOUT", "call_timeout"]


@dataclass(frozen=True, slots=True)
class Timeout:
    """Timeouts in seconds; ``None`` leaves a part to the client's setting.

    ``connect`` bounds establishing a connection (a pool-wide setting: give it when the client
    is made), ``read`` bounds one attempt once connected, ``total`` bounds the whole call
    including retries and their waits. A plain float anywhere a timeout is taken means
    ``Timeout(total=that)``.
    """

    connect: float | None = None
    read: float | None = None
    total: float | None = None

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, (int, float)) and math.isfinite(value) and value > 0
            ):
                raise ConfigurationError(
                    f"Timeout.{name} must be a positive number of seconds, got {value!r}"
                )


DEFAULT_TIMEOUT = Timeout(connect=10.0, total=30.0)

#: What ``timeout=`` takes: a :class:`Timeout`, a number of seconds (the total), or ``None``.
TimeoutArg = Union[float, Timeout, None]


def call_timeout(timeout: TimeoutArg) -> Timeout | None:
    """A call's ``timeout=`` as the Rust side takes it: a number is the call's total, and
    ``None`` leaves every part to the client."""
    if timeout is None or isinstance(timeout, Timeout):
        return timeout
    return Timeout(total=timeout)
