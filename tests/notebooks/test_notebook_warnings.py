"""In a Jupyter kernel: a sync call a cell makes logs no blocked-loop WARNING (the
kernel's loop is idle while a cell runs; the docs use the sync ``Client`` in notebooks), while
a sync call from a task of one's own on that loop still does; and a campaign's warnings are
seen once: in the displayed result, or, when the result is not displayed, logged as the cell
ends.

The notebook is built here and run by nbclient in a real kernel, with logging set up in its
first cell (without it the ``bizmsg`` logger's records go nowhere, and nothing would show).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="running a notebook needs nbformat")
nbclient = pytest.importorskip("nbclient", reason="running a notebook needs nbclient")
pytest.importorskip("ipykernel", reason="running a notebook needs ipykernel (a kernel)")

ROOT = Path(__file__).parents[2]

SETUP = """\
import asyncio, logging
import bizmsg
from bizmsg.testing import Sandbox
logging.basicConfig(format="LOG %(levelname)s %(name)s: %(message)s")
data = {"tenants": {"acme": [{
    "bizAccountId": "100000000000001", "name": "Acme", "chatBusinessManagerMessagingLimit":
    "TIER_50", "businessPhoneNumbers": [{"phoneNumberId": "200000000000001",
                                         "displayPhoneNumber": "+1 415 555 0100",
                                         "throughput": "HIGH"}]}]}}
sandbox = Sandbox(seed_data=data)
client = sandbox.client()
rows = [{"to": f"86138{i:08d}", "from": "+1 415 555 0100", "name": "t", "parameters": [],
         "language": "en"} for i in range(60)]
"""

CELLS = {
    "setup": SETUP,
    "sync call": "client.business_phone_numbers.list().total",
    "displayed": "client.messages.send_many(rows, pace='auto', dedupe=False)",
    "not displayed": "result = client.messages.send_many(rows, pace='auto', dedupe=False)",
    "background task": (
        "other = sandbox.client()\n"
        "async def in_the_background() -> None:\n"
        "    other.business_phone_numbers.list()\n"
        "await asyncio.create_task(in_the_background())"
    ),
    # Regression: the cell's own calls above spent the client's one warning, silently.
    "background task, same client": (
        "async def same_client_in_the_background() -> None:\n"
        "    client.business_phone_numbers.list()\n"
        "await asyncio.create_task(same_client_in_the_background())"
    ),
    "asked in a cell": "from bizmsg import _notebook\n_notebook.sync_call_blocks_loop()",
    "asked in a task": (
        "async def ask() -> bool:\n"
        "    return _notebook.sync_call_blocks_loop()\n"
        "await asyncio.create_task(ask())"
    ),
    "teardown": "client.close(); other.close(); sandbox.close()",
}


@pytest.fixture(scope="module")
def outputs() -> dict[str, Any]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS.values()]
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("BIZMSG_")}
    try:
        client.execute()
    finally:
        os.environ.update(saved)
    return {name: cell.outputs for name, cell in zip(CELLS, nb.cells)}


def stderr(outputs: list[Any]) -> str:
    return "".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stderr")


def html(outputs: list[Any]) -> str:
    return "".join(o.data.get("text/html", "") for o in outputs
                   if o.output_type in ("execute_result", "display_data"))


def test_a_cells_own_sync_call_logs_no_blocked_loop_warning(outputs: dict[str, Any]) -> None:
    assert "a synchronous bizmsg call was made" not in stderr(outputs["sync call"])
    assert not [o for o in outputs["sync call"] if o.output_type == "error"]


def test_a_sync_call_from_a_task_on_the_kernels_loop_still_warns(
        outputs: dict[str, Any]) -> None:
    text = stderr(outputs["background task"])
    assert text.count("LOG WARNING bizmsg: a synchronous bizmsg call was made while an asyncio "
                      "event loop is running") == 1, text


def test_a_clients_own_cell_calls_do_not_spend_its_warning(outputs: dict[str, Any]) -> None:
    """The client the cells used without a warning still warns, once, for a sync call from a
    task of one's own: the Rust client asks ``_notebook.sync_call_blocks_loop()`` before it
    counts its one warning."""
    text = stderr(outputs["background task, same client"])
    assert text.count("LOG WARNING bizmsg: a synchronous bizmsg call was made while an asyncio "
                      "event loop is running") == 1, text


def test_the_question_rust_may_ask_before_it_warns(outputs: dict[str, Any]) -> None:
    """``_notebook.sync_call_blocks_loop()``: False for the cell's own call, True from a
    task of one's own."""
    def value(name: str) -> str:
        [result] = [o for o in outputs[name] if o.output_type == "execute_result"]
        return str(result.data["text/plain"])

    assert value("asked in a cell") == "False"
    assert value("asked in a task") == "True"


def test_a_displayed_result_shows_the_campaign_warnings_once(outputs: dict[str, Any]) -> None:
    shown = html(outputs["displayed"])
    assert "2 warning(s)" in shown and "past its messaging tier TIER_50" in shown
    assert "campaign:" not in stderr(outputs["displayed"]), stderr(outputs["displayed"])


def test_a_result_not_displayed_has_its_warnings_logged_once(outputs: dict[str, Any]) -> None:
    text = stderr(outputs["not displayed"])
    assert text.count("LOG WARNING bizmsg: campaign: ") == 2, text
    assert text.count("past its messaging tier TIER_50") == 1, text
    assert html(outputs["not displayed"]) == ""
