"""Every exception class of ``bizmsg.errors``, each reached through a real scenario."""

from __future__ import annotations

import builtins
import json
import time
from typing import Any

import pytest

import bizmsg
import bizmsg.errors
from bizmsg.testing import Sandbox
from conftest import Number, committed, free_port

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


# --- transport errors -------------------------------------------------------------------------


def test_connect_error_on_a_closed_port(sender: Number) -> None:
    port = free_port()
    with bizmsg.Client("t", base_url=f"http://127.0.0.1:{port}", max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError) as caught:
            client.business_accounts.list()
        assert isinstance(caught.value, bizmsg.TransportError)
        # A send that could not connect provably did not happen: a plain ConnectError.
        with pytest.raises(bizmsg.ConnectError):
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    assert "connect" in str(caught.value).lower()


def test_timeout_error_is_also_the_builtin(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", delay=1.0)
    with sandbox.client(max_retries=0) as client:
        started = time.monotonic()
        with pytest.raises(builtins.TimeoutError) as caught:
            client.business_accounts.list(timeout=0.3)
        elapsed = time.monotonic() - started
    assert type(caught.value) is bizmsg.TimeoutError
    assert isinstance(caught.value, bizmsg.TransportError)
    assert 0.25 <= elapsed < 0.9


def test_connection_broken_error_on_a_cut_list(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", cut_connection=True)
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectionBrokenError) as caught:
            client.business_phone_numbers.list()
        assert isinstance(caught.value, bizmsg.TransportError)
        # The connection is gone, the client is not: the next call works.
        assert len(client.business_phone_numbers.list(page_size=2)) == 2
    assert [r["status"] for r in sandbox.requests()] == [200, 200]


async def test_async_transport_errors(sandbox: Sandbox) -> None:
    async with bizmsg.AsyncClient("t", base_url=f"http://127.0.0.1:{free_port()}", max_retries=0) as dead:
        with pytest.raises(bizmsg.ConnectError):
            await dead.business_phone_numbers.list()
    async with sandbox.async_client(max_retries=0) as client:
        sandbox.inject("business_accounts", delay=1.0)
        started = time.monotonic()
        with pytest.raises(builtins.TimeoutError) as timed_out:
            await client.business_accounts.list(timeout=0.3)
        assert time.monotonic() - started < 0.9
        assert type(timed_out.value) is bizmsg.TimeoutError
        sandbox.inject("business_accounts", cut_connection=True)
        with pytest.raises(bizmsg.ConnectionBrokenError):
            await client.business_accounts.list()


@pytest.mark.parametrize(
    ("status", "cls"),
    [(400, bizmsg.BadRequestError), (403, bizmsg.PermissionDeniedError),
     (404, bizmsg.NotFoundError), (429, bizmsg.RateLimitError), (503, bizmsg.ServerError)],
)
async def test_async_status_codes_map_to_classes(
    sandbox: Sandbox, status: int, cls: type[bizmsg.APIError]
) -> None:
    sandbox.inject("business_phone_numbers", status=status, headers={"Retry-After": "4"})
    async with sandbox.async_client(max_retries=0) as client:
        with pytest.raises(bizmsg.APIError) as caught:
            await client.business_phone_numbers.list(page_size=3)
    assert type(caught.value) is cls
    assert caught.value.url == f"{sandbox.base_url}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=3"
    assert caught.value.request_id == sandbox.requests()[0]["request_id"]
    if status == 429:
        assert caught.value.retry_after == 4.0  # type: ignore[attr-defined]


def check_unknown_outcome(
    sandbox: Sandbox, error: bizmsg.SendOutcomeUnknownError, cause: type[Exception]
) -> None:
    assert isinstance(error, bizmsg.TransportError)
    assert type(error.__cause__) is cause
    [record] = sandbox.sent_messages()  # not retried, though max_retries allows it
    assert record["status"] == 200 and record["response_body"]["status"] == "ACCEPTED"
    assert error.idempotency_key == record["headers"]["idempotency-key"]
    assert error.to == "14155550100"
    assert error.template_name == "order_update"
    assert "may or may not have been sent" in str(error)
    assert error.idempotency_key in str(error)


def test_send_outcome_unknown_after_a_cut_and_safe_resend(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", cut_connection=True)
    with sandbox.client(max_retries=3) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            client.messages.send_template(
                to="+1 415 555 0100", from_=sender.digits, name="order_update",
                parameters=["A1"], language="en",
            )
        error = caught.value
        check_unknown_outcome(sandbox, error, bizmsg.ConnectionBrokenError)
        original = sandbox.sent_messages()[0]["response_body"]["smsId"]

        again = client.messages.send_template(
            to="+1 415 555 0100", from_=sender.digits, name="order_update",
            parameters=["A1"], language="en", idempotency_key=error.idempotency_key,
        )
    assert again.sms_id == original
    assert again.meta is not None and again.meta.idempotency_key == error.idempotency_key
    first, second = sandbox.sent_messages()
    assert (first["idempotent_replay"], second["idempotent_replay"]) == (False, True)
    assert second["headers"]["idempotency-key"] == error.idempotency_key
    assert first["body_text"] == second["body_text"]
    assert len(committed(sandbox)) == 1


def test_send_outcome_unknown_after_a_timeout(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", delay=1.0)
    with sandbox.client(max_retries=3) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            client.messages.send(
                to="14155550100", from_=sender.digits,
                template=bizmsg.Template(name="order_update", parameters="p", language="en"),
                timeout=0.3,
            )
        assert time.monotonic() - started < 0.9
        check_unknown_outcome(sandbox, caught.value, bizmsg.TimeoutError)
        again = client.messages.send(
            to="14155550100", from_=sender.digits,
            template=bizmsg.Template(name="order_update", parameters="p", language="en"),
            idempotency_key=caught.value.idempotency_key,
        )
    assert again.sms_id == "sms_00000000000000000001"
    assert [r["idempotent_replay"] for r in sandbox.sent_messages()] == [False, True]
    assert len(committed(sandbox)) == 1


async def test_async_send_outcome_unknown_and_resend(sandbox: Sandbox, sender: Number) -> None:
    sandbox.inject("send", cut_connection=True)
    async with sandbox.async_client() as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            await client.messages.send_template(
                to="14155550100", from_=sender.digits, name="order_update",
                parameters="p", language="en",
            )
        check_unknown_outcome(sandbox, caught.value, bizmsg.ConnectionBrokenError)
        again = await client.messages.send_template(
            to="14155550100", from_=sender.digits, name="order_update", parameters="p",
            language="en", idempotency_key=caught.value.idempotency_key,
        )
    assert again.sms_id == sandbox.sent_messages()[0]["response_body"]["smsId"]
    assert len(committed(sandbox)) == 1


# --- DecodeError ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "in_message"),
    [
        ("<html><body>Service Unavailable</body></html>", "did not answer JSON"),
        ("[1, 2, 3]", "expected a JSON object"),
        ("", "did not answer JSON"),
    ],
)
def test_decode_error_for_a_2xx_body_that_is_not_a_json_object(
    sandbox: Sandbox, body: str, in_message: str
) -> None:
    sandbox.inject("business_accounts", status=200, body=body)
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.DecodeError) as caught:
            client.business_accounts.list()
    error = caught.value
    assert error.snippet == body
    assert in_message in str(error)
    assert json.dumps(body) in str(error)  # the snippet is quoted in the message


def test_decode_error_snippet_is_short(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=200, body="x" * 5000)
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.DecodeError) as caught:
            client.business_accounts.list()
    assert caught.value.snippet.startswith("xxxx")
    assert len(caught.value.snippet) <= 201
    assert len(str(caught.value)) < 400


