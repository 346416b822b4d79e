"""The facts of each log record as fields of the ``LogRecord`` (as ``extra=`` puts them), so a
JSON log pipeline reads them without parsing the text; a campaign's start and end lines; and no
token or whole phone number in any field."""

from __future__ import annotations

import logging

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number

SECRET = "sk-live-fields-7f3a9c1e"


def bizmsg_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "bizmsg"]


def fields_of(record: logging.LogRecord) -> dict[str, object]:
    from bizmsg._logging import FIELDS

    return {name: value for name, value in vars(record).items() if name in FIELDS}


def test_an_attempt_line_carries_its_facts_typed(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, client: bizmsg.Client
) -> None:
    client.business_accounts.list(page_no=2, page_size=1)
    [received] = sandbox.requests()
    [line] = [r for r in bizmsg_records(bizmsg_logs) if r.levelno == logging.DEBUG]
    fields = fields_of(line)
    assert fields["method"] == "GET"
    assert fields["path"] == "/v1/chat/businessAccounts"
    assert fields["status"] == 200
    assert fields["attempt"] == 1
    assert fields["request_id"] == received["request_id"]
    assert fields["idempotency_key"] is None  # not a send
    assert isinstance(fields["duration_ms"], float) and fields["duration_ms"] > 0


def test_a_retried_send_logs_its_key_status_and_retry(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    sandbox.inject("send", status=429, headers={"Retry-After": "0"})
    with sandbox.client(max_retries=2) as client:
        result = client.messages.send_template(
            to="447700900123", from_=sender.digits, name="n", parameters="p", language="en"
        )
    attempts = [r for r in bizmsg_records(bizmsg_logs) if r.levelno == logging.DEBUG
                and getattr(r, "path", None) == "/v1/chat/messages/send"]
    assert [(a.status, a.attempt) for a in attempts] == [(429, 1), (200, 2)]  # type: ignore[attr-defined]
    key = result.meta.idempotency_key
    assert key and {a.idempotency_key for a in attempts} == {key}  # type: ignore[attr-defined]
    [warning] = [r for r in bizmsg_records(bizmsg_logs) if r.levelno == logging.WARNING]
    fields = fields_of(warning)
    assert fields["status"] == 429 and fields["retry"] == 1 and fields["max_retries"] == 2
    assert fields["idempotency_key"] == key and fields["delay_seconds"] == 0.0


def test_an_attempt_without_an_answer_has_no_status(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    sandbox.inject("send", cut_connection=True)
    with sandbox.client() as client, pytest.raises(bizmsg.SendOutcomeUnknownError):
        client.messages.send_template(
            to="447700900123", from_=sender.digits, name="n", parameters="p", language="en"
        )
    [line] = [r for r in bizmsg_records(bizmsg_logs) if r.levelno == logging.DEBUG
              and getattr(r, "path", None) == "/v1/chat/messages/send"]
    assert fields_of(line)["status"] is None and fields_of(line)["request_id"] is None


def test_a_campaign_logs_one_line_at_its_start_and_one_at_its_end(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                for i in range(5)]
    messages.append(messages[0])  # a duplicate: skipped
    messages.append(bizmsg.Message(to="447700900199", from_="14155550199", template=template))
    with sandbox.client() as client:
        result = client.messages.send_many(messages, campaign_id="spring-fields")
    infos = [r for r in bizmsg_records(bizmsg_logs) if r.levelno == logging.INFO]
    [start] = [r for r in infos if " started " in r.getMessage()]
    [end] = [r for r in infos if " ended " in r.getMessage()]
    assert fields_of(start)["campaign_id"] == "spring-fields"
    assert fields_of(start)["concurrency"] == 64
    assert fields_of(start)["pace"] == "unpaced"
    assert fields_of(end)["run_id"] == fields_of(start)["run_id"]
    counts = {name: fields_of(end)[name]
              for name in ("sent", "rejected", "unknown", "failed", "skipped", "total")}
    assert counts == {"sent": 5, "rejected": 1, "unknown": 0, "failed": 0, "skipped": 1,
                      "total": 7}
    assert len(result.outcomes) == 7
    assert fields_of(end)["stop_reason"] is None
    duration = fields_of(end)["duration_seconds"]
    assert isinstance(duration, float) and duration > 0


def test_a_stopped_campaign_gives_its_stop_reason(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    messages = [bizmsg.Message(to="447700900199", from_="14155550199", template=template)]
    messages += [bizmsg.Message(to=f"4477009001{i:02d}", from_=sender.digits, template=template)
                 for i in range(3)]
    with sandbox.client() as client:
        client.messages.send_many(messages, stop_on_error=True, concurrency=1)
    [end] = [r for r in bizmsg_records(bizmsg_logs) if " ended " in r.getMessage()]
    reason = fields_of(end)["stop_reason"]
    assert isinstance(reason, str) and reason


def test_no_token_and_no_whole_number_in_any_field(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    recipient = "447700900123"
    template = bizmsg.Template(name="n", parameters=["p"], language="en")
    sandbox.inject("send", status=503, headers={"Retry-After": "0"})
    with sandbox.client() as client:
        client.messages.send_template(
            to=recipient, from_=sender.digits, name="n", parameters="p", language="en"
        )
        with pytest.raises(bizmsg.SendRejectedError):
            client.messages.send_template(
                to=recipient, from_="14155550199", name="n", parameters="p", language="en"
            )
        client.messages.send_many(
            [bizmsg.Message(to=recipient, from_=sender.digits, template=template)] * 2,
            campaign_id="fields-secret",
        )
    with bizmsg.Client(SECRET, base_url=sandbox.base_url, max_retries=0) as bad:
        with pytest.raises(bizmsg.AuthenticationError):
            bad.business_accounts.list()
    records = bizmsg_records(bizmsg_logs)
    assert any(fields_of(r) for r in records)
    for record in records:
        every_value = "\n".join(repr(value) for value in vars(record).values())
        for secret in (SECRET, sandbox.token, recipient, sender.digits):
            assert secret not in every_value, (secret, record.getMessage())
