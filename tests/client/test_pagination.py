"""Pagination: ``iter``/``iter_pages`` (sync and async), ``Page.next_page``, reading one page
ahead in Rust, and the stop rules."""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from typing import Any

import pytest

import bizmsg
from bizmsg.models import BasePage
from bizmsg.testing import Sandbox

NOW = {"Retry-After": "0"}


def queries(sandbox: Sandbox, path_end: str = "") -> list[str]:
    return [r["query"] for r in sandbox.requests() if r["path"].endswith(path_end)]


def wait_for_requests(sandbox: Sandbox, count: int, timeout: float = 3.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(sandbox.requests()) >= count:
            break
        time.sleep(0.01)
    return len(sandbox.requests())


def number(i: int) -> dict[str, Any]:
    return {"phoneNumberId": f"p{i}", "status": "CONNECTED"}


# --- iter ------------------------------------------------------------------------------------


def test_iter_yields_every_item_across_pages(sandbox: Sandbox, client: bizmsg.Client) -> None:
    everything = client.business_phone_numbers.list(page_size=1000)
    sandbox.clear_requests()
    items = list(client.business_phone_numbers.iter(page_size=2))
    assert items == everything.data
    assert all(type(i) is bizmsg.BusinessPhoneNumber for i in items)
    pages = -(-len(everything) // 2)
    assert queries(sandbox) == [f"pageNo={n}&pageSize=2" for n in range(1, pages + 1)]


def test_iter_accounts_keeps_nested_numbers(client: bizmsg.Client) -> None:
    accounts = list(client.business_accounts.iter(page_size=1))
    assert [a.name for a in accounts] == ["Acme Support", "Acme Sales", "Acme Store"]
    assert all(type(n) is bizmsg.BusinessPhoneNumber for a in accounts for n in a.business_phone_numbers)


def test_iter_default_page_size_is_100(sandbox: Sandbox, client: bizmsg.Client) -> None:
    assert len(list(client.business_accounts.iter())) == 3
    assert queries(sandbox) == ["pageNo=1&pageSize=100"]


def test_limit_caps_items_and_page_size_is_only_the_request_size(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    items = list(client.business_phone_numbers.iter(page_size=2, limit=5))
    assert len(items) == 5
    # 5 items need 3 pages of 2; no page is fetched past the limit.
    assert queries(sandbox) == ["pageNo=1&pageSize=2", "pageNo=2&pageSize=2", "pageNo=3&pageSize=2"]
    sandbox.clear_requests()
    assert len(list(client.business_phone_numbers.iter(page_size=1000, limit=2))) == 2
    assert queries(sandbox) == ["pageNo=1&pageSize=1000"]


def test_limit_zero_and_limit_beyond_the_total(sandbox: Sandbox, client: bizmsg.Client) -> None:
    assert list(client.business_accounts.iter(limit=0)) == []
    assert sandbox.requests() == []
    assert len(list(client.business_accounts.iter(page_size=2, limit=50))) == 3


@pytest.mark.parametrize("limit", [-1, 1.5, "2", True])
def test_limit_is_validated(sandbox: Sandbox, client: bizmsg.Client, limit: object) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        list(client.business_accounts.iter(limit=limit))  # type: ignore[arg-type]
    assert caught.value.field == "limit"
    assert sandbox.requests() == []


def test_iter_is_lazy(sandbox: Sandbox, client: bizmsg.Client) -> None:
    iterator = client.business_accounts.iter(page_size=1)
    time.sleep(0.1)
    assert sandbox.requests() == []
    first = next(iterator)
    assert first.name == "Acme Support"


def test_iter_validates_its_arguments(sandbox: Sandbox, client: bizmsg.Client) -> None:
    for page_size in (0, -5, True):
        with pytest.raises(bizmsg.ValidationError) as caught:
            list(client.business_accounts.iter(page_size=page_size))
        assert caught.value.field == "page_size"
    assert sandbox.requests() == []


def test_iters_page_size_over_the_maximum_asks_for_the_maximum(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    """``iter()``'s page size only sizes its requests: over the service's 1000 it asks for 1000;
    ``list()`` stays strict, its page size is what a page holds."""
    assert len(list(client.business_accounts.iter(page_size=5000))) == 3
    assert queries(sandbox) == ["pageNo=1&pageSize=1000"]
    with pytest.raises(bizmsg.ValidationError):
        client.business_accounts.list(page_size=5000)


def test_a_large_listing_is_walked_completely() -> None:
    with Sandbox(tenants=["big"], accounts_per_tenant=50, numbers_per_account=(100, 100)) as sandbox:
        with sandbox.client() as client:
            ids = [n.phone_number_id for n in client.business_phone_numbers.iter(page_size=1000)]
    assert len(ids) == 5000 == len(set(ids))
    assert len(sandbox.requests()) == 5


# --- iter_pages and read-ahead -----------------------------------------------------------------


def test_iter_pages(sandbox: Sandbox, client: bizmsg.Client) -> None:
    pages = list(client.business_accounts.iter_pages(page_size=2))
    assert [p.current for p in pages] == [1, 2]
    assert [len(p) for p in pages] == [2, 1]
    assert all(type(p) is bizmsg.Page for p in pages)
    records = sandbox.requests()
    assert [p.meta.request_id for p in pages if p.meta] == [r["request_id"] for r in records]
    assert pages[0].to_dict() == records[0]["response_body"]


def test_iter_pages_from_a_later_page(sandbox: Sandbox, client: bizmsg.Client) -> None:
    pages = list(client.business_accounts.iter_pages(page_size=1, page_no=2))
    assert [p.current for p in pages] == [2, 3]
    assert queries(sandbox) == ["pageNo=2&pageSize=1", "pageNo=3&pageSize=1"]


def test_the_next_page_is_fetched_while_the_current_one_is_consumed(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    pages = client.business_phone_numbers.iter_pages(page_size=2)
    first = next(pages)
    assert first.current == 1
    # Page 2 is requested in the background, without the caller asking...
    assert wait_for_requests(sandbox, 2) == 2
    assert queries(sandbox)[1] == "pageNo=2&pageSize=2"
    # ... and never more than one page ahead.
    time.sleep(0.2)
    assert len(sandbox.requests()) == 2
    second = next(pages)
    assert second.current == 2
    assert wait_for_requests(sandbox, 3) == 3
    time.sleep(0.1)
    assert len(sandbox.requests()) == 3


def test_read_ahead_overlaps_the_callers_work(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.delay = 0.3
    started = time.monotonic()
    count = 0
    for page in client.business_accounts.iter_pages(page_size=1):
        count += 1
        time.sleep(0.3)  # the caller's own work on this page
    elapsed = time.monotonic() - started
    assert count == 3
    # Sequential would be 3 x (0.3 fetch + 0.3 work) = 1.8 s; overlapped about 1.2 s.
    assert elapsed < 1.55
    assert len(sandbox.requests()) == 3


def test_breaking_out_of_iter_stops_fetching(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.delay = 0.2
    for _ in client.business_phone_numbers.iter(page_size=1):
        break
    time.sleep(0.5)
    # The read-ahead of page 2 may have been sent; nothing after it.
    assert len(sandbox.requests()) <= 2


def test_errors_during_iteration_reach_the_caller(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.inject("business_accounts", status=200, body=json.dumps(
        {"data": [{"bizAccountId": "a1"}], "total": 3, "size": 1, "current": 1, "pages": 3}))
    sandbox.inject("business_accounts", status=404)
    seen = []
    with pytest.raises(bizmsg.NotFoundError):
        for account in client.business_accounts.iter(page_size=1):
            seen.append(account.biz_account_id)
    assert seen == ["a1"]


def test_iteration_retries_like_list_does(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.inject("business_phone_numbers", status=503, headers=NOW, times=2)
    items = list(client.business_phone_numbers.iter(page_size=1000))
    assert len(items) == client.business_phone_numbers.list(page_size=1000).total
    assert [r["status"] for r in sandbox.requests()][:3] == [503, 503, 200]
    sandbox.inject("business_phone_numbers", status=503, headers=NOW)
    with pytest.raises(bizmsg.ServerError):
        list(client.business_phone_numbers.iter(max_retries=0))


# --- stop rules ------------------------------------------------------------------------------


def test_stops_when_the_service_omits_pages_at_a_short_page(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    for body in ({"data": [number(1), number(2)]}, {"data": [number(3), number(4)]},
                 {"data": [number(5)]}):
        sandbox.inject("business_phone_numbers", status=200, body=json.dumps(body))
    ids = [n.phone_number_id for n in client.business_phone_numbers.iter(page_size=2)]
    assert ids == ["p1", "p2", "p3", "p4", "p5"]
    assert len(sandbox.requests()) == 3


def test_stops_at_an_empty_page(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps({"data": [number(1), number(2)]}))
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps({"data": [], "pages": 9}))
    assert len(list(client.business_phone_numbers.iter(page_size=2))) == 2
    assert len(sandbox.requests()) == 2


def test_stops_when_current_reaches_pages(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps(
        {"data": [number(1), number(2)], "total": 99, "size": 2, "current": 1, "pages": 1}))
    assert len(list(client.business_phone_numbers.iter(page_size=2))) == 2
    time.sleep(0.1)
    assert len(sandbox.requests()) == 1


def test_a_service_repeating_the_same_page_is_an_error(sandbox: Sandbox, client: bizmsg.Client) -> None:
    same = json.dumps({"data": [number(1), number(2)]})
    for _ in range(5):
        sandbox.inject("business_phone_numbers", status=200, body=same)
    with pytest.raises(bizmsg.PaginationError) as caught:
        list(client.business_phone_numbers.iter(page_size=2))
    assert isinstance(caught.value, bizmsg.BizmsgError)
    assert "repeat" in str(caught.value)
    assert len(sandbox.requests()) == 2
    sandbox.clear_faults()


def test_a_service_answering_another_page_is_an_error(sandbox: Sandbox, client: bizmsg.Client) -> None:
    for _ in range(3):
        sandbox.inject("business_phone_numbers", status=200, body=json.dumps(
            {"data": [number(1), number(2)], "total": 6, "size": 2, "current": 1, "pages": 3}))
    with pytest.raises(bizmsg.PaginationError, match="asked for page 2"):
        list(client.business_phone_numbers.iter_pages(page_size=2))
    sandbox.clear_faults()


# --- Page.next_page --------------------------------------------------------------------------


def test_next_page(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=1)
    names = [page.data[0].name]
    while (following := page.next_page()) is not None:
        page = following
        names.append(page.data[0].name)
    assert names == ["Acme Support", "Acme Sales", "Acme Store"]
    assert queries(sandbox) == ["pageNo=1&pageSize=1", "pageNo=2&pageSize=1", "pageNo=3&pageSize=1"]
    assert page.has_next_page() is False and page.next_page() is None
    assert len(sandbox.requests()) == 3


def test_next_page_keeps_the_call_options(sandbox: Sandbox, client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=2, max_retries=0)
    sandbox.inject("business_phone_numbers", status=503, headers=NOW)
    with pytest.raises(bizmsg.ServerError):
        page.next_page()
    second = page.next_page()
    assert second is not None and second.current == 2 and second.size == 2


def test_next_page_of_a_page_not_fetched_by_a_client(client: bizmsg.Client) -> None:
    page = bizmsg.Page.from_dict({"data": [number(1)], "total": 5, "size": 1, "current": 1, "pages": 5})
    with pytest.raises(bizmsg.BizmsgError, match="not fetched by a client"):
        page.next_page()
    fetched = client.business_accounts.list(page_size=1)
    with pytest.raises(bizmsg.BizmsgError):
        pickle.loads(pickle.dumps(fetched)).next_page()


def test_next_page_after_the_client_closed(sandbox: Sandbox) -> None:
    client = sandbox.client()
    page = client.business_accounts.list(page_size=1)
    client.close()
    with pytest.raises(bizmsg.ClientClosedError):
        page.next_page()


# --- async -----------------------------------------------------------------------------------


async def test_async_iter(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    ids = [n.phone_number_id async for n in aclient.business_phone_numbers.iter(page_size=3)]
    with sandbox.client() as client:
        assert ids == [n.phone_number_id for n in client.business_phone_numbers.list(page_size=1000)]
    names = [a.name async for a in aclient.business_accounts.iter(page_size=2, limit=2)]
    assert names == ["Acme Support", "Acme Sales"]


async def test_async_iter_pages_reads_ahead(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    import asyncio

    pages = aclient.business_accounts.iter_pages(page_size=1)
    first = await pages.__anext__()
    assert first.current == 1
    for _ in range(100):
        if len(sandbox.requests()) >= 2:
            break
        await asyncio.sleep(0.01)
    assert queries(sandbox) == ["pageNo=1&pageSize=1", "pageNo=2&pageSize=1"]
    rest = [p.current async for p in pages]
    assert rest == [2, 3]


async def test_async_next_page(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    page = await aclient.business_accounts.list(page_size=2)
    following = await page.next_page_async()
    assert following is not None and following.current == 2 and len(following) == 1
    assert await following.next_page_async() is None
    assert queries(sandbox) == ["pageNo=1&pageSize=2", "pageNo=2&pageSize=2"]


async def test_async_pagination_error(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    same = json.dumps({"data": [number(1)]})
    for _ in range(3):
        sandbox.inject("business_phone_numbers", status=200, body=same)
    with pytest.raises(bizmsg.PaginationError):
        async for _ in aclient.business_phone_numbers.iter(page_size=1):
            pass
    sandbox.clear_faults()


async def test_async_iteration_with_an_async_token_callable(sandbox: Sandbox) -> None:
    async def provider() -> str:
        return sandbox.token

    async with bizmsg.AsyncClient(provider, base_url=sandbox.base_url) as client:
        pages = [p.current async for p in client.business_accounts.iter_pages(page_size=1)]
    assert pages == [1, 2, 3]


def test_sync_iteration_with_a_token_callable(sandbox: Sandbox) -> None:
    calls: list[int] = []

    def provider() -> str:
        calls.append(1)
        return sandbox.token

    with bizmsg.Client(provider, base_url=sandbox.base_url) as client:
        pages = [p.current for p in client.business_accounts.iter_pages(page_size=1)]
    assert pages == [1, 2, 3]
    assert len(calls) == 3


# --- pandas ----------------------------------------------------------------------------------


def test_to_pandas(client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=3)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"bizmsg\[pandas\]"):
            page.to_pandas()
    else:
        frame = page.to_pandas()
        assert list(frame.columns) == list(page.to_records()[0])
        assert len(frame) == 3
        assert list(frame["phone_number_id"]) == [n.phone_number_id for n in page]


async def test_a_page_of_an_async_client_pages_with_await(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient
) -> None:
    # Regression: `await page.next_page()` raised TypeError (the page's next_page was the sync
    # one) and a plain next_page() blocked the event loop while it fetched.
    sandbox.delay = 0.2
    first = await aclient.business_phone_numbers.list(page_size=2)
    # Siblings over one base: an AsyncPage is no Page (whose next_page() returns a page), but
    # equal to a Page of the same data.
    assert isinstance(first, bizmsg.AsyncPage) and not isinstance(first, bizmsg.Page)
    assert isinstance(first, BasePage)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    second = await first.next_page()
    ticking.cancel()
    assert second is not None and isinstance(second, bizmsg.AsyncPage)
    assert second.current == 2 and second.data != first.data
    # The loop kept running during the 0.2 s fetch.
    assert ticks >= 5
    again = await first.next_page_async()
    assert again is not None and again.data == second.data
    async for page in aclient.business_phone_numbers.iter_pages(page_size=2):
        assert isinstance(page, bizmsg.AsyncPage)
        break


def test_a_page_of_a_sync_client_keeps_its_sync_next_page(client: bizmsg.Client) -> None:
    first = client.business_phone_numbers.list(page_size=2)
    assert type(first) is bizmsg.Page
    second = first.next_page()
    assert type(second) is bizmsg.Page and second.current == 2
