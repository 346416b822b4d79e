"""The ceiling: a native load generator POSTing the send request on the client CPU, against the
same server. No Python client can beat it; send_many is reported as a share of it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import _procs
from _shared import BODY, SEND_PATH, TOKEN

CONNECTIONS = 64


def lua_string(text: str) -> str:
    # For ASCII text, json.dumps's escapes (\" and \\) are also Lua's.
    assert text.isascii()
    return json.dumps(text)


def post_lua() -> str:
    body = json.dumps(BODY, separators=(",", ":"))
    return (
        'wrk.method = "POST"\n'
        f"wrk.body = {lua_string(body)}\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = {lua_string("Bearer " + TOKEN)}\n'
    )


def available(tool: str) -> bool:
    return shutil.which(tool) is not None


def version(tool: str) -> str | None:
    if not available(tool):
        return None
    flag = "-v" if tool == "wrk" else "--version"
    try:
        out = subprocess.run([tool, flag], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    lines = (out.stdout + out.stderr).strip().splitlines()
    # wrk: "wrk debian/4.1.0-3+b2 [epoll] Copyright (C) 2012 Will Glozer"
    return lines[0].split(" Copyright")[0].strip() if lines else None


def run(tool: str, base_url: str, seconds: int, pinning: _procs.Pinning) -> dict[str, Any]:
    """One sample: {"value": requests/s, ...}, {"unavailable": why}, or {"error": why}."""
    if not available(tool):
        return {"unavailable": f"{tool} is not installed"}
    url = base_url + SEND_PATH
    with tempfile.TemporaryDirectory(prefix="bizmsg-bench-wrk-") as scratch:
        if tool == "wrk":
            script = Path(scratch) / "post.lua"
            script.write_text(post_lua())
            argv = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "-s", str(script), url]
        else:
            argv = ["oha", "--no-tui", "-z", f"{seconds}s", "-c", str(CONNECTIONS), "-m", "POST",
                    "-H", f"Authorization: Bearer {TOKEN}", "-T", "application/json",
                    "-d", json.dumps(BODY, separators=(",", ":")), url]
        process = _procs.spawn([*pinning.prefix("client"), *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            out, err = process.communicate(timeout=seconds + 60)
        except subprocess.TimeoutExpired:
            _procs.stop(process)
            return {"error": f"{tool} did not finish within {seconds + 60} s"}
        finally:
            _procs.stop(process)
    if process.returncode != 0:
        return {"error": f"{tool} exited with {process.returncode}: {(err or out).strip()[-500:]}"}
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        return {"error": f"no Requests/sec in {tool}'s output: {out.strip()[-500:]}"}
    result: dict[str, Any] = {"value": float(found.group(1)), "complete": True, "extra": {}}
    # A ceiling made of errors is no ceiling: carry them into the results.
    for pattern in (r"Non-2xx or 3xx responses:\s+(\d+)", r"Socket errors:[^\n]*"):
        bad = re.search(pattern, out)
        if bad:
            result["extra"]["errors"] = bad.group(0).strip()
    if tool == "oha":
        success = re.search(r"Success rate:\s+([\d.]+)%", out)
        if success and float(success.group(1)) < 100.0:
            result["extra"]["errors"] = success.group(0)
    return result
