"""The errors of the transport and of decoding, each reached through a real scenario: a closed\nport, a timeout, a connection cut, an unknown outcome after a cut or a timeout and its safe\nresend, answers that are not what the spec says (``DecodeError``), an answer too large. The rest\nof ``bizmsg.errors`` is in ``client/test_errors.py``."""

from __future__ import annotations

import builtins
import json
import time

import pytest

import bizmsg
import bizmsg.errors
from bizmsg.testing import Sandbox
from conftest import Number, committed, free_port

LIST_URL = "/v1/chat/businessAccounts?pageNo=1&pageSize=20"


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
