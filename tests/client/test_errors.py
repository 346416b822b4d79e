"""Every exception class of ``bizmsg.errors``, each reached through a real scenario."""

from __future__ import annotations

import builtins
import json
import time
from pathlib import Path
from typing import Any

import pytest

import bizmsg
import bizmsg.errors
from bizmsg.testing import Sandbox
from conftest import Number, committed

LIST_URL = "/v1/chat/businessAccounts?pageNo=1&pageSize=20"


def test_hierarchy() -> None:
    e = bizmsg
    for cls in (e.ConfigurationError, e.ValidationError, e.ClientClosedError, e.TransportError,
                e.APIError, e.DecodeError, e.SendRejectedError, e.InternalError):
        assert issubclass(cls, e.BizmsgError)
    for cls in (e.ConnectError, e.TimeoutError, e.ConnectionBrokenError, e.SendOutcomeUnknownError):
        assert issubclass(cls, e.TransportError)
    for cls in (e.BadRequestError, e.AuthenticationError, e.PermissionDeniedError,
                e.NotFoundError, e.ConflictError, e.RateLimitError, e.ServerError):
        assert issubclass(cls, e.APIError)
    assert issubclass(e.ValidationError, ValueError)
    assert issubclass(e.TimeoutError, builtins.TimeoutError)
    assert e.TimeoutError is not builtins.TimeoutError
    assert set(bizmsg.errors.__all__) <= set(bizmsg.__all__)
    for name in bizmsg.errors.__all__:
        assert getattr(bizmsg, name) is getattr(bizmsg.errors, name)


# --- ConfigurationError / ValidationError / ClientClosedError ---------------------------------


def test_configuration_error_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIZMSG_TOKEN", raising=False)
    monkeypatch.delenv("BIZMSG_BASE_URL", raising=False)
    with pytest.raises(bizmsg.ConfigurationError) as both:
        bizmsg.Client()
    assert "token" in str(both.value) and "BIZMSG_TOKEN" in str(both.value)
    assert "base URL" in str(both.value) and "BIZMSG_BASE_URL" in str(both.value)
    with pytest.raises(bizmsg.ConfigurationError) as token_only:
        bizmsg.Client(base_url="https://api.example.com")
    assert "BIZMSG_TOKEN" in str(token_only.value)
    assert "BIZMSG_BASE_URL" not in str(token_only.value)
    with pytest.raises(bizmsg.ConfigurationError) as url_only:
        bizmsg.AsyncClient("tok")
    assert "BIZMSG_BASE_URL" in str(url_only.value)
    assert "BIZMSG_TOKEN" not in str(url_only.value)