def test_decode_error_for_items_missing_their_id(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=200,
                   body=json.dumps({"data": [{"name": "no id"}], "total": 1}))
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.DecodeError) as caught:
            client.business_accounts.list()
    assert "bizAccountId" in str(caught.value)
    assert "no id" in caught.value.snippet


def test_from_dict_without_an_id_is_a_decode_error() -> None:
    with pytest.raises(bizmsg.DecodeError, match="phoneNumberId"):
        bizmsg.BusinessPhoneNumber.from_dict({"status": "CONNECTED"})
    with pytest.raises(bizmsg.DecodeError, match="bizAccountId"):
        bizmsg.BusinessAccount.from_dict({"name": "x"})
    with pytest.raises(bizmsg.DecodeError):
        bizmsg.Page.from_dict({"data": {"not": "a list"}})


async def test_async_decode_error(sandbox: Sandbox, aclient: bizmsg.AsyncClient) -> None:
    sandbox.inject("business_accounts", status=200, body="OK")
    with pytest.raises(bizmsg.DecodeError) as caught:
        await aclient.business_accounts.list(max_retries=0)
    assert caught.value.snippet == "OK"


async def test_a_send_answered_with_an_unreadable_2xx_is_an_unknown_outcome(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    # The service said 2xx, so it probably committed: a plain DecodeError would drop the key
    # needed to reconcile.
    sandbox.inject("send", status=200, body="OK")
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
        await aclient.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    cause = caught.value.__cause__
    assert isinstance(cause, bizmsg.DecodeError) and cause.snippet == "OK"
    assert caught.value.to == "14155550100" and caught.value.template_name == "n"


def test_response_too_large_error_for_a_body_over_max_response_bytes(
    sandbox: Sandbox, sender: Number
) -> None:
    """A ``DecodeError``: the cap, the size seen and whether ``Content-Length`` declared it;
    on a send it is the cause of an unknown outcome (the message was processed)."""
    sandbox.inject("business_phone_numbers", status=200, body_bytes=5000)
    with sandbox.client(max_response_bytes=1024) as client:
        with pytest.raises(bizmsg.ResponseTooLargeError) as caught:
            client.business_phone_numbers.list()
        sandbox.inject("send", body_bytes=5000, chunked=True)
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as unknown:
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
    error = caught.value
    assert isinstance(error, bizmsg.DecodeError)
    assert (error.limit, error.size, error.declared) == (1024, 5000, True)
    assert str(error) == ("the answer declares a body of 5000 bytes, over max_response_bytes "
                          "(1024 bytes); it was not read")
    cause = unknown.value.__cause__
    assert isinstance(cause, bizmsg.ResponseTooLargeError)
    assert cause.declared is False and 1024 < cause.size <= 5000
    import pickle

    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.limit, copy.size, copy.declared) == (
        bizmsg.ResponseTooLargeError, 1024, 5000, True)


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


