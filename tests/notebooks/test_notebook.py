"""examples/quickstart.ipynb executes cleanly in a Jupyter kernel and shows what it promises.

Needs the notebook tooling (nbclient, nbformat, ipykernel) and what the notebook uses (pandas,
tqdm); skipped without them.

The notebook is committed with its outputs. To refresh them (from the repository's root)::

    QT_API=none python -c "import nbclient, nbformat; p = 'examples/quickstart.ipynb'; \
    nb = nbformat.read(p, 4); nbclient.NotebookClient(nb, timeout=120, \
    coalesce_streams=True, record_timing=False).execute(); nbformat.write(nb, p)"

``QT_API`` makes ``tqdm.auto`` print its text bar even where ipywidgets is installed: a widget
bar is stored as its first state ("0%") for GitHub and nbconvert, which cannot run widgets.
``coalesce_streams`` keeps only the bar's last line.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="executing the notebook needs nbformat")
nbclient = pytest.importorskip("nbclient", reason="executing the notebook needs nbclient")
pytest.importorskip("ipykernel", reason="executing the notebook needs ipykernel (a kernel)")
pytest.importorskip("pandas", reason="the quickstart notebook uses pandas")
pytest.importorskip("tqdm", reason="the quickstart notebook shows a tqdm progress bar")

ROOT = Path(__file__).parents[2]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"

#: A cell tagged so shows an uncaught error on purpose (nbclient goes on past it).
RAISES = "raises-exception"


@pytest.fixture(scope="module")
def executed() -> Any:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}},
    )
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("BIZMSG_")}
    try:
        client.execute()
    finally:
        os.environ.update(saved)
    return nb


def _code_cells(nb: Any) -> list[Any]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def _cell(nb: Any, source: str) -> Any:
    found = [cell for cell in _code_cells(nb) if cell.source.strip() == source]
    assert len(found) == 1, f"no single cell with source {source!r}"
    return found[0]


def _html(cell: Any) -> list[str]:
    return [o.data["text/html"] for o in cell.outputs
            if o.output_type in ("execute_result", "display_data") and "text/html" in o.data]


def test_the_committed_notebook_is_valid_and_has_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    cells = _code_cells(nb)
    assert cells and all(cell.execution_count is not None for cell in cells), \
        "commit the notebook executed, with its outputs"
    assert not [o for cell in cells for o in cell.outputs
                if o.output_type == "error" and RAISES not in cell.metadata.get("tags", [])]


def test_no_errors_but_the_one_shown_on_purpose(executed: Any) -> None:
    errors = [(cell, o) for cell in _code_cells(executed) for o in cell.outputs
              if o.output_type == "error"]
    unexpected = [(cell.source, o.ename, o.evalue) for cell, o in errors
                  if RAISES not in cell.metadata.get("tags", [])]
    assert not unexpected
    assert [o.ename for _, o in errors] == ["ValidationError"]
    # bizmsg's short summary leads the traceback: the class and the field.
    traceback = "\n".join(errors[0][1].traceback)
    assert "bizmsg.ValidationError" in traceback and "field" in traceback


def test_a_page_of_accounts_shows_as_an_html_table(executed: Any) -> None:
    html = _html(_cell(executed, "page = client.business_accounts.list(page_no=1, page_size=5)\npage"))
    assert len(html) == 1
    assert "<table" in html[0] and "BusinessAccount" in html[0] and "Acme" in html[0]


def test_every_number_goes_into_a_dataframe(executed: Any) -> None:
    cell = next(c for c in _code_cells(executed) if "bizmsg.to_pandas(client.business_phone" in c.source)
    printed = "".join(o.text for o in cell.outputs if o.output_type == "stream")
    assert "59 numbers" in printed
    assert any("dataframe" in html for html in _html(cell))
    dtypes = _cell(executed, 'numbers[["create_time", "update_time"]].dtypes')
    assert "datetime64[ns, UTC]" in dtypes.outputs[0].data["text/plain"]


def test_the_send_and_the_rejected_send(executed: Any) -> None:
    sent = next(c for c in _code_cells(executed) if c.source.rstrip().endswith("\nresult")
                and "messages.send(" in c.source)
    assert "committed" in _html(sent)[0]
    rejected = next(c for c in _code_cells(executed) if "except bizmsg.SendRejectedError" in c.source)
    html = _html(rejected)
    assert len(html) == 1 and "bizmsg.SendRejectedError" in html[0] and "1003" in html[0]


def test_async_cell_lists_and_sends(executed: Any) -> None:
    cell = next(c for c in _code_cells(executed) if "async with bizmsg.AsyncClient" in c.source)
    assert any("BusinessPhoneNumber · page 1" in html for html in _html(cell))
    ids = ast.literal_eval(cell.outputs[-1].data["text/plain"])
    assert len(ids) == 5 and all(str(i).startswith("sms_") for i in ids)


def test_the_campaign_is_planned_then_all_sent(executed: Any) -> None:
    plan = next(c for c in _code_cells(executed) if "client.messages.plan(" in c.source)
    printed = "".join(o.text for o in plan.outputs if o.output_type == "stream")
    assert "message 301 repeats message 0" in printed
    [shown] = _html(plan)
    assert "CampaignPlan" in shown and "300 to send · 1 invalid · 1 duplicate ·" in shown
    [sent] = _html(_cell(executed, 'result = client.messages.send_many(messages, pace="auto", '
                                   'progress=True)\nresult'))
    assert "BulkResult · 300 messages" in sent and "sent&nbsp;300" in sent
    counts = ast.literal_eval(_cell(executed, "result.counts").outputs[0].data["text/plain"])
    assert counts == {"sent": 300, "rejected": 0, "unknown": 0, "failed": 0, "skipped": 0}
    head = _cell(executed, "result.to_pandas().head()")
    assert any("dataframe" in html for html in _html(head))