def test_validation_error_is_a_value_error_naming_the_field(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    with pytest.raises(ValueError) as caught:
        client.messages.send_template(
            to="12-34", from_="14155550100", name="n", parameters="p", language="en"
        )
    error = caught.value
    assert type(error) is bizmsg.ValidationError
    assert error.field == "to"
    assert '"12-34"' in str(error)
    assert sandbox.requests() == []


def test_client_closed_error(sandbox: Sandbox, sender: Number) -> None:
    client = sandbox.client()
    assert client.is_closed is False
    client.business_accounts.list()
    derived = client.with_options(max_retries=0)
    client.close()
    assert client.is_closed is True and derived.is_closed is True
    with pytest.raises(bizmsg.ClientClosedError, match="closed"):
        client.business_accounts.list()
    with pytest.raises(bizmsg.ClientClosedError):
        client.business_phone_numbers.list()
    with pytest.raises(bizmsg.ClientClosedError):
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    with pytest.raises(bizmsg.ClientClosedError):
        derived.business_accounts.list()
    client.close()  # idempotent
    assert len(sandbox.requests()) == 1


def test_with_block_closes(sandbox: Sandbox) -> None:
    with sandbox.client() as client:
        client.business_accounts.list()
    with pytest.raises(bizmsg.ClientClosedError):
        client.business_accounts.list()


async def test_async_client_closed_error(sandbox: Sandbox, sender: Number) -> None:
    async with sandbox.async_client() as client:
        await client.business_accounts.list()
    assert client.is_closed
    with pytest.raises(bizmsg.ClientClosedError):
        await client.business_accounts.list()
    other = sandbox.async_client()
    await other.aclose()
    with pytest.raises(bizmsg.ClientClosedError):
        await other.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert len(sandbox.requests()) == 1


# --- APIError and its subclasses --------------------------------------------------------------


def test_authentication_error_from_a_bad_token(sandbox: Sandbox) -> None:
    with bizmsg.Client("not-a-sandbox-token", base_url=sandbox.base_url) as client:
        with pytest.raises(bizmsg.AuthenticationError) as caught:
            client.business_phone_numbers.list(page_size=5)
    error = caught.value
    [record] = sandbox.requests()  # 401 is not retried
    assert record["status"] == 401
    assert record["headers"]["authorization"] == "Bearer not-a-sandbox-token"
    assert error.status_code == 401
    assert error.method == "GET"
    assert error.url == f"{sandbox.base_url}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=5"
    assert error.body == {
        "code": "401",
        "msg": 'unknown bearer token; sandbox tokens look like "sandbox-token-<tenant>"',
    }
    assert error.body == record["response_body"]
    assert error.request_id == record["request_id"]
    assert str(error) == (
        f"GET {error.url} returned 401: unknown bearer token; sandbox tokens look like "
        f'"sandbox-token-<tenant>" (request id {record["request_id"]})'
    )
    assert "not-a-sandbox-token" not in str(error) + repr(error)


async def test_async_authentication_error_on_send(sandbox: Sandbox, sender: Number) -> None:
    async with bizmsg.AsyncClient("nope", base_url=sandbox.base_url) as client:
        with pytest.raises(bizmsg.AuthenticationError) as caught:
            await client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    assert caught.value.method == "POST"
    assert caught.value.url == f"{sandbox.base_url}/v1/chat/messages/send"
    assert caught.value.request_id == sandbox.sent_messages()[0]["request_id"]
    assert committed(sandbox) == []


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, bizmsg.BadRequestError),
        (403, bizmsg.PermissionDeniedError),
        (404, bizmsg.NotFoundError),
        (409, bizmsg.ConflictError),
        (429, bizmsg.RateLimitError),
        (418, bizmsg.APIError),
        (500, bizmsg.ServerError),
        (502, bizmsg.ServerError),
        (503, bizmsg.ServerError),
        (504, bizmsg.ServerError),
    ],
)
def test_status_codes_map_to_classes(
    sandbox: Sandbox, status: int, cls: type[bizmsg.APIError]
) -> None:
    sandbox.inject("business_accounts", status=status, body=json.dumps({"code": str(status), "msg": "boom"}))
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.APIError) as caught:
            client.business_accounts.list()
    error = caught.value
    assert type(error) is cls
    [record] = sandbox.requests()
    assert error.status_code == status
    assert error.method == "GET"
    assert error.url == sandbox.base_url + LIST_URL
    assert error.body == {"code": str(status), "msg": "boom"}
    assert error.request_id == record["request_id"]
    assert f"returned {status}: boom" in str(error)


def test_sandbox_404_for_a_base_url_with_a_wrong_prefix(sandbox: Sandbox) -> None:
    with bizmsg.Client(sandbox.token, base_url=sandbox.base_url + "/api") as client:
        with pytest.raises(bizmsg.NotFoundError) as caught:
            client.business_accounts.list()
    [record] = sandbox.requests()
    assert record["path"] == "/api/v1/chat/businessAccounts"
    assert caught.value.body == {"code": "404", "msg": "no route for GET /api/v1/chat/businessAccounts"}


def test_a_base_url_ending_in_v1_is_told_that_bizmsg_adds_it(sandbox: Sandbox) -> None:
    """The most common 404 from a working service: /v1 given twice."""
    with bizmsg.Client(sandbox.token, base_url=sandbox.base_url + "/v1") as client:
        with pytest.raises(bizmsg.NotFoundError) as caught:
            client.business_accounts.list()
    assert "/v1/v1/" in str(caught.value)
    assert "bizmsg adds /v1 to base_url itself" in str(caught.value)


def test_error_body_that_is_not_json_is_text(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("business_accounts", status=502, body="<html>Bad Gateway</html>",
                   headers={"Content-Type": "text/html"})
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.ServerError) as caught:
            client.business_accounts.list()
        assert caught.value.body == "<html>Bad Gateway</html>"
        assert caught.value.status_code == 502
        assert "Bad Gateway" in str(caught.value)
        # On a send, a 502 may follow processing: the same error is the unknown outcome's cause.
        sandbox.inject("send", status=502, body="<html>Bad Gateway</html>",
                       headers={"Content-Type": "text/html"})
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as unknown:
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    cause = unknown.value.__cause__
    assert isinstance(cause, bizmsg.ServerError) and cause.body == "<html>Bad Gateway</html>"
    assert committed(sandbox) == []


