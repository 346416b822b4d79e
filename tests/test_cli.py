"""The ``bizmsg`` command: ``demo``, ``sandbox`` (standalone, reachable with any HTTP client)
and ``--version``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from conftest import free_port


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bizmsg", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_demo_runs_and_prints_the_send_result() -> None:
    done = run("demo")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Business accounts: 3 in 1 page(s)" in out
    assert "sent: sms_id=sms_00000000000000000001 status=ACCEPTED code=0 ok=True" in out
    received = next(line for line in out.splitlines() if "the service received:" in line)
    body = json.loads(received.split("the service received:", 1)[1])
    assert body["type"] == "template"
    assert body["to"] == "8613800138000"
    assert body["template"]["language"] == "en_US"
    assert "SendRejectedError: code='1002'" in out
    assert out.rstrip().endswith("done.")


def test_demo_piped_into_a_reader_that_stops_early_exits_quietly() -> None:
    # Regression: `bizmsg demo | head -2` ended in a BrokenPipeError traceback.
    # Unbuffered, so the demo writes while the reader is gone (not only at exit).
    demo = subprocess.Popen([sys.executable, "-u", "-m", "bizmsg", "demo"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert demo.stdout is not None and demo.stderr is not None
    demo.stdout.readline()
    demo.stdout.close()  # the reader goes away after one line
    stderr = demo.stderr.read().decode()
    assert demo.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr


def test_demo_with_another_seed() -> None:
    done = run("demo", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "ok=True" in done.stdout


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"bizmsg {bizmsg.__version__}"


def test_unknown_command_is_a_usage_error() -> None:
    done = run("frobnicate")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "bizmsg"
    if not script.exists():
        pytest.skip("no console script next to this interpreter")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == f"bizmsg {bizmsg.__version__}"


def get(url: str, token: str | None) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_standalone_sandbox_serves_until_terminated() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(port), "--seed", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith(f"bizmsg sandbox on http://127.0.0.1:{port}"), banner
        base = f"http://127.0.0.1:{port}"
        status, body = get(f"{base}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=5",
                           "sandbox-token-acme")
        assert status == 200
        assert len(body["data"]) == 5
        assert list(body) == ["data", "total", "size", "current", "pages"]
        status, body = get(f"{base}/v1/chat/businessAccounts", None)
        assert status == 401 and body["code"] == "401"
        # The bizmsg client talks to it like to any service.
        with bizmsg.Client("sandbox-token-globex", base_url=base) as client:
            assert client.business_accounts.list().data[0].name == "Globex Support"
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=5)
        assert time.monotonic() - started < 5
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with bizmsg.Client("t", base_url=f"http://127.0.0.1:{port}", max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError):
            client.business_accounts.list()


def test_standalone_sandbox_stops_on_ctrl_c() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(port), "--tenant", "solo"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("bizmsg sandbox on")
        assert "tenant solo: Authorization: Bearer sandbox-token-solo" in process.stdout.readline()
        status, _ = get(f"http://127.0.0.1:{port}/v1/chat/businessAccounts", "sandbox-token-solo")
        assert status == 200
        process.send_signal(signal.SIGINT)
        process.wait(timeout=5)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_standalone_sandbox_on_a_taken_port_fails_cleanly() -> None:
    from bizmsg.testing import Sandbox

    with Sandbox() as taken:
        done = run("sandbox", "--port", str(taken.port), timeout=30)
    assert done.returncode == 1
    assert "ConfigurationError" in done.stderr and "could not start" in done.stderr
