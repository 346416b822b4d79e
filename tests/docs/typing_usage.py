"""Typed usage of bizmsg's public API, for ``mypy --strict tests/docs/typing_usage.py`` (and
pyright). Not collected by pytest (no ``test_`` prefix); ``test_typing.py`` also runs
``main()`` against a sandbox, so every line here is known to work at run time too.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from typing import Any

import bizmsg
from bizmsg.models import BasePage
from bizmsg.testing import Fault, Sandbox


def on_retry(attempt: int, error: bizmsg.BizmsgError, delay: float) -> None:
    print(f"retry {attempt} after {type(error).__name__}, waiting {delay:.2f}s")


def token_provider() -> str:
    return "sandbox-token-acme"


async def async_token_provider() -> str:
    return "sandbox-token-acme"


def sync_usage(sandbox: Sandbox) -> list[str]:
    seen: list[str] = []
    client: bizmsg.Client = bizmsg.Client(
        token_provider,
        base_url=sandbox.base_url,
        timeout=bizmsg.Timeout(connect=5.0, read=10.0, total=30.0),
        max_retries=3,
        success_codes=["0"],
        default_headers={"X-Team": "billing"},
        on_retry=on_retry,
    )
    with client:
        accounts: bizmsg.Page[bizmsg.BusinessAccount] = client.business_accounts.list(
            page_no=1, page_size=20
        )
        account: bizmsg.BusinessAccount = accounts.data[0]
        numbers_of_account: list[bizmsg.BusinessPhoneNumber] = account.business_phone_numbers
        created: datetime | None = account.create_time
        total: int | None = accounts.total
        pages: int | None = accounts.pages
        size: int = accounts.size
        current: int = accounts.current
        more: bool = accounts.has_next_page()
        seen.append(f"{account.name} {len(numbers_of_account)} {created} {total} {pages} {size} {current} {more}")

        raw_accounts: dict[str, Any] = client.business_accounts.list(raw=True)
        seen.append(str(len(raw_accounts["data"])))

        numbers: bizmsg.Page[bizmsg.BusinessPhoneNumber] = client.business_phone_numbers.list(
            page_size=5, timeout=10.0, max_retries=0
        )
        first: bizmsg.BusinessPhoneNumber = numbers.data[0]
        display: str | None = first.display_phone_number
        quality: str | None = first.quality_rating
        for number in numbers:
            seen.append(number.phone_number_id)
        records: list[dict[str, Any]] = numbers.to_records()
        html: str = numbers._repr_html_()
        seen.append(f"{display} {quality} {len(records)} {len(html) > 0}")

        following: bizmsg.Page[bizmsg.BusinessPhoneNumber] | None = numbers.next_page()
        if following is not None:
            seen.append(str(following.current))

        every_number: Iterator[bizmsg.BusinessPhoneNumber] = client.business_phone_numbers.iter(
            page_size=100, limit=10
        )
        seen.extend(n.phone_number_id for n in every_number)
        for page in client.business_accounts.iter_pages(page_size=2):
            typed_page: bizmsg.Page[bizmsg.BusinessAccount] = page
            seen.append(str(typed_page.current))

        template = bizmsg.Template(name="order_update", parameters=["A-1042"], language="en-US")
        sender = display or ""
        result = client.messages.send(to="+86 138 0013 8000", from_=sender, template=template)
        ok: bool = result.ok
        sms_id: str | int | None = result.sms_id
        # A result a call returned always has its call's metadata (the README's
        # `result.meta.request_id` failed pyright --strict).
        meta: bizmsg.ResponseMeta = result.meta
        key: str | None = meta.idempotency_key
        elapsed: timedelta = meta.elapsed
        attempts: int = meta.attempts
        request_id: str | None = result.meta.request_id
        seen.append(f"{key} {elapsed} {attempts} {request_id} {meta.status_code}")
        seen.append(f"{ok} {sms_id}")
        # Plain SendResult is one that may be made by hand: its meta may be None.
        returned: bizmsg.SendResult = result
        made = bizmsg.SendResult(sms_id="s-1", status="ACCEPTED", code="0", msg=None)
        maybe: bizmsg.ResponseMeta | None = made.meta
        assert maybe is None and returned.meta is not None

        raw_result: dict[str, Any] = client.messages.send_template(
            to="8613800138000", from_=sender, name="order_update",
            parameters={"order": "A-1042"}, language="en_US", raw=True,
        )
        seen.append(str(raw_result["smsId"]))

        changed: bizmsg.SendResult = dataclasses.replace(result, msg="changed")
        as_dict: dict[str, Any] = changed.to_dict()
        again: bizmsg.SendResult = bizmsg.SendResult.from_dict(as_dict)
        seen.append(str(again == changed))

        message = bizmsg.Message(to="8613800138000", from_=sender, template=template)
        keyed: bizmsg.Message = dataclasses.replace(message, idempotency_key="k-1")
        message_to: str = keyed.to
        message_key: str | None = keyed.idempotency_key
        message_template: bizmsg.Template = keyed.template
        bulk = client.messages.send_many([keyed], stop_on_sigterm=True)
        outcome_statuses: list[str] = [o.status for o in bulk]
        first_outcome: bizmsg.SendOutcome = bulk[0]
        window: list[bizmsg.SendOutcome] = bulk[0:1]
        assert first_outcome is window[0] and len(bulk) == 1
        seen.append(f"{message_to} {message_key} {message_template.name} {outcome_statuses}")

        match result:
            case bizmsg.SendResult(code="0", sms_id=str() as matched):
                seen.append(matched)
            case _:
                pass

        sandbox.inject("send", Fault(cut_connection=True))
        try:
            client.messages.send(to="8613800138000", from_=sender, template=template)
        except bizmsg.SendOutcomeUnknownError as unknown:
            resent: bizmsg.SendResult = client.messages.send(
                to=unknown.to, from_=sender, template=template,
                idempotency_key=unknown.idempotency_key,
            )
            seen.append(f"{unknown.template_name} {resent.sms_id}")

        try:
            client.messages.send_template(to="8613800138000", from_="14155550100",
                                          name="n", parameters="p", language="en")
        except bizmsg.SendRejectedError as rejected:
            rejected_result: bizmsg.SendResult = rejected.result
            code: str | int | None = rejected.code
            seen.append(f"{code} {rejected_result.ok} {rejected.msg}")

        sandbox.inject("business_accounts", status=429, headers={"Retry-After": "0"}, times=4)
        try:
            client.with_options(max_retries=0).business_accounts.list()
        except bizmsg.RateLimitError as limited:
            retry_after: float | None = limited.retry_after
            status: int = limited.status_code
            body: Any = limited.body
            seen.append(f"{retry_after} {status} {body} {limited.request_id}")
        except bizmsg.APIError as api:
            seen.append(api.method + api.url)
        sandbox.clear_faults()

        try:
            client.business_accounts.list(page_size=5000)
        except bizmsg.ValidationError as invalid:
            field: str | None = invalid.field
            seen.append(f"{field}")
    return seen


async def async_usage(sandbox: Sandbox) -> list[str]:
    seen: list[str] = []
    async with bizmsg.AsyncClient(async_token_provider, base_url=sandbox.base_url) as refreshing:
        seen.append(str(len(await refreshing.business_accounts.list())))
    async with bizmsg.AsyncClient(sandbox.token, base_url=sandbox.base_url) as client:
        page: bizmsg.AsyncPage[bizmsg.BusinessAccount] = await client.business_accounts.list()
        raw: dict[str, Any] = await client.business_phone_numbers.list(raw=True)
        seen.append(f"{len(page)} {len(raw['data'])}")
        numbers: AsyncIterator[bizmsg.BusinessPhoneNumber] = client.business_phone_numbers.iter(
            limit=3
        )
        async for number in numbers:
            seen.append(number.phone_number_id)
        async for numbers_page in client.business_phone_numbers.iter_pages(page_size=4):
            typed: bizmsg.AsyncPage[bizmsg.BusinessPhoneNumber] = numbers_page
            # Either kind of page, where only its data and envelope matter.
            either: BasePage[bizmsg.BusinessPhoneNumber] = typed
            seen.append(str(either.current))
        following: bizmsg.AsyncPage[bizmsg.BusinessAccount] | None = await page.next_page_async()
        seen.append(str(following))
        # A page of an AsyncClient pages with `await` (never blocking the loop).
        async_page: bizmsg.AsyncPage[bizmsg.BusinessAccount] = await client.business_accounts.list(
            page_size=1
        )
        awaited: bizmsg.AsyncPage[bizmsg.BusinessAccount] | None = await async_page.next_page()
        seen.append(str(awaited))
        sender = page.data[0].business_phone_numbers[0].display_phone_number or ""
        result: bizmsg.SendResult = await client.messages.send_template(
            to="8613800138000", from_=sender, name="n", parameters=["a", "b"], language="en"
        )
        raw_result: dict[str, Any] = await client.messages.send(
            to="8613800138000", from_=sender,
            template=bizmsg.Template(name="n", parameters="p", language="en"), raw=True,
        )
        seen.append(f"{result.sms_id} {raw_result['smsId']}")
        faster: bizmsg.AsyncClient = client.with_options(timeout=5.0, max_retries=1)
        seen.append(repr(faster))
    return seen


def main() -> tuple[list[str], list[str]]:
    with Sandbox(seed=0) as sandbox:
        return sync_usage(sandbox), asyncio.run(async_usage(sandbox))


if __name__ == "__main__":
    for line in main()[0]:
        print(line)
