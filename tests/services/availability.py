"""The rule for a server that is not installed: skip, unless ``BIZMSG_REQUIRE_SERVICES=1``.

A fresh machine running the README's test command has none of these servers, and its run must
still pass: the tests that need one skip, saying how to enable them. ``.ci/run`` installs them
all and sets ``BIZMSG_REQUIRE_SERVICES=1``, under which a missing server (or Python client
library) fails the test instead, so that CI can never pass by skipping.

Only *absence* skips. A server that is installed but does not start is a failure either way.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


class ServiceUnavailable(Exception):
    """A server's program (or a library the test needs) is not installed; the message says
    how to install it."""


def services_required() -> bool:
    return os.environ.get("BIZMSG_REQUIRE_SERVICES", "").strip() not in ("", "0")


def skip_or_fail(reason: str) -> NoReturn:
    if services_required():
        pytest.fail(f"{reason} (BIZMSG_REQUIRE_SERVICES=1: a missing server fails the test)",
                    pytrace=False)
    pytest.skip(f"{reason} (BIZMSG_REQUIRE_SERVICES=1 makes this a failure)")


def require_module(name: str, *, pip: str) -> ModuleType:
    """``importlib.import_module(name)``, or skip/fail saying which pip package brings it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        skip_or_fail(f"the Python package {pip!r} is not installed: "
                     f"pip install -e \".[dev]\", or run .ci/run")
