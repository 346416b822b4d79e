"""The loopback server every client talks to: nginx answering fixed bodies (preferred: its cost
per request is small and constant), or the embedded sandbox run as a subprocess when nginx is
not installed.

The fixtures are real sandbox answers, so bizmsg decodes exactly what it decodes in production:
one 20-number page for `list`, and 100 pages of 1,000 numbers for `iter`, made from one sandbox
page whose phoneNumberIds are rewritten so that every page holds different numbers (the client
stops with PaginationError if a page starts with the item the previous page started with).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import _procs
from _shared import (
    BODY, ITER_PAGE_SIZE, ITER_PAGES, ITER_TOTAL, LIST_PAGE_SIZE, LIST_PATH, SEND_ANSWER,
    SEND_PATH, TOKEN,
)


class ServerError(RuntimeError):
    """The server could not be started or does not answer what the clients expect."""


def find_nginx() -> str | None:
    # /usr/sbin is not on every user's PATH.
    found = shutil.which("nginx")
    if found is None and os.access("/usr/sbin/nginx", os.X_OK):
        found = "/usr/sbin/nginx"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def write_fixtures(root: Path) -> dict[str, int]:
    """Writes pages/<pageSize>/<pageNo>.json under `root`; returns their sizes in bytes."""
    # Imported here, not at the top: only the nginx server needs it, and the orchestrator
    # otherwise never loads bizmsg's native runtime.
    from bizmsg.testing import Sandbox

    with Sandbox(accounts_per_tenant=20) as sandbox, sandbox.client(max_retries=0) as client:
        small = client.business_phone_numbers.list(page_size=LIST_PAGE_SIZE, raw=True)
    if len(small["data"]) != LIST_PAGE_SIZE or small["current"] != 1:
        raise ServerError(f"the sandbox gave an unexpected page: {compact(small)[:200]}")
    # 200 accounts of exactly 5 numbers: one page of 1,000 real numbers as the template.
    with Sandbox(accounts_per_tenant=200, numbers_per_account=(5, 5)) as sandbox, \
            sandbox.client(max_retries=0) as client:
        template = client.business_phone_numbers.list(page_size=ITER_PAGE_SIZE, raw=True)
    items: list[dict[str, Any]] = template["data"]
    if len(items) < ITER_PAGE_SIZE:
        raise ServerError(f"the sandbox listed {len(items)} numbers, {ITER_PAGE_SIZE} needed")

    (root / "pages" / str(LIST_PAGE_SIZE)).mkdir(parents=True)
    (root / "pages" / str(ITER_PAGE_SIZE)).mkdir(parents=True)
    sizes = {"list_page": _write(root / "pages" / str(LIST_PAGE_SIZE) / "1.json", compact(small))}
    total_bytes = 0
    for page_no in range(1, ITER_PAGES + 1):
        data = copy.deepcopy(items[:ITER_PAGE_SIZE])
        for index, item in enumerate(data):
            # 15 digits like the real ids, unique across all 100,000 numbers.
            item["phoneNumberId"] = str(100_000_000_000_000 + (page_no - 1) * ITER_PAGE_SIZE + index)
        page = {"data": data, "total": ITER_TOTAL, "size": ITER_PAGE_SIZE, "current": page_no,
                "pages": ITER_PAGES}
        total_bytes += _write(root / "pages" / str(ITER_PAGE_SIZE) / f"{page_no}.json", compact(page))
    sizes["iter_page"] = total_bytes // ITER_PAGES
    return sizes


def _write(path: Path, text: str) -> int:
    data = text.encode()
    path.write_bytes(data)
    return len(data)


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60;
  sendfile on;
  # The fixtures never change: keep them open instead of open()ing per request.
  open_file_cache max=256 inactive=600s;
  open_file_cache_valid 600s;
  types {{ application/json json; }}
  default_type application/json;
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  server {{
    listen 127.0.0.1:{port};
    root {dir};
    location = {send_path} {{ return 200 '{send_answer}'; }}
    # pageSize and pageNo select the file, so an unexpected request is a 404, never a wrong page.
    location = {list_path} {{ try_files /pages/$arg_pageSize/$arg_pageNo.json =404; }}
  }}
}}
"""


