"""What errors carry and when they are raised: ``InternalError`` for a misuse of the native\nlayer (never a crash), pickling with every attribute, a rejected send's call metadata, a token\ncallable's error as the cause, when a send is an unknown outcome and when it is not, a key the\nservice would refuse. The classes themselves are in ``test_errors.py``."""

from __future__ import annotations


import pytest

import bizmsg
import bizmsg.errors
from bizmsg.testing import Sandbox
from conftest import Number

LIST_URL = "/v1/chat/businessAccounts?pageNo=1&pageSize=20"


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
