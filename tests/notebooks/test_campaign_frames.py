"""pandas in and out of a campaign: ``send_many(df)`` reads a DataFrame row by row,
``BulkResult.to_pandas()`` carries the message's own columns so it joins back to its input,
and a ``BulkResult`` is indexed and sliced like a sequence of its outcomes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from campaign_support import message, recipient
from conftest import Number, committed

pd = pytest.importorskip("pandas")


def frame_of(sender: Number, count: int) -> Any:
    return pd.DataFrame({
        "to": [recipient(i) for i in range(count)],
        "from": [sender.digits] * count,
        "name": ["order_update"] * count,
        "parameters": [[f"A-{i}"] for i in range(count)],
        "language": ["en"] * count,
        "customer_id": [f"c{i}" for i in range(count)],
    })


def test_send_many_takes_a_dataframe_one_message_per_row(sandbox: Sandbox,
                                                          client: bizmsg.Client,
                                                          sender: Number) -> None:
    """Regression: a DataFrame was iterated as one, over its column names ("not a message
    ... got str", one failed outcome per column)."""
    frame = frame_of(sender, 5)
    result = client.messages.send_many(frame)
    assert result.counts["sent"] == 5 and len(result) == 5
    assert sorted((r["body"]["to"], r["body"]["template"]["parameters"])
                  for r in committed(sandbox)) == [(recipient(i), f'["A-{i}"]') for i in range(5)]
    # Each outcome's message is its row, as a dict of the frame's columns.
    assert result[3].message == {"to": recipient(3), "from": sender.digits,
                                 "name": "order_update", "parameters": ["A-3"],
                                 "language": "en", "customer_id": "c3"}


def test_a_dataframe_is_read_lazily_a_chunk_at_a_time(client: bizmsg.Client,
                                                      sender: Number) -> None:
    """The rows are made as the campaign asks for them (``itertuples``), never all at once
    into a list of dicts."""
    made = [0]
    seen_at_first_batch: list[int] = []

    class Counted(pd.DataFrame):  # type: ignore[misc]
        @property
        def _constructor(self) -> type[Counted]:
            return Counted

        def itertuples(self, index: bool = True, name: str | None = "Pandas") -> Iterator[Any]:
            for row in super().itertuples(index=index, name=name):
                made[0] += 1
                yield row

    frame = Counted(frame_of(sender, 5000))
    result = client.messages.send_many(
        frame, concurrency=4, dedupe=False,
        on_result=lambda batch: seen_at_first_batch.append(made[0]))
    assert result.counts["sent"] == 5000 and made[0] == 5000
    assert seen_at_first_batch[0] < 2000, seen_at_first_batch[:3]


def test_missing_values_are_left_out_and_numbers_are_sent_as_digits(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    frame = pd.DataFrame({
        # As pd.read_csv gives phone numbers: integers, or floats in a column with a gap.
        "to": [int(recipient(0)), float(recipient(1)), None],
        "from": [int(sender.digits)] * 3,
        "name": ["t"] * 3, "parameters": [["x"]] * 3, "language": ["en"] * 3,
        "idempotency_key": [None, "key-1", None],
    })
    result = client.messages.send_many(frame)
    assert [o.status for o in result] == ["sent", "sent", "failed"]
    assert result[2].error is not None and str(result[2].error) == "invalid to: is missing"
    assert result[0].message["to"] == recipient(0) and "idempotency_key" not in result[0].message
    assert result[1].idempotency_key == "key-1"
    assert sorted(r["body"]["to"] for r in committed(sandbox)) == [recipient(0), recipient(1)]


def test_numbers_of_numpy_and_nullable_columns_are_sent_as_digits_too(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    np = pytest.importorskip("numpy")
    frame = pd.DataFrame({
        "to": pd.array([int(recipient(0)), None, int(recipient(2))], dtype="Int64"),
        "from": np.array([int(sender.digits)] * 3, dtype=np.int64),
        "name": ["t"] * 3, "parameters": [["x"]] * 3, "language": ["en"] * 3,
    })
    result = client.messages.send_many(frame)
    assert [o.status for o in result] == ["sent", "failed", "sent"]
    assert sorted(r["body"]["to"] for r in committed(sandbox)) == [recipient(0), recipient(2)]


def test_plan_and_send_many_iter_and_async_take_a_dataframe_too(
    client: bizmsg.Client, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    import asyncio

    frame = frame_of(sender, 6)
    assert client.messages.plan(frame).to_send == 6
    assert sorted(o.index for o in client.messages.send_many_iter(frame)) == list(range(6))
    result = asyncio.run(aclient.messages.send_many(frame))
    assert result.counts["sent"] == 6


def test_to_pandas_has_the_message_columns_and_joins_back_to_its_input(
    client: bizmsg.Client, sender: Number, globex_sender: Number
) -> None:
    """Regression: the frame had only the outcome's columns (index, status, ...): joining it
    back to the input went through ``index``."""
    template = bizmsg.Template(name="promo", parameters={"code": "S"}, language="en")
    items: list[Any] = [
        message(sender.digits, 0),
        bizmsg.Message(to=recipient(1), from_=sender.digits, template=template),
        {"to": recipient(2), "from_": globex_sender.digits,
         "template": {"name": "n", "parameters": ["p"], "language": "en"}},
        7,
    ]
    frame = client.messages.send_many(items).to_pandas()
    assert list(frame.columns) == ["index", "to", "from", "template", "parameters", "language",
                                   "status", "ok", "idempotency_key", "sms_id", "code", "msg",
                                   "error", "duplicate_of", "reason"]
    rows = frame.to_dict("records")
    assert [(r["to"], r["from"], r["template"], r["language"]) for r in rows[:3]] == [
        (recipient(0), sender.digits, "n", "en"),
        (recipient(1), sender.digits, "promo", "en"),
        (recipient(2), globex_sender.digits, "n", "en"),
    ]
    assert rows[1]["parameters"] == {"code": "S"} and rows[0]["parameters"] == ["0"]
    assert rows[3]["status"] == "failed" and pd.isna(rows[3]["to"])

    # A DataFrame in, a DataFrame out: merged back on the recipient, without going by index.
    source = frame_of(sender, 4)
    result = client.messages.send_many(source).to_pandas()
    merged = source.merge(result[["to", "status", "sms_id"]], on="to")
    assert list(merged["customer_id"]) == ["c0", "c1", "c2", "c3"]
    assert set(merged["status"]) == {"sent"} and merged["sms_id"].notna().all()


def test_a_bulk_result_is_indexed_and_sliced_like_a_sequence_of_outcomes(
    client: bizmsg.Client, sender: Number
) -> None:
    """Regression: ``result[0]`` raised TypeError."""
    result = client.messages.send_many([message(sender.digits, i) for i in range(5)])
    assert len(result) == 5
    assert result[0].index == 0 and result[4] is result.outcomes[4]
    assert result[-1].index == 4
    window = result[1:3]
    assert isinstance(window, list) and [o.index for o in window] == [1, 2]
    assert [o.index for o in result[::2]] == [0, 2, 4]
    with pytest.raises(IndexError):
        result[5]
    assert all(result[o.index] is o for o in result)


def test_import_bizmsg_imports_no_pandas_and_a_campaign_over_a_list_neither() -> None:
    code = ("import sys, bizmsg\n"
            "from bizmsg.testing import Sandbox\n"
            "with Sandbox() as s, s.client() as c:\n"
            "    sender = c.business_phone_numbers.list().data[0].display_phone_number\n"
            "    c.messages.send_many([{'to': '8613800138000', 'from': sender, 'name': 't',\n"
            "                           'parameters': [], 'language': 'en'}])\n"
            "print('pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