class Server:
    """A running server: `kind` is "nginx" or "sandbox"; `note` says what it serves."""

    def __init__(self, kind: str, pinning: _procs.Pinning, nginx: str | None = None) -> None:
        self.kind = kind
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="bizmsg-bench-"))
        # nginx's worker runs as "nobody" when started as root: it must be able to read here.
        self.dir.chmod(0o755)
        self.fixture_sizes: dict[str, int] = {}
        self._log = self.dir / "server.log"
        self._workers: list[int] = []
        self.process: subprocess.Popen[Any] | None = None
        try:
            if kind == "nginx":
                if nginx is None:
                    raise ServerError("nginx is not installed (run benches/setup.sh)")
                if not os.access(nginx, os.X_OK):
                    raise ServerError(f"{nginx} is not an executable file")
                self.note = "nginx serving fixed JSON bodies"
                self._start_nginx(nginx, pinning)
            else:
                self.note = ("FALLBACK: the embedded sandbox (`python -m bizmsg sandbox`), not nginx: "
                             "it does real work per request, so every client looks slower and "
                             "the ratios are compressed; iter 100k is not available")
                self._start_sandbox(pinning)
            self._wait_listening()
            self.check()
        except BaseException:
            self.close()
            raise

    def _start_nginx(self, nginx: str, pinning: _procs.Pinning) -> None:
        self.fixture_sizes = write_fixtures(self.dir)
        for path in self.dir.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        (self.dir / "tmp").mkdir()
        conf = self.dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(
            dir=self.dir, port=self.port, send_path=SEND_PATH, send_answer=SEND_ANSWER,
            list_path=LIST_PATH))
        with open(self._log, "wb") as log:
            self.process = _procs.spawn(
                [*pinning.prefix("server"), nginx, "-c", str(conf), "-p", str(self.dir)],
                stdout=log, stderr=subprocess.STDOUT)

    def _start_sandbox(self, pinning: _procs.Pinning) -> None:
        with open(self._log, "wb") as log:
            self.process = _procs.spawn(
                [*pinning.prefix("server"), sys.executable, "-m", "bizmsg", "sandbox",
                 "--port", str(self.port), "--accounts", "20"],
                stdout=log, stderr=subprocess.STDOUT)

    def _wait_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"{self.kind} exited with status {self.process.returncode} "
                                  f"at start:\n{self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise ServerError(f"{self.kind} did not listen on port {self.port} within 30 s:\n"
                              f"{self._tail()}")
        if self.kind == "nginx":
            self._workers = _procs.children_of(self.process.pid)

    def _tail(self) -> str:
        text = ""
        for log in (self._log, self.dir / "error.log"):
            if log.exists():
                text += log.read_text(errors="replace")[-2000:]
        return text.strip() or "(no output)"

    def get(self, path: str) -> dict[str, Any]:
        request = urllib.request.Request(self.base_url + path,
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)  # type: ignore[no-any-return]

    def check(self) -> None:
        """Asks what the clients will ask, once, and checks the answers."""
        try:
            request = urllib.request.Request(
                self.base_url + SEND_PATH, data=json.dumps(BODY).encode(),
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                sent = json.load(response)
            if sent.get("code") != "0":
                raise ServerError(f"send answered {sent}")
            page = self.get(f"{LIST_PATH}?pageNo=1&pageSize={LIST_PAGE_SIZE}")
            if page["current"] != 1 or len(page["data"]) != LIST_PAGE_SIZE:
                raise ServerError(f"the list page is wrong: {compact(page)[:200]}")
            if self.kind == "nginx":
                for page_no in (1, ITER_PAGES):
                    page = self.get(f"{LIST_PATH}?pageNo={page_no}&pageSize={ITER_PAGE_SIZE}")
                    if page["current"] != page_no or len(page["data"]) != ITER_PAGE_SIZE:
                        raise ServerError(f"iter page {page_no} is wrong")
        except ServerError:
            raise
        except Exception as error:  # urllib's and json's many errors: all mean "not usable"
            raise ServerError(f"{self.kind} does not answer as expected: {error!r}\n"
                              f"{self._tail()}") from error

    def version(self) -> str | None:
        if self.kind != "nginx":
            return None
        return nginx_version(find_nginx())

    def close(self) -> None:
        if self.process is not None:
            # SIGTERM: nginx's fast shutdown (the master ends its workers); the sandbox CLI
            # stops on SIGTERM too.
            _procs.stop(self.process, signal.SIGTERM)
            if self.kind == "nginx":
                _procs.kill_leftovers(self._workers, "nginx")
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


def nginx_version(nginx: str | None) -> str | None:
    if nginx is None:
        return None
    try:
        out = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return (out.stderr or out.stdout).strip().removeprefix("nginx version: ") or None