@pytest.mark.parametrize(("header", "expected"), [("7", 7.0), ("0.5", 0.5), (None, None)])
def test_rate_limit_error_carries_retry_after(
    sandbox: Sandbox, header: str | None, expected: float | None
) -> None:
    headers = {} if header is None else {"Retry-After": header}
    sandbox.inject("business_phone_numbers", status=429, headers=headers)
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.RateLimitError) as caught:
            client.business_phone_numbers.list()
    assert caught.value.retry_after == expected
    assert caught.value.body == {"code": "429", "msg": "injected fault"}


def test_rate_limit_retry_after_as_an_http_date(sandbox: Sandbox) -> None:
    from email.utils import formatdate

    sandbox.inject("business_accounts", status=429,
                   headers={"Retry-After": formatdate(time.time() + 30, usegmt=True)})
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.RateLimitError) as caught:
            client.business_accounts.list()
    assert caught.value.retry_after is not None
    assert 28.0 <= caught.value.retry_after <= 30.0


def test_redirects_are_not_followed(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", status=307, headers={"Location": sandbox.base_url + "/elsewhere"}, body="")
    with sandbox.client(max_retries=2) as client:
        with pytest.raises(bizmsg.APIError) as caught:
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    assert type(caught.value) is bizmsg.APIError
    assert caught.value.status_code == 307
    assert caught.value.body == ""
    assert len(sandbox.requests()) == 1  # neither followed nor retried


def test_any_2xx_is_a_success(sandbox: Sandbox, client: bizmsg.Client, sender: Number) -> None:
    sandbox.inject("send", status=202, body='{"smsId": "q-1", "status": "QUEUED", "code": "0", "msg": "queued"}')
    result = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
    )
    assert (result.sms_id, result.status) == ("q-1", "QUEUED")
    assert result.meta is not None and result.meta.status_code == 202


@pytest.mark.parametrize("body", [
    "{}",
    '{"smsId": "m-1", "status": "FAILED", "msg": "recipient blocked"}',
    '{"smsId": "m-1", "status": "ACCEPTED", "code": null}',
])
def test_a_send_result_without_a_code_is_never_a_success(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, body: str
) -> None:
    # Regression: an smsId without a code passed as a success, even with status FAILED.
    # Without a code the commit cannot be judged, so the outcome is unknown, with the key.
    sandbox.inject("send", status=200, body=body)
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert isinstance(caught.value.__cause__, bizmsg.DecodeError)
    assert "no `code`" in str(caught.value.__cause__)
    [sent] = sandbox.sent_messages()
    assert caught.value.idempotency_key == sent["headers"]["idempotency-key"]


# --- CampaignError ----------------------------------------------------------------------------


def test_campaign_error_for_a_journal_of_another_campaign(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, tmp_path: Any
) -> None:
    """The campaign as a whole cannot go on: raised before any message, with the partial
    result on ``bulk_result``: the message skipped, saying why."""
    journal = tmp_path / "campaign.db"
    message = {"to": "14155550100", "from": sender.digits, "name": "n", "parameters": "p",
               "language": "en"}
    client.messages.send_many([message], journal=journal, campaign_id="spring")
    with pytest.raises(bizmsg.CampaignError) as caught:
        client.messages.send_many([message], journal=journal, campaign_id="summer")
    error = caught.value
    assert isinstance(error, bizmsg.BizmsgError)
    assert str(error) == (f'journal {journal}: belongs to campaign "spring", not "summer"; use '
                          "another journal file for another campaign")
    [skipped] = error.bulk_result  # type: ignore[attr-defined]
    assert skipped.status == "skipped" and "belongs to campaign" in (skipped.reason or "")
    assert len(sandbox.sent_messages()) == 1
    import pickle

    assert str(pickle.loads(pickle.dumps(error))) == str(error)


# --- SendRejectedError ------------------------------------------------------------------------


def test_send_rejected_from_another_tenants_number(
    sandbox: Sandbox, client: bizmsg.Client, globex_sender: Number
) -> None:
    with pytest.raises(bizmsg.SendRejectedError) as caught:
        client.messages.send_template(
            to="14155550100", from_=globex_sender.digits, name="n", parameters="p", language="en"
        )
    error = caught.value
    [record] = sandbox.sent_messages()
    assert record["tenant"] == "acme"
    result = error.result
    assert type(result) is bizmsg.SendResult
    assert result.ok is False
    assert (result.sms_id, result.status, result.code) == (None, "FAILED", "1002")
    assert result.msg == f'from "{globex_sender.digits}" is not a business phone number of this account'
    assert (error.code, error.msg) == (result.code, result.msg)
    assert result.to_dict() == record["response_body"]
    assert "1002" in str(error) and result.msg in str(error)


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"from_": "+1 415 555 0100"}, "1002"),
        ({"from_": "0014155550100"}, "1002"),
    ],
)
def test_send_rejected_codes(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, arguments: dict[str, Any], code: str
) -> None:
    call: dict[str, Any] = {"to": "14155550100", "from_": sender.digits, "name": "n",
                            "parameters": "p", "language": "en", **arguments}
    with pytest.raises(bizmsg.SendRejectedError) as caught:
        client.messages.send_template(**call)
    assert caught.value.code == code
    assert committed(sandbox) == []