# --- InternalError ----------------------------------------------------------------------------


def test_misuse_of_the_native_layer_is_a_clean_error_not_a_crash(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    # The listing kind is a typed enum at the boundary: a wrong value cannot reach Rust.
    with pytest.raises(TypeError, match="Listing"):
        client._native.list(kind=7, page_no=1, page_size=20, raw=False,  # type: ignore[arg-type]
                            timeout=None, max_retries=None)
    assert sandbox.requests() == []
    assert issubclass(bizmsg.InternalError, bizmsg.BizmsgError)


def test_shared_state_error_is_a_bizmsg_error_that_pickles() -> None:
    # Raised for a shared store (Redis, PostgreSQL) that cannot be reached: see
    # tests/campaigns/test_shared_limits.py and test_shared_journal.py for the real faults.
    import pickle

    error = bizmsg.SharedStateError("redis://:***@127.0.0.1:6379/0: connection refused")
    assert isinstance(error, bizmsg.BizmsgError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is bizmsg.SharedStateError and str(again) == str(error)


def test_every_error_class_is_covered_here() -> None:
    import sys

    source = open(sys.modules[__name__].__file__ or "", encoding="utf-8").read()
    abstract = {"BizmsgError", "TransportError"}
    # PaginationError is exercised by tests/client/test_pagination.py.
    elsewhere = {"PaginationError"}
    for name in set(bizmsg.errors.__all__) - abstract - elsewhere:
        assert f"bizmsg.{name}" in source.replace("bizmsg.errors.", "bizmsg."), name


def test_every_error_survives_pickling_with_its_attributes(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    # Regression: keyword-only attributes made unpickling fail (e.g. across a process pool).
    import pickle

    errors: list[bizmsg.BizmsgError] = []
    with pytest.raises(bizmsg.AuthenticationError) as auth:
        bizmsg.Client("wrong", base_url=sandbox.base_url).business_accounts.list()
    errors.append(auth.value)
    with pytest.raises(bizmsg.SendRejectedError) as rejected:
        client.messages.send_template(
            to="14155550100", from_="14155550199", name="n", parameters="p", language="en"
        )
    errors.append(rejected.value)
    sandbox.inject("send", cut_connection=True)
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as unknown:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    errors.append(unknown.value)
    with pytest.raises(bizmsg.ValidationError) as invalid:
        client.business_accounts.list(page_size=0)
    errors.append(invalid.value)
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert vars(copy).keys() == vars(error).keys()
    assert pickle.loads(pickle.dumps(auth.value)).status_code == 401
    assert pickle.loads(pickle.dumps(invalid.value)).field == "page_size"
    assert pickle.loads(pickle.dumps(unknown.value)).idempotency_key == unknown.value.idempotency_key


def test_a_rejected_send_keeps_its_call_metadata(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    # Regression: SendRejectedError.result.meta was always None.
    with pytest.raises(bizmsg.SendRejectedError) as caught:
        client.messages.send_template(
            to="14155550100", from_="14155550199", name="n", parameters="p", language="en"
        )
    meta = caught.value.result.meta
    [sent] = sandbox.sent_messages()
    assert meta is not None
    assert meta.request_id == sent["request_id"]
    assert meta.idempotency_key == sent["headers"]["idempotency-key"]
    assert (meta.status_code, meta.attempts) == (200, 1)


def test_a_token_callable_error_is_the_cause_of_a_configuration_error(
    sandbox: Sandbox,
) -> None:
    def token() -> str:
        raise ConnectionError("token service down")

    with bizmsg.Client(token, base_url=sandbox.base_url) as client:
        with pytest.raises(bizmsg.ConfigurationError, match="token service down") as caught:
            client.business_accounts.list()
    assert isinstance(caught.value.__cause__, ConnectionError)


def test_a_keyboard_interrupt_in_the_token_callable_is_not_wrapped(sandbox: Sandbox) -> None:
    def token() -> str:
        raise KeyboardInterrupt

    with bizmsg.Client(token, base_url=sandbox.base_url) as client:
        with pytest.raises(KeyboardInterrupt):
            client.business_accounts.list()
    assert sandbox.requests() == []


def test_a_send_that_never_connected_is_not_an_unknown_outcome() -> None:
    # Regression: the deadline running out while still connecting was reported as "may have
    # been sent". A listener whose accept queue is full makes connecting hang.
    import socket
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    time.sleep(0.2)
    try:
        client = bizmsg.Client("t", base_url=f"http://127.0.0.1:{port}", max_retries=2,
                               timeout=bizmsg.Timeout(connect=0.3, total=0.85))
        with pytest.raises(bizmsg.TransportError) as caught:
            client.messages.send_template(
                to="14155550100", from_="14155550199", name="n", parameters="p", language="en"
            )
        assert not isinstance(caught.value, bizmsg.SendOutcomeUnknownError), caught.value
        assert isinstance(caught.value, (bizmsg.ConnectError, bizmsg.TimeoutError))
    finally:
        for filler in fillers:
            filler.close()
        server.close()


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_send_answered_with_a_server_error_after_it_left_is_an_unknown_outcome(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, status: int
) -> None:
    # A gateway's 502/504 or a 500 may come after the service processed the message.
    sandbox.inject("send", status=status)
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    cause = caught.value.__cause__
    assert isinstance(cause, bizmsg.ServerError) and cause.status_code == status
    [sent] = sandbox.sent_messages()
    assert caught.value.request_id == sent["request_id"] == cause.request_id
    assert caught.value.idempotency_key == sent["headers"]["idempotency-key"]


def test_a_503_on_a_send_is_retried_and_then_a_server_error(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    # 503 is answered before processing: retried, and in the end a plain ServerError.
    sandbox.inject("send", status=503, headers={"Retry-After": "0"}, times=3)
    with pytest.raises(bizmsg.ServerError):
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert len(sandbox.sent_messages()) == 3


def test_an_unknown_outcome_without_a_code_carries_the_request_id(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    sandbox.inject("send", status=200, body='{"smsId": "m-77", "status": "ACCEPTED"}')
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert caught.value.request_id == sandbox.sent_messages()[0]["request_id"]
    assert "m-77" in str(caught.value.__cause__)


@pytest.mark.parametrize("key", ["", "has space", "clé-1", "k" * 256])
def test_an_idempotency_key_the_service_would_refuse_is_refused_before_sending(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, key: str
) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en",
            idempotency_key=key,
        )
    assert caught.value.field == "idempotency_key"
    assert sandbox.requests() == []
