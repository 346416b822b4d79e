"""Logging to Python's ``logging`` under ``bizmsg``, and the token never leaking into a log
line, a repr, a str or an exception."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number

SECRET = "sk-live-7f3a9c1e5b2d"


def text_of(record: logging.LogRecord) -> str:
    parts = [record.getMessage(), str(record.msg), repr(record.args)]
    if record.exc_info and record.exc_info[1] is not None:
        parts.append(repr(record.exc_info[1]))
    return "\n".join(parts)


def bizmsg_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "bizmsg" and r.levelno == level]


def test_one_debug_line_per_attempt(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, client: bizmsg.Client
) -> None:
    client.business_accounts.list(page_no=2, page_size=1)
    [record] = sandbox.requests()
    [line] = bizmsg_records(bizmsg_logs, logging.DEBUG)
    message = line.getMessage()
    assert message.startswith("GET /v1/chat/businessAccounts -> 200 in ")
    assert "ms (attempt 1, request id " + record["request_id"] + ")" in message


def test_a_warning_when_a_retry_is_scheduled(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox
) -> None:
    sandbox.inject("business_phone_numbers", status=503, headers={"Retry-After": "0"}, times=2)
    with sandbox.client(max_retries=3) as client:
        client.business_phone_numbers.list()
    attempts = bizmsg_records(bizmsg_logs, logging.DEBUG)
    assert "attempt 1" in attempts[0].getMessage()
    assert ["-> 503" in r.getMessage() for r in attempts] == [True, True, False]
    assert "attempt 3" in attempts[2].getMessage() and "-> 200" in attempts[2].getMessage()
    warnings = bizmsg_records(bizmsg_logs, logging.WARNING)
    assert len(warnings) == 2
    assert "retry 1 of 3 in 0.00s" in warnings[0].getMessage()
    assert "retry 2 of 3 in 0.00s" in warnings[1].getMessage()
    assert warnings[0].getMessage().startswith("GET /v1/chat/businessPhoneNumber failed (")


def test_no_log_lines_below_the_configured_level(
    caplog: pytest.LogCaptureFixture, sandbox: Sandbox, client: bizmsg.Client
) -> None:
    caplog.set_level(logging.WARNING, logger="bizmsg")
    bizmsg.refresh_logging()
    client.business_accounts.list()
    assert bizmsg_records(caplog, logging.DEBUG) == []


def test_phone_numbers_parameters_and_token_never_reach_the_logs(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, sender: Number
) -> None:
    recipient = "447700900123"
    parameters = ["PARAM-SECRET-order-991", "PARAM-SECRET-eta"]
    # Every kind of exchange: success, retry, failed commit, 401, unknown outcome.
    sandbox.inject("send", status=503, headers={"Retry-After": "0"})
    with sandbox.client() as client:
        client.messages.send_template(
            to=recipient, from_=sender.digits, name="n", parameters=parameters, language="en"
        )
        with pytest.raises(bizmsg.SendRejectedError):
            client.messages.send_template(
                to=recipient, from_="14155550199", name="n", parameters=parameters, language="en"
            )
        sandbox.inject("send", cut_connection=True)
        with pytest.raises(bizmsg.SendOutcomeUnknownError):
            client.messages.send_template(
                to=recipient, from_=sender.digits, name="n", parameters=parameters, language="en"
            )
    with bizmsg.Client(SECRET, base_url=sandbox.base_url) as bad:
        with pytest.raises(bizmsg.AuthenticationError):
            bad.business_accounts.list()

    assert len(bizmsg_records(bizmsg_logs, logging.DEBUG)) >= 4
    assert len(bizmsg_records(bizmsg_logs, logging.WARNING)) == 1
    everything = "\n".join(text_of(r) for r in bizmsg_logs.records) + bizmsg_logs.text
    assert SECRET not in everything
    assert sandbox.token not in everything
    assert recipient not in everything
    assert sender.digits not in everything
    assert "PARAM-SECRET" not in everything


def test_token_is_in_no_repr_str_or_exception(sandbox: Sandbox, sender: Number) -> None:
    texts: list[str] = []
    with bizmsg.Client(SECRET, base_url=sandbox.base_url, max_retries=0) as client:
        texts += [repr(client), str(client), repr(client.messages), repr(client.business_accounts)]
        with pytest.raises(bizmsg.AuthenticationError) as auth:
            client.business_phone_numbers.list()
        with pytest.raises(bizmsg.AuthenticationError) as auth_send:
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
            )
        derived = client.with_options(timeout=1.0)
        texts += [repr(derived)]
    for error in (auth.value, auth_send.value):
        texts += [str(error), repr(error), repr(error.args), repr(vars(error)),
                  repr(error.__cause__), repr(error.__context__)]
    with pytest.raises(bizmsg.ConfigurationError) as config:
        bizmsg.Client(SECRET + " x", base_url=sandbox.base_url)
    texts += [str(config.value), repr(config.value)]
    with pytest.raises(bizmsg.ConfigurationError) as insecure:
        bizmsg.Client(SECRET, base_url="http://api.example.com")
    texts += [str(insecure.value)]
    joined = "\n".join(texts)
    assert SECRET not in joined
    # The token did go out, exactly as the Authorization header.
    assert {r["headers"]["authorization"] for r in sandbox.requests()} == {f"Bearer {SECRET}"}


async def test_async_token_callable_does_not_leak(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox
) -> None:
    async def provider() -> str:
        return SECRET

    async with bizmsg.AsyncClient(provider, base_url=sandbox.base_url, max_retries=0) as client:
        with pytest.raises(bizmsg.AuthenticationError) as caught:
            await client.business_accounts.list()
    # Refreshed once after the 401 (same answer), then given up.
    assert [r["status"] for r in sandbox.requests()] == [401, 401]
    assert SECRET not in str(caught.value) + repr(caught.value)
    assert SECRET not in "\n".join(text_of(r) for r in bizmsg_logs.records)


def test_bizmsg_log_environment_variable_installs_a_stderr_handler(sandbox: Sandbox) -> None:
    script = textwrap.dedent(
        f"""
        import bizmsg
        with bizmsg.Client({sandbox.token!r}, base_url={sandbox.base_url!r}) as c:
            c.business_accounts.list(page_size=1)
        """
    )
    env = {"BIZMSG_LOG": "debug", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if " bizmsg DEBUG " in line]
    assert len(lines) == 1, done.stderr
    assert "GET /v1/chat/businessAccounts -> 200" in lines[0]
    assert sandbox.token not in done.stderr


def test_retry_warnings_mask_phone_numbers_but_keep_ids_whole(
    bizmsg_logs: pytest.LogCaptureFixture, sandbox: Sandbox, client: bizmsg.Client
) -> None:
    # Regression: the mask ate digit runs inside ids, and missed numbers next to CJK text or
    # written with spaces.
    trace = "4d5f6c1e-1234-5678-9abc-012345678901"
    body = json.dumps({"code": "503", "msg": f"号码8613800000000限流; to +86 139 0000 0000; trace {trace}"})
    sandbox.inject("business_accounts", status=503, headers={"Retry-After": "0"}, body=body)
    client.business_accounts.list()
    [warning] = bizmsg_records(bizmsg_logs, logging.WARNING)
    text = text_of(warning)
    assert trace in text
    assert sandbox.requests()[0]["request_id"] in text
    assert "8613800000000" not in text and "8613****0000" in text
    assert "139 0000 0000" not in text and "8613****0000" in text


def test_the_library_logger_has_a_null_handler() -> None:
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("bizmsg").handlers)


def test_other_crates_debug_lines_stay_out_of_python_logging(
    caplog: pytest.LogCaptureFixture, client: bizmsg.Client
) -> None:
    caplog.set_level(logging.DEBUG)
    bizmsg.refresh_logging()
    client.business_accounts.list()
    names = {record.name for record in caplog.records}
    assert not any(name.startswith(("reqwest", "hyper", "rustls")) for name in names), names
