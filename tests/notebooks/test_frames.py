"""pandas conversion: ``Page.to_pandas()``, ``bizmsg.to_pandas()`` and the generic helpers of
``bizmsg._dataframes``. Real pages from the sandbox or models decoded with ``from_dict``."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import bizmsg
from bizmsg import _dataframes
from bizmsg.testing import Sandbox
from conftest import number_wire

pd = pytest.importorskip("pandas")

UTC_NS = "datetime64[ns, UTC]"
NUMBER_FIELDS = [f.name for f in dataclasses.fields(bizmsg.BusinessPhoneNumber)]
ACCOUNT_SCALARS = [f.name for f in dataclasses.fields(bizmsg.BusinessAccount)
                   if f.name != "business_phone_numbers"]


def number(**overrides: Any) -> bizmsg.BusinessPhoneNumber:
    wire = number_wire(**overrides)
    result: bizmsg.BusinessPhoneNumber = bizmsg.BusinessPhoneNumber.from_dict(wire)
    return result


def utc(*args: int) -> Any:
    return pd.Timestamp(datetime(*args, tzinfo=timezone.utc))  # type: ignore[misc]


# --- Page.to_pandas --------------------------------------------------------------------------


def test_a_page_of_numbers(client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=5)
    frame = page.to_pandas()
    assert list(frame.columns) == NUMBER_FIELDS
    assert len(frame) == 5
    assert list(frame["phone_number_id"]) == [n.phone_number_id for n in page]
    for column in ("create_time", "update_time"):
        assert str(frame[column].dtype) == UTC_NS
    # The same instants as the models, in UTC, and .dt works.
    assert list(frame["create_time"]) == [pd.Timestamp(n.create_time) for n in page]
    assert str(frame["create_time"].dt.tz) == "UTC"
    years = [n.create_time.year for n in page if n.create_time is not None]
    assert list(frame["create_time"].dt.year) == years and len(years) == 5
    assert (frame["update_time"] >= frame["create_time"]).all()
    assert page.to_pandas(explode=True).equals(frame)  # nothing nested to explode


def test_timestamps_in_every_offset_form_become_the_same_utc_instant() -> None:
    forms = ["2024-03-05T10:15:30.123+08:00", "2024-03-05T10:15:30.123+0800",
             "2024-03-05T02:15:30.123Z", "2024-03-04T21:15:30.123-0500"]
    frame = bizmsg.to_pandas([number(createTime=text) for text in forms])
    assert str(frame["create_time"].dtype) == UTC_NS
    assert set(frame["create_time"]) == {pd.Timestamp("2024-03-05T02:15:30.123Z")}


def test_unparseable_missing_and_out_of_range_timestamps_are_nat() -> None:
    numbers = [
        number(phoneNumberId="ok"),
        number(phoneNumberId="text", createTime="yesterday", updateTime=""),
        number(phoneNumberId="null", createTime=None, updateTime=None),
        number(phoneNumberId="year 2300", createTime="2300-01-01T00:00:00.000Z"),
    ]
    assert [n.create_time is None for n in numbers] == [False, True, True, False]
    frame = bizmsg.to_pandas(numbers)
    assert str(frame["create_time"].dtype) == UTC_NS
    assert str(frame["update_time"].dtype) == UTC_NS
    assert list(frame["create_time"].isna()) == [False, True, True, True]
    assert list(frame["update_time"].isna()) == [False, True, True, False]
    assert frame["create_time"][0] == utc(2024, 3, 5, 2, 15, 30, 123000)
    # A column of nothing but missing timestamps is still a timestamp column.
    none = bizmsg.to_pandas([numbers[1], numbers[2]])
    assert str(none["create_time"].dtype) == UTC_NS and none["create_time"].isna().all()


def test_a_page_of_accounts_has_one_row_per_account_with_a_count_and_ids(
    client: bizmsg.Client,
) -> None:
    page = client.business_accounts.list(page_size=3)
    frame = page.to_pandas()
    assert list(frame.columns) == [
        "biz_account_id", "name", "status", "business_verification_status",
        "account_review_status", "chat_business_manager_messaging_limit",
        "business_phone_numbers", "phone_number_ids", "create_time", "update_time",
    ]
    assert len(frame) == 3
    assert list(frame["biz_account_id"]) == [a.biz_account_id for a in page]
    assert list(frame["business_phone_numbers"]) == [len(a.business_phone_numbers) for a in page]
    assert str(frame["business_phone_numbers"].dtype) == "int64"
    assert list(frame["phone_number_ids"]) == [
        [n.phone_number_id for n in a.business_phone_numbers] for a in page
    ]
    assert str(frame["create_time"].dtype) == UTC_NS
    # The ids list explodes the pandas way too.
    numbers = sum(len(a.business_phone_numbers) for a in page)
    assert len(frame.explode("phone_number_ids")) == numbers


def test_explode_gives_one_row_per_account_and_number(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=3)
    frame = page.to_pandas(explode=True)
    assert list(frame.columns) == ACCOUNT_SCALARS + [f"number_{n}" for n in NUMBER_FIELDS]
    pairs = [(a, n) for a in page for n in a.business_phone_numbers]
    assert len(frame) == len(pairs)
    assert list(zip(frame["biz_account_id"], frame["number_phone_number_id"])) == [
        (a.biz_account_id, n.phone_number_id) for a, n in pairs
    ]
    assert list(frame["number_status"]) == [n.status for _, n in pairs]
    for column in ("create_time", "update_time", "number_create_time", "number_update_time"):
        assert str(frame[column].dtype) == UTC_NS
    assert list(frame["number_create_time"]) == [pd.Timestamp(n.create_time) for _, n in pairs]


def test_explode_keeps_an_account_without_numbers_as_one_empty_row() -> None:
    empty = bizmsg.BusinessAccount.from_dict(
        {"bizAccountId": "1", "name": "Empty", "businessPhoneNumbers": [],
         "createTime": "2024-03-05T10:15:30.123+0800"}
    )
    full = bizmsg.BusinessAccount.from_dict(
        {"bizAccountId": "2", "name": "Full",
         "businessPhoneNumbers": [number().to_dict(), number(phoneNumberId="3").to_dict()]}
    )
    frame = bizmsg.to_pandas([empty, full], explode=True)
    assert list(frame["biz_account_id"]) == ["1", "2", "2"]
    assert frame["number_phone_number_id"].isna().tolist() == [True, False, False]
    assert frame["number_create_time"].isna().tolist() == [True, False, False]
    assert str(frame["number_create_time"].dtype) == UTC_NS
    flat = bizmsg.to_pandas([empty, full])
    assert list(flat["business_phone_numbers"]) == [0, 2]
    assert list(flat["phone_number_ids"]) == [[], ["200000000000001", "3"]]


def test_to_records_stays_dicts_keyed_by_field_name(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=2)
    records = page.to_records()
    assert [list(r) for r in records] == [[f.name for f in dataclasses.fields(a)] for a in page]
    nested = records[0]["business_phone_numbers"]
    assert nested == [_dataframes.record(n) for n in page.data[0].business_phone_numbers]
    assert all(type(r) is dict for r in nested)
    assert isinstance(records[0]["create_time"], datetime)


# --- bizmsg.to_pandas ------------------------------------------------------------------------


def test_to_pandas_of_a_whole_listing(sandbox: Sandbox, client: bizmsg.Client) -> None:
    expected = [n for p in client.business_phone_numbers.iter_pages(page_size=4) for n in p]
    sandbox.clear_requests()
    frame = bizmsg.to_pandas(client.business_phone_numbers.iter(page_size=4))
    assert len(frame) == len(expected) > 4
    assert list(frame["phone_number_id"]) == [n.phone_number_id for n in expected]
    assert list(frame.columns) == NUMBER_FIELDS
    assert str(frame["create_time"].dtype) == UTC_NS
    assert len(sandbox.requests()) == -(-len(expected) // 4)  # every page, once
    # Pages, a list, a generator and a Page give the same frame.
    by_pages = bizmsg.to_pandas(client.business_phone_numbers.iter_pages(page_size=3))
    assert by_pages.equals(frame)
    assert bizmsg.to_pandas(expected).equals(frame)
    assert bizmsg.to_pandas(n for n in expected).equals(frame)
    page = client.business_phone_numbers.list(page_size=1000)
    assert bizmsg.to_pandas(page).equals(page.to_pandas())
    assert bizmsg.to_pandas(page).equals(frame)


def test_to_pandas_of_a_large_listing() -> None:
    with Sandbox(accounts_per_tenant=700, numbers_per_account=(3, 3)) as big, big.client() as c:
        frame = bizmsg.to_pandas(c.business_phone_numbers.iter(page_size=1000))
        accounts = bizmsg.to_pandas(c.business_accounts.iter(page_size=1000), explode=True)
    assert len(frame) == 2100 and frame["phone_number_id"].is_unique
    assert str(frame["create_time"].dtype) == UTC_NS and not frame["create_time"].isna().any()
    assert len(accounts) == 2100
    assert set(accounts["number_phone_number_id"]) == set(frame["phone_number_id"])


def test_to_pandas_of_nothing_is_an_empty_frame() -> None:
    frame = bizmsg.to_pandas([])
    assert isinstance(frame, pd.DataFrame) and frame.empty and len(frame.columns) == 0


def test_to_pandas_refuses_what_is_not_models() -> None:
    with pytest.raises(TypeError, match="bizmsg models"):
        bizmsg.to_pandas([{"phoneNumberId": "1"}])
    with pytest.raises(TypeError, match="iterable of bizmsg models"):
        bizmsg.to_pandas("abc")


async def test_to_pandas_of_an_async_iterator_says_to_collect_it(
    aclient: bizmsg.AsyncClient,
) -> None:
    items = aclient.business_phone_numbers.iter(page_size=5)
    with pytest.raises(TypeError, match="async for"):
        bizmsg.to_pandas(items)  # type: ignore[arg-type]
    collected = [n async for n in items]
    assert len(bizmsg.to_pandas(collected)) == len(collected) > 0


def test_a_clear_import_error_without_pandas(monkeypatch: pytest.MonkeyPatch,
                                             client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=2)
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an absent pandas looks like
    consumed: list[int] = []

    def numbers() -> Iterator[bizmsg.BusinessPhoneNumber]:
        consumed.append(1)
        yield from page

    with pytest.raises(ImportError, match=r"pip install 'bizmsg\[pandas\]'") as info:
        bizmsg.to_pandas(numbers())
    assert info.value.name == "pandas"
    assert "bizmsg.to_pandas()" in str(info.value)
    assert consumed == []  # nothing fetched in vain
    with pytest.raises(ImportError, match=r"Page.to_pandas\(\) needs pandas.*bizmsg\[pandas\]"):
        page.to_pandas()
    assert page.to_records()  # records need no pandas


# --- the generic helpers (for other results built on them) -----------------------------------


@dataclasses.dataclass(frozen=True)
class Outcome:
    to: str
    ok: bool
    sent_at: datetime | None
    attempts: int


def test_any_dataclass_gets_utc_timestamp_columns() -> None:
    outcomes = [
        Outcome("1", True, datetime(2024, 3, 5, 10, 15, 30, tzinfo=timezone(timedelta(hours=8))),
                1),
        Outcome("2", False, None, 3),
        Outcome("3", True, datetime(2024, 3, 5, 2, 15, 30), 1),  # naive: taken as UTC
    ]
    frame = _dataframes.models_to_frame(outcomes)
    assert list(frame.columns) == ["to", "ok", "sent_at", "attempts"]
    assert str(frame["sent_at"].dtype) == UTC_NS
    assert frame["sent_at"][0] == frame["sent_at"][2] == utc(2024, 3, 5, 2, 15, 30)
    assert pd.isna(frame["sent_at"][1])
    assert str(frame["ok"].dtype) == "bool" and str(frame["attempts"].dtype) == "int64"
    # Still a timestamp column when every value is missing (known from the annotation).
    assert str(_dataframes.models_to_frame([outcomes[1]])["sent_at"].dtype) == UTC_NS


def test_records_to_frame() -> None:
    records = [
        {"to": "1", "when": datetime(2024, 3, 5, 2, 15, 30, tzinfo=timezone.utc)},
        {"to": "2", "when": None, "error": "rejected"},  # a column that appears later
        {"to": "3", "declared": None},
    ]
    frame = _dataframes.records_to_frame(iter(records), datetime_columns=["declared"])
    assert list(frame.columns) == ["to", "when", "error", "declared"]
    assert str(frame["when"].dtype) == UTC_NS  # found from its values
    assert str(frame["declared"].dtype) == UTC_NS  # named
    assert frame["error"].isna().tolist() == [True, False, True]
    assert frame["when"].isna().tolist() == [False, True, True]


def test_records_to_frame_with_fixed_columns() -> None:
    columns = ["index", "status", "sent_at"]
    empty = _dataframes.records_to_frame([], columns=columns, datetime_columns=["sent_at"])
    assert list(empty.columns) == columns and len(empty) == 0
    assert str(empty["sent_at"].dtype) == UTC_NS
    rows = [{"status": "sent", "index": 0, "extra": 1, "sent_at": None},
            {"index": 1, "status": "failed"}]
    frame = _dataframes.records_to_frame(rows, columns=columns, datetime_columns=["sent_at"])
    assert list(frame.columns) == columns
    assert list(frame["index"]) == [0, 1] and list(frame["status"]) == ["sent", "failed"]
    assert frame["sent_at"].isna().all() and str(frame["sent_at"].dtype) == UTC_NS
