"""pytest fixtures shipped with bizmsg (registered through the ``pytest11`` entry point).

- ``bizmsg_sandbox``: a fresh :class:`bizmsg.testing.Sandbox` per test.
- ``bizmsg_client``: a :class:`bizmsg.Client` on it, closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._client import Client
from .testing import Sandbox


@pytest.fixture
def bizmsg_sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture
def bizmsg_client(bizmsg_sandbox: Sandbox) -> Iterator[Client]:
    with bizmsg_sandbox.client() as client:
        yield client
