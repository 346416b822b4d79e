"""Listing accounts and numbers: the request, the page envelope, the models, ``raw=True`` and
``.meta``."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox

USER_AGENT = f"bizmsg-python/{bizmsg.__version__}"

ACCOUNT_FIELDS = {
    "biz_account_id": "bizAccountId",
    "name": "name",
    "status": "status",
    "business_verification_status": "businessVerificationStatus",
    "account_review_status": "accountReviewStatus",
    "chat_business_manager_messaging_limit": "chatBusinessManagerMessagingLimit",
}
NUMBER_FIELDS = {
    "biz_account_id": "bizAccountId",
    "phone_number_id": "phoneNumberId",
    "display_phone_number": "displayPhoneNumber",
    "verified_name": "verifiedName",
    "status": "status",
    "quality_rating": "qualityRating",
    "code_verification_status": "codeVerificationStatus",
    "throughput": "throughput",
    "messaging_limit_tier": "messagingLimitTier",
}


def parse_wire_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")


def check_number(number: bizmsg.BusinessPhoneNumber, wire: dict[str, Any]) -> None:
    assert type(number) is bizmsg.BusinessPhoneNumber
    for field, wire_name in NUMBER_FIELDS.items():
        assert getattr(number, field) == wire[wire_name], field
    for field, wire_name in (("create_time", "createTime"), ("update_time", "updateTime")):
        value = getattr(number, field)
        assert isinstance(value, datetime) and value.tzinfo is not None
        assert value == parse_wire_time(wire[wire_name])
        assert value.utcoffset() == parse_wire_time(wire[wire_name]).utcoffset()
    assert number.to_dict() == wire
    assert list(number.to_dict()) == list(wire)


def check_account(account: bizmsg.BusinessAccount, wire: dict[str, Any]) -> None:
    assert type(account) is bizmsg.BusinessAccount
    for field, wire_name in ACCOUNT_FIELDS.items():
        assert getattr(account, field) == wire[wire_name], field
    assert account.create_time == parse_wire_time(wire["createTime"])
    assert account.update_time == parse_wire_time(wire["updateTime"])
    assert isinstance(account.business_phone_numbers, list)
    assert len(account.business_phone_numbers) == len(wire["businessPhoneNumbers"]) >= 2
    for number, number_wire in zip(account.business_phone_numbers, wire["businessPhoneNumbers"]):
        check_number(number, number_wire)
        assert number.biz_account_id == account.biz_account_id
    assert account.to_dict() == wire
    assert list(account.to_dict()) == list(wire)


def check_envelope(page: bizmsg.Page[Any], wire: dict[str, Any],
                   page_class: type[bizmsg.Page[Any]] = bizmsg.Page) -> None:
    # A sync client's page is a Page; an async client's an AsyncPage (awaitable next_page).
    assert type(page) is page_class
    assert (page.total, page.size, page.current, page.pages) == (
        wire["total"], wire["size"], wire["current"], wire["pages"],
    )
    assert len(page) == len(page.data) == len(wire["data"])
    assert list(page) == page.data
    assert page.to_dict() == wire
    assert list(page.to_dict()) == ["data", "total", "size", "current", "pages"]


def test_list_accounts_request_and_page(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_no=2, page_size=1)
    [record] = sandbox.requests()
    assert record["method"] == "GET"
    assert record["path"] == "/v1/chat/businessAccounts"
    assert record["query"] == "pageNo=2&pageSize=1"
    headers = record["headers"]
    assert headers["authorization"] == f"Bearer {sandbox.token}"
    assert headers["user-agent"] == USER_AGENT
    assert headers["accept"] == "application/json"
    assert "idempotency-key" not in headers
    assert "content-type" not in headers
    assert record["body_text"] == ""
    assert record["status"] == 200

    wire = record["response_body"]
    assert (wire["total"], wire["size"], wire["current"], wire["pages"]) == (3, 1, 2, 3)
    check_envelope(page, wire)
    check_account(page.data[0], wire["data"][0])
    assert page.has_next_page() is True


def test_list_accounts_defaults_are_page_1_of_20(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_accounts.list()
    [record] = sandbox.requests()
    assert record["query"] == "pageNo=1&pageSize=20"
    assert (page.total, page.size, page.current, page.pages) == (3, 20, 1, 1)
    for account, wire in zip(page.data, record["response_body"]["data"]):
        check_account(account, wire)
    assert page.has_next_page() is False


def test_list_numbers_request_and_page(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_no=1, page_size=4)
    [record] = sandbox.requests()
    assert record["method"] == "GET"
    assert record["path"] == "/v1/chat/businessPhoneNumber"
    assert record["query"] == "pageNo=1&pageSize=4"
    assert record["headers"]["authorization"] == f"Bearer {sandbox.token}"
    assert record["headers"]["user-agent"] == USER_AGENT
    wire = record["response_body"]
    check_envelope(page, wire)
    assert page.size == 4 and page.current == 1
    assert page.pages == math.ceil(wire["total"] / 4)
    for number, number_wire in zip(page, wire["data"]):
        check_number(number, number_wire)


def test_accounts_nest_the_same_numbers_the_number_list_returns(client: bizmsg.Client) -> None:
    accounts = client.business_accounts.list(page_size=1000)
    numbers = client.business_phone_numbers.list(page_size=1000)
    nested = {n.phone_number_id: n for a in accounts for n in a.business_phone_numbers}
    assert set(nested) == {n.phone_number_id for n in numbers}
    for number in numbers:
        assert nested[number.phone_number_id] == number
    assert numbers.total == len(nested)


def test_raw_list_is_the_dict_exactly_as_sent(sandbox: Sandbox, client: bizmsg.Client) -> None:
    raw_accounts = client.business_accounts.list(page_size=2, raw=True)
    raw_numbers = client.business_phone_numbers.list(page_no=2, page_size=3, raw=True)
    first, second = sandbox.requests()
    for raw, record in ((raw_accounts, first), (raw_numbers, second)):
        assert type(raw) is dict
        assert raw == record["response_body"]
        # Same key order everywhere, as received (json.dumps keeps dict order).
        assert json.dumps(raw) == json.dumps(record["response_body"])
    assert isinstance(raw_accounts["data"][0]["businessPhoneNumbers"][0], dict)
    assert isinstance(raw_accounts["data"][0]["createTime"], str)
    assert second["query"] == "pageNo=2&pageSize=3"


def test_raw_list_keeps_what_the_model_does_not_know(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    body = {
        "data": [{"phoneNumberId": 5, "status": "BANNED", "extra": [1, 2.5, None]}],
        "total": "1",
        "pages": 1,
        "traceId": "t-1",
    }
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps(body))
    raw = client.business_phone_numbers.list(raw=True)
    assert raw == body
    assert json.dumps(raw) == json.dumps(body)


def test_list_meta(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=2)
    [record] = sandbox.requests()
    meta = page.meta
    assert isinstance(meta, bizmsg.ResponseMeta)
    assert meta.status_code == 200
    assert meta.request_id == record["request_id"]
    assert meta.attempts == 1
    assert meta.idempotency_key is None
    assert timedelta(0) < meta.elapsed < timedelta(seconds=5)
    # Items carry no call metadata of their own; the page does.
    assert page.data[0].meta is None


def test_page_meta_is_not_in_equality_or_repr(client: bizmsg.Client) -> None:
    first = client.business_accounts.list(page_size=2)
    second = client.business_accounts.list(page_size=2)
    assert first.meta is not None and second.meta is not None
    assert first.meta.request_id != second.meta.request_id
    assert first == second
    assert first.meta.request_id is not None and first.meta.request_id not in repr(first)
    assert "meta" not in repr(first)
    assert repr(first).startswith("Page(data=[BusinessAccount(biz_account_id=")


def test_paging_through_everything_matches_one_big_page(client: bizmsg.Client) -> None:
    everything = client.business_phone_numbers.list(page_size=1000)
    assert everything.pages == 1
    seen: list[str] = []
    page_no = 1
    while True:
        page = client.business_phone_numbers.list(page_no=page_no, page_size=3)
        assert page.current == page_no and page.size == 3
        assert page.total == everything.total
        seen.extend(n.phone_number_id for n in page)
        if not page.has_next_page():
            break
        page_no += 1
    assert page_no == page.pages == math.ceil(len(everything) / 3) >= 2
    assert seen == [n.phone_number_id for n in everything]


def test_a_page_beyond_the_last_is_empty(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_no=99, page_size=2)
    assert page.data == []
    assert len(page) == 0
    assert (page.total, page.size, page.current, page.pages) == (3, 2, 99, 2)
    assert page.has_next_page() is False


def test_empty_tenant_lists_are_empty_pages() -> None:
    with Sandbox(accounts_per_tenant=0) as sandbox, sandbox.client() as client:
        for page in (client.business_accounts.list(), client.business_phone_numbers.list()):
            assert page.data == []
            assert (page.total, page.size, page.current, page.pages) == (0, 20, 1, 0)
            assert page.has_next_page() is False


def test_largest_page_size_is_accepted(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=1000)
    assert sandbox.requests()[0]["query"] == "pageNo=1&pageSize=1000"
    assert page.size == 1000


def test_page_envelope_falls_back_to_the_request_when_the_service_omits_it(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    sandbox.inject(
        "business_phone_numbers",
        status=200,
        body=json.dumps({"data": [{"phoneNumberId": "p1"}, {"phoneNumberId": "p2"}]}),
    )
    page = client.business_phone_numbers.list(page_no=4, page_size=2)
    assert (page.total, page.size, page.current, page.pages) == (None, 2, 4, None)
    assert [n.phone_number_id for n in page] == ["p1", "p2"]
    # A full page without `pages` may have a successor.
    assert page.has_next_page() is True
    assert page.to_dict() == {"data": [{"phoneNumberId": "p1"}, {"phoneNumberId": "p2"}]}


async def test_async_list_accounts(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    page = await aclient.business_accounts.list(page_no=1, page_size=2)
    [record] = sandbox.requests()
    assert record["query"] == "pageNo=1&pageSize=2"
    assert record["headers"]["authorization"] == f"Bearer {sandbox.token}"
    assert record["headers"]["user-agent"] == USER_AGENT
    check_envelope(page, record["response_body"], bizmsg.AsyncPage)
    for account, wire in zip(page, record["response_body"]["data"]):
        check_account(account, wire)
    assert page.meta is not None and page.meta.request_id == record["request_id"]


async def test_async_list_numbers(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    page = await aclient.business_phone_numbers.list(page_no=2, page_size=2)
    [record] = sandbox.requests()
    assert record["path"] == "/v1/chat/businessPhoneNumber"
    assert record["query"] == "pageNo=2&pageSize=2"
    check_envelope(page, record["response_body"], bizmsg.AsyncPage)
    for number, wire in zip(page, record["response_body"]["data"]):
        check_number(number, wire)
    assert page.meta is not None and page.meta.attempts == 1


async def test_async_raw_lists(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    accounts = await aclient.business_accounts.list(raw=True)
    numbers = await aclient.business_phone_numbers.list(page_size=1, raw=True)
    first, second = sandbox.requests()
    assert type(accounts) is dict and type(numbers) is dict
    assert json.dumps(accounts) == json.dumps(first["response_body"])
    assert json.dumps(numbers) == json.dumps(second["response_body"])


@pytest.mark.parametrize("kind", ["business_accounts", "business_phone_numbers"])
def test_sync_and_async_pages_are_equal(
    sandbox: Sandbox, client: bizmsg.Client, kind: str
) -> None:
    import asyncio

    sync_page = getattr(client, kind).list(page_size=3)

    async def fetch() -> Any:
        async with sandbox.async_client() as aclient:
            return await getattr(aclient, kind).list(page_size=3)

    async_page = asyncio.run(fetch())
    assert sync_page == async_page
    assert sync_page.to_dict() == async_page.to_dict()


def test_raw_list_returns_items_the_models_would_refuse(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    """``raw=True`` checks the envelope only: an item the model refuses (here a
    ``phoneNumberId`` that is an object) comes back as received, where the typed list raises.
    A broken envelope is still refused."""
    body = {"data": [{"phoneNumberId": {"odd": True}}, {"x": 1}], "total": 2, "pages": 1}
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps(body), times=2)
    assert client.business_phone_numbers.list(raw=True) == body
    with pytest.raises(bizmsg.DecodeError):
        client.business_phone_numbers.list()
    sandbox.inject("business_phone_numbers", status=200, body='{"data": [1, 2]}')
    with pytest.raises(bizmsg.DecodeError, match="not a"):
        client.business_phone_numbers.list(raw=True, max_retries=0)


async def test_raw_async_list_returns_items_the_models_would_refuse(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient
) -> None:
    body = {"data": [{"bizAccountId": [1]}], "total": 1}
    sandbox.inject("business_accounts", status=200, body=json.dumps(body))
    assert await aclient.business_accounts.list(raw=True) == body


@pytest.mark.parametrize("body, says", [
    ("[]", r"expected a JSON object \(page\) from GET /v1/chat/businessPhoneNumber"),
    ('"text"', r"expected a JSON object \(page\)"),
    ("not json", r"did not answer JSON: expected ident at line 1 column 2 \(in a page\)"),
    ('{"data": [], "total": 1} trailing', r"trailing characters at line 1 column 26"),
    ('{"data": [{"a": }]}', r"expected value at line 1 column 17 \(in a JSON object\)"),
    ('{"data": {}}', r"page data is not an array"),
    ('{"data": [{"x": 1}, 2]}', r"page data holds something that is not a JSON object"),
    ('{"data": [{"x": 1}], "data": [1]}', r"not a JSON object"),
    ('{"d\\u0061ta": [1]}', r"not a JSON object"),
])
def test_a_raw_list_that_is_not_a_page_says_why(
    sandbox: Sandbox, client: bizmsg.Client, body: str, says: str
) -> None:
    """``raw=True`` builds the dict first and checks the envelope on it; a body that is not a
    page gets the same located explanation as before, when it is asked for."""
    sandbox.inject("business_phone_numbers", status=200, body=body)
    with pytest.raises(bizmsg.DecodeError, match=says):
        client.business_phone_numbers.list(raw=True, max_retries=0)


def test_a_raw_list_too_deep_to_build_says_why(sandbox: Sandbox, client: bizmsg.Client) -> None:
    """The envelope check skips items without building them, so a body it passes may still be
    one Python objects cannot be built from (nested deeper than jiter builds): jiter's own
    explanation is raised, not a vague one (found in review)."""
    deep = "[" * 199 + "]" * 199  # the check passes it (it counts depth per item); jiter not
    sandbox.inject("business_phone_numbers", status=200, body=f'{{"data": [{{"x": {deep}}}]}}')
    with pytest.raises(bizmsg.DecodeError, match="could not be read: recursion limit"):
        client.business_phone_numbers.list(raw=True, max_retries=0)


def test_a_raw_list_reads_repeated_keys_as_json_loads_does(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    """A key given twice counts once, the last time, as in ``json.loads``: the envelope is
    checked on the dict that is returned."""
    body = '{"data": [7], "total": 1, "data": [{"x": 1}], "total": 2}'
    sandbox.inject("business_phone_numbers", status=200, body=body)
    assert client.business_phone_numbers.list(raw=True) == json.loads(body)
    assert json.loads(body) == {"data": [{"x": 1}], "total": 2}


async def test_async_raw_list_errors_and_values_match_sync(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient
) -> None:
    sandbox.inject("business_phone_numbers", status=200, body='{"data": [1]}')
    with pytest.raises(bizmsg.DecodeError, match="not a JSON object"):
        await aclient.business_phone_numbers.list(raw=True, max_retries=0)
    body = '{"data": [], "pages": "3", "extra": {"k": [1, 2.5, null]}}'
    sandbox.inject("business_phone_numbers", status=200, body=body)
    assert await aclient.business_phone_numbers.list(raw=True) == json.loads(body)
