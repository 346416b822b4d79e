"""``bizmsg send``: what reaches the service, each output, and the ways a send can end:
sent (0), rejected (3), outcome unknown (4, with the key to reconcile with), interrupted
(130, with that key too)."""

from __future__ import annotations

import csv
import io
import json
import signal
import sys

import pytest

from bizmsg.testing import Sandbox
from conftest import Number, committed
from test_cli import on, start, wait_for_a_request


def send(sender: Number | str, *args: str) -> list[str]:
    """The arguments of a send from ``sender`` to a fixed recipient, then ``args``."""
    from_ = sender if isinstance(sender, str) else sender.display
    return ["send", "--to", "+86 138 0013 8000", "--from", from_,
            "--template", "order_update", "--language", "en-US", *args]


@pytest.mark.parametrize("given, sent", [
    (["--param", "A-1042", "--param", "tomorrow"], '["A-1042","tomorrow"]'),
    (["--param", "单号"], '["单号"]'),
    (["--parameters", '{"order": "A-1042"}'], '{"order": "A-1042"}'),
    (["--parameters", "raw text, sent as is"], "raw text, sent as is"),
    ([], "[]"),
])
def test_what_the_service_receives(sandbox: Sandbox, sender: Number, given: list[str],
                                   sent: str) -> None:
    done = on(sandbox, *send(sender, *given))
    assert done.returncode == 0, done.stderr
    [request] = sandbox.sent_messages()
    assert request["body"] == {
        "to": "8613800138000", "from": sender.digits, "type": "template",
        "template": {"name": "order_update", "parameters": sent, "language": "en_US"},
    }


def test_table_prints_the_send_result(sandbox: Sandbox, sender: Number) -> None:
    done = on(sandbox, *send(sender))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "SMS_ID                    STATUS    CODE    MSG",
        "sms_00000000000000000001  ACCEPTED  0       success",
    ]


@pytest.mark.parametrize("output", ["json", "jsonl", "csv"])
def test_other_outputs_of_the_send_result(sandbox: Sandbox, sender: Number, output: str) -> None:
    done = on(sandbox, *send(sender, "--output", output))
    assert done.returncode == 0, done.stderr
    answered = sandbox.sent_messages()[0]["response_body"]
    if output == "csv":
        [row] = csv.DictReader(io.StringIO(done.stdout))
        assert row == {"sms_id": answered["smsId"], "status": "ACCEPTED", "code": "0",
                       "msg": "success"}
    else:
        assert json.loads(done.stdout) == answered
        assert (len(done.stdout.splitlines()) == 1) == (output == "jsonl")


def test_columns_of_the_send_result(sandbox: Sandbox, sender: Number) -> None:
    done = on(sandbox, *send(sender, "--columns", "status,sms_id", "-o", "csv"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "status,sms_id\nACCEPTED,sms_00000000000000000001\n"


def test_every_part_of_the_message_is_needed(sandbox: Sandbox) -> None:
    done = on(sandbox, "send", "--to", "8613800138000", "--language", "en")
    assert done.returncode == 2
    assert done.stderr == "bizmsg: send needs --from, --template\n"
    assert sandbox.requests() == []


def test_a_rejected_send_exits_3_with_code_and_msg(sandbox: Sandbox, sender: Number) -> None:
    done = on(sandbox, *send("+1 415 555 0100"))  # not a number of this tenant
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr == ('bizmsg: SendRejectedError: code 1002: from "14155550100" is not a '
                           'business phone number of this account\n')


def test_an_unknown_outcome_exits_4_and_the_key_it_prints_reconciles(
    sandbox: Sandbox, sender: Number
) -> None:
    sandbox.inject("send", cut_connection=True)  # processed, then the connection is cut
    done = on(sandbox, *send(sender))
    assert done.returncode == 4
    assert done.stdout == ""
    [first, hint] = done.stderr.splitlines()
    assert first.startswith("bizmsg: SendOutcomeUnknownError: ")
    key = sandbox.sent_messages()[0]["headers"]["idempotency-key"]
    assert f"--idempotency-key {key} " in hint
    assert len(committed(sandbox)) == 1  # it was sent

    again = on(sandbox, *send(sender, "--idempotency-key", key, "-o", "json"))
    assert again.returncode == 0, again.stderr
    replay = sandbox.sent_messages()[1]
    assert replay["idempotent_replay"] and replay["headers"]["idempotency-key"] == key
    assert json.loads(again.stdout) == sandbox.sent_messages()[0]["response_body"]
    assert len(committed(sandbox)) == 1  # and not twice


def test_the_idempotency_key_given_is_the_one_sent(sandbox: Sandbox, sender: Number) -> None:
    done = on(sandbox, *send(sender, "--idempotency-key", "order-A-1042"))
    assert done.returncode == 0, done.stderr
    assert sandbox.sent_messages()[0]["headers"]["idempotency-key"] == "order-A-1042"


def test_a_bad_idempotency_key_is_a_usage_error(sandbox: Sandbox, sender: Number) -> None:
    done = on(sandbox, *send(sender, "--idempotency-key", "has space"))
    assert done.returncode == 2
    assert done.stderr.startswith("bizmsg: ValidationError: invalid idempotency_key")
    assert sandbox.requests() == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_a_send_exits_130_naming_the_key(
    sandbox: Sandbox, sender: Number, sigint_handler: None
) -> None:
    sandbox.delay = 5  # the message is processed, then the answer waits
    process = start(sandbox, *send(sender))
    try:
        request = wait_for_a_request(sandbox)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 130
    assert stdout == ""
    [line] = stderr.splitlines()
    key = request["headers"]["idempotency-key"]
    assert line.startswith("bizmsg: interrupted: the message may have been sent; ")
    assert f"--idempotency-key {key} " in line
