"""Sending: the exact request on the wire, the decoded result, ``raw=True`` and ``.meta``."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, committed, compact

USER_AGENT = f"bizmsg-python/{bizmsg.__version__}"


def test_version_is_a_release_string() -> None:
    parts = bizmsg.__version__.split(".")
    assert len(parts) >= 3 and all(p.isdigit() for p in parts[:3]), bizmsg.__version__


def test_send_puts_the_exact_request_on_the_wire(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    result = client.messages.send(
        to="+86 (138) 0013-8000",
        from_=sender.display,
        template=bizmsg.Template(
            name="order_update", parameters=["A-1042", "tomorrow"], language="en-US"
        ),
    )

    [record] = sandbox.sent_messages()
    assert record["method"] == "POST"
    assert record["path"] == "/v1/chat/messages/send"
    assert record["query"] == ""
    headers = record["headers"]
    assert headers["authorization"] == f"Bearer {sandbox.token}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json"
    assert headers["user-agent"] == USER_AGENT
    assert str(uuid.UUID(headers["idempotency-key"])) == headers["idempotency-key"]
    # Byte-exact body: field order to, from, type, template; template name, parameters,
    # language; digits only; the list parameters as a compact JSON string; en-US -> en_US.
    assert record["body_text"] == (
        '{"to":"8613800138000","from":"' + sender.digits + '","type":"template",'
        '"template":{"name":"order_update","parameters":"[\\"A-1042\\",\\"tomorrow\\"]",'
        '"language":"en_US"}}'
    )
    assert int(headers["content-length"]) == len(record["body_text"].encode())
    assert record["tenant"] == "acme"

    assert result == bizmsg.SendResult(
        sms_id="sms_00000000000000000001", status="ACCEPTED", code="0", msg="success"
    )
    assert type(result) is bizmsg.SendResult
    assert result.ok is True
    assert result.to_dict() == record["response_body"]
    assert list(result.to_dict()) == ["smsId", "status", "code", "msg"]


def test_send_template_sends_the_same_request_as_send(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    template = bizmsg.Template(name="welcome", parameters="Ana, 2 items", language="pt_BR")
    client.messages.send(to="5511912345678", from_=sender.digits, template=template)
    client.messages.send_template(
        to="5511912345678",
        from_=sender.digits,
        name="welcome",
        parameters="Ana, 2 items",
        language="pt_BR",
    )
    first, second = sandbox.sent_messages()
    assert first["body_text"] == second["body_text"]
    assert first["body"] == {
        "to": "5511912345678",
        "from": sender.digits,
        "type": "template",
        "template": {"name": "welcome", "parameters": "Ana, 2 items", "language": "pt_BR"},
    }
    # Two sends, two keys: a fresh Idempotency-Key per send.
    assert first["headers"]["idempotency-key"] != second["headers"]["idempotency-key"]
    assert [r["response_body"]["smsId"] for r in (first, second)] == [
        "sms_00000000000000000001",
        "sms_00000000000000000002",
    ]


def test_string_parameters_are_sent_unchanged(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    parameters = '{"order": "A-1", "eta" : "2 days"}  '
    client.messages.send_template(
        to="14155550100", from_=sender.digits, name="eta", parameters=parameters, language="en"
    )
    [record] = sandbox.sent_messages()
    assert record["body"]["template"]["parameters"] == parameters
    assert record["body_text"] == compact(
        {
            "to": "14155550100",
            "from": sender.digits,
            "type": "template",
            "template": {"name": "eta", "parameters": parameters, "language": "en"},
        }
    )


def test_mapping_parameters_are_compact_json_in_insertion_order(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    client.messages.send_template(
        to="14155550100",
        from_=sender.digits,
        name="eta",
        parameters={"z": "last", "a": "first", "ü": "ß \"q\""},
        language="zh_HK",
    )
    [record] = sandbox.sent_messages()
    assert record["body"]["template"]["parameters"] == '{"z":"last","a":"first","ü":"ß \\"q\\""}'
    assert record["body"]["template"]["language"] == "zh_HK"


def test_tuple_parameters_are_encoded_like_a_list(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters=("a", "b"), language="es_419"
    )
    [record] = sandbox.sent_messages()
    assert record["body"]["template"] == {"name": "n", "parameters": '["a","b"]', "language": "es_419"}


def test_send_raw_returns_the_body_exactly_as_received(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    raw = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en", raw=True
    )
    [record] = sandbox.sent_messages()
    assert type(raw) is dict
    assert raw == record["response_body"]
    assert list(raw) == list(record["response_body"])


def test_send_raw_keeps_numeric_values_and_unknown_fields(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    body = '{"smsId": 987654321, "status": 1, "code": 0, "msg": "ok", "cost": {"units": 2}}'
    sandbox.inject("send", status=200, body=body)
    raw = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en", raw=True
    )
    assert raw == {"smsId": 987654321, "status": 1, "code": 0, "msg": "ok", "cost": {"units": 2}}
    assert list(raw) == ["smsId", "status", "code", "msg", "cost"]
    assert type(raw["smsId"]) is int


def test_send_meta(sandbox: Sandbox, client: bizmsg.Client, sender: Number) -> None:
    result = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
    )
    [record] = sandbox.sent_messages()
    meta = result.meta
    assert isinstance(meta, bizmsg.ResponseMeta)
    assert meta.status_code == 200
    assert meta.request_id == record["request_id"]
    assert meta.request_id is not None and meta.request_id.startswith("req_")
    assert meta.attempts == 1
    assert meta.idempotency_key == record["headers"]["idempotency-key"]
    assert isinstance(meta.elapsed, timedelta)
    assert timedelta(0) < meta.elapsed < timedelta(seconds=5)


def test_meta_is_not_part_of_equality_or_repr(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    key = "same-key-for-both"
    first = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en",
        idempotency_key=key,
    )
    again = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en",
        idempotency_key=key,
    )
    assert first.meta is not None and again.meta is not None
    assert first.meta.request_id != again.meta.request_id
    assert first == again
    assert hash(first) == hash(again)
    text = repr(first)
    assert text == (
        "SendResult(sms_id='sms_00000000000000000001', status='ACCEPTED', code='0', "
        "msg='success')"
    )
    assert first.meta.request_id not in text and "meta" not in text
    assert "meta" not in [f.name for f in dataclasses.fields(first)]


def test_explicit_idempotency_key_is_sent_and_reported(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    result = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en",
        idempotency_key="order-A1042-notice",
    )
    [record] = sandbox.sent_messages()
    assert record["headers"]["idempotency-key"] == "order-A1042-notice"
    assert result.meta is not None and result.meta.idempotency_key == "order-A1042-notice"


def test_repeating_a_key_replays_the_original_result(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    kwargs = dict(to="14155550100", from_=sender.digits, name="n", parameters="p", language="en")
    first = client.messages.send_template(**kwargs, idempotency_key="k-1")
    second = client.messages.send_template(**kwargs, idempotency_key="k-1")
    assert first.sms_id == second.sms_id == "sms_00000000000000000001"
    assert [r["idempotent_replay"] for r in sandbox.sent_messages()] == [False, True]
    assert len(committed(sandbox)) == 1


def test_reusing_a_key_for_another_message_is_a_conflict(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en",
        idempotency_key="k-2",
    )
    with pytest.raises(bizmsg.ConflictError) as caught:
        client.messages.send_template(
            to="14155550199", from_=sender.digits, name="n", parameters="p", language="en",
            idempotency_key="k-2",
        )
    error = caught.value
    assert error.status_code == 409
    assert error.method == "POST"
    assert error.body == {
        "code": "409",
        "msg": 'Idempotency-Key "k-2" was already used with a different request body',
    }
    assert error.request_id == sandbox.sent_messages()[-1]["request_id"]
    assert len(committed(sandbox)) == 1


def test_every_accepted_send_gets_a_unique_sms_id(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    ids = {
        client.messages.send_template(
            to=f"1415555{i:04d}", from_=sender.digits, name="n", parameters="p", language="en"
        ).sms_id
        for i in range(12)
    }
    assert len(ids) == 12
    assert len(committed(sandbox)) == 12


def test_other_tenant_sends_from_its_own_number(
    sandbox: Sandbox, globex_sender: Number
) -> None:
    with sandbox.client(token=sandbox.tenant_tokens["globex"]) as globex:
        result = globex.messages.send_template(
            to="14155550100", from_=globex_sender.display, name="n", parameters="p", language="en"
        )
    assert result.ok
    [record] = sandbox.sent_messages()
    assert record["tenant"] == "globex"
    assert record["headers"]["authorization"] == "Bearer sandbox-token-globex"
    assert record["body"]["from"] == globex_sender.digits


async def test_async_send_and_send_template_put_the_same_bytes_on_the_wire(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    first = await aclient.messages.send(
        to="+1 (415) 555-0100",
        from_=sender.display,
        template=bizmsg.Template(name="eta", parameters={"k": "v"}, language="EN-gb"),
    )
    second = await aclient.messages.send_template(
        to="14155550100", from_=sender.digits, name="eta", parameters={"k": "v"}, language="en_GB"
    )
    a, b = sandbox.sent_messages()
    assert a["body_text"] == b["body_text"] == compact(
        {
            "to": "14155550100",
            "from": sender.digits,
            "type": "template",
            "template": {"name": "eta", "parameters": '{"k":"v"}', "language": "en_GB"},
        }
    )
    for record in (a, b):
        assert record["headers"]["authorization"] == f"Bearer {sandbox.token}"
        assert record["headers"]["content-type"] == "application/json"
        assert record["headers"]["user-agent"] == USER_AGENT
    assert a["headers"]["idempotency-key"] != b["headers"]["idempotency-key"]
    assert first.sms_id == "sms_00000000000000000001"
    assert second.sms_id == "sms_00000000000000000002"
    assert first.meta is not None and second.meta is not None
    assert first.meta.request_id == a["request_id"]
    assert second.meta.idempotency_key == b["headers"]["idempotency-key"]
    assert first.meta.attempts == 1


async def test_async_send_raw(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    raw = await aclient.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en", raw=True
    )
    assert type(raw) is dict
    assert raw == sandbox.sent_messages()[0]["response_body"]
    raw2 = await aclient.messages.send(
        to="14155550100", from_=sender.digits,
        template=bizmsg.Template(name="n", parameters="p", language="en"), raw=True,
    )
    assert raw2 == sandbox.sent_messages()[1]["response_body"]
    assert raw2["smsId"] == "sms_00000000000000000002"


def test_a_resend_after_the_keep_alive_race_stopped_by_its_token_refresh_is_in_doubt(
        sandbox: Sandbox, sender: Number) -> None:
    """``idempotent_sends``: the service processes a send, then its reused connection ends
    before the answer, and bizmsg sends it again with its key; that re-send is answered
    ``401`` and the token callable then fails. The message may well have been delivered, so the
    caller gets ``SendOutcomeUnknownError`` with the key (before: the token's
    ``ConfigurationError``, which says "never sent")."""
    template = bizmsg.Template(name="order_update", parameters=["A-1"], language="en_US")

    def token() -> str:
        if sandbox.stats()["requests"] >= 3:
            raise RuntimeError("the vault is unreachable")
        return sandbox.token

    with bizmsg.Client(token, base_url=sandbox.base_url, idempotent_sends=True) as client:
        client.messages.send(to="8613800138000", from_=sender.digits, template=template)
        sandbox.inject("send", cut_connection=True)
        sandbox.inject("send", status=401)
        with pytest.raises(bizmsg.SendOutcomeUnknownError) as caught:
            client.messages.send(to="8613800138001", from_=sender.digits, template=template,
                                 idempotency_key="k-race-401")
    assert caught.value.idempotency_key == "k-race-401"
    assert [r["status"] for r in sandbox.requests()] == [200, 200, 401]
    assert sandbox.stats()["accepted"] == 2