def test_send_from_a_number_that_is_not_connected_is_rejected() -> None:
    with Sandbox(accounts_per_tenant=30) as sandbox, sandbox.client() as client:
        idle = next(n for n in client.business_phone_numbers.list(page_size=1000)
                    if n.status != "CONNECTED")
        with pytest.raises(bizmsg.SendRejectedError) as caught:
            client.messages.send_template(
                to="14155550100", from_=idle.display_phone_number or "", name="n",
                parameters="p", language="en",
            )
    assert caught.value.code == "1003"
    assert f"has status {idle.status}" in (caught.value.msg or "")


async def test_async_send_rejected(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    with pytest.raises(bizmsg.SendRejectedError) as caught:
        await aclient.messages.send(
            to="14155550100", from_="14155550199",
            template=bizmsg.Template(name="n", parameters="p", language="en"),
        )
    assert caught.value.result.code == "1002"
    assert caught.value.result.ok is False


def test_raw_does_not_hide_a_failed_commit(sandbox: Sandbox, client: bizmsg.Client) -> None:
    with pytest.raises(bizmsg.SendRejectedError):
        client.messages.send_template(
            to="14155550100", from_="14155550199", name="n", parameters="p", language="en",
            raw=True,
        )


@pytest.mark.parametrize("codes", [["1002"], [1002], ("0", "1002"), {0, 1002}])
def test_custom_success_codes_make_a_code_succeed(sandbox: Sandbox, codes: Any) -> None:
    with sandbox.client(success_codes=codes) as client:
        result = client.messages.send_template(
            to="14155550100", from_="14155550199", name="n", parameters="p", language="en"
        )
    assert (result.code, result.status, result.sms_id) == ("1002", "FAILED", None)
    assert result.ok is True


def test_success_codes_replace_the_default(sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client(success_codes=["1002"]) as client:
        with pytest.raises(bizmsg.SendRejectedError) as caught:
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    # The message did go out (code "0"), but this client was told only 1002 means success.
    assert caught.value.code == "0"
    assert caught.value.result.sms_id == "sms_00000000000000000001"


@pytest.mark.parametrize(
    ("success_codes", "wire_code", "ok"),
    [(None, "0", True), (None, 0, True), ([0], "0", True), (["0"], 0, True),
     ([" 0 "], 0, True), (None, 1, False), (["0"], "00", False)],
)
def test_codes_compare_as_strings(
    sandbox: Sandbox, sender: Number, success_codes: Any, wire_code: Any, ok: bool
) -> None:
    sandbox.inject("send", status=200, body=json.dumps(
        {"smsId": "s-1", "status": "DONE", "code": wire_code, "msg": "m"}))
    with sandbox.client(success_codes=success_codes) as client:
        call = lambda: client.messages.send_template(  # noqa: E731
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
        if ok:
            result = call()
            assert result.ok is True and result.code == wire_code
        else:
            with pytest.raises(bizmsg.SendRejectedError) as caught:
                call()
            assert caught.value.code == wire_code


def test_empty_success_codes_are_a_configuration_error(sandbox: Sandbox) -> None:
    with pytest.raises(bizmsg.ConfigurationError, match="success_codes"):
        sandbox.client(success_codes=[])


def test_every_error_class_is_covered_here() -> None:
    import sys

    here = Path(sys.modules[__name__].__file__ or "").resolve().parent
    # This file and the two that take the rest of the errors.
    source = "".join(
        path.read_text(encoding="utf-8")
        for path in (here / "test_errors.py", here / "test_error_details.py",
                     here.parent / "transport" / "test_transport_errors.py"))
    abstract = {"BizmsgError", "TransportError"}
    # PaginationError is exercised by tests/client/test_pagination.py.
    elsewhere = {"PaginationError"}
    for name in set(bizmsg.errors.__all__) - abstract - elsewhere:
        assert f"bizmsg.{name}" in source.replace("bizmsg.errors.", "bizmsg."), name
