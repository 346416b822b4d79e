"""The sandbox's newer testing features, seen from Python over real HTTP: faults that fire on
every n-th request or with a seeded probability (``times=None`` for as long as they are
queued), oversized and chunked bodies, fault files, seed data, ``stats()``,
``max_logged_requests`` and ``close()``."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Fault, Sandbox
from conftest import Number


def outcomes_of_lists(sandbox: Sandbox, count: int, route: str = "business_accounts") -> list[int]:
    """The status of ``count`` list calls in a row (no retries): 1 faulted, 0 answered."""
    statuses = []
    with sandbox.client(max_retries=0) as client:
        listing = (client.business_accounts if route == "business_accounts"
                   else client.business_phone_numbers)
        for _ in range(count):
            try:
                listing.list(page_size=1)
                statuses.append(0)
            except bizmsg.APIError:
                statuses.append(1)
    return statuses


def raw_get(sandbox: Sandbox, path: str = "/v1/chat/businessAccounts"
            ) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=10)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {sandbox.token}"})
        response = connection.getresponse()
        return (response.status, {k.lower(): v for k, v in response.getheaders()},
                response.read())
    finally:
        connection.close()


# --- which requests a fault hits ----------------------------------------------------------------


def test_fault_defaults() -> None:
    fault = Fault()
    assert (fault.times, fault.every, fault.probability) == (1, 1, 1.0)
    assert (fault.status, fault.body_bytes, fault.chunked, fault.cut_connection) == (
        None, None, False, False)


def test_every_nth_request(sandbox: Sandbox) -> None:
    """``every=3, times=None``: the 3rd, 6th, 9th... matching request; with ``times=2`` only
    the 2nd and 4th, then the fault is used up."""
    sandbox.inject("business_accounts", status=500, every=3, times=None)
    assert outcomes_of_lists(sandbox, 9) == [0, 0, 1] * 3
    sandbox.clear_faults()
    sandbox.inject("business_accounts", status=500, every=2, times=2)
    assert outcomes_of_lists(sandbox, 8) == [0, 1, 0, 1, 0, 0, 0, 0]


def test_times_none_faults_every_request_until_cleared(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", status=503, times=None)
    assert outcomes_of_lists(sandbox, 20, "business_phone_numbers") == [1] * 20
    assert outcomes_of_lists(sandbox, 2) == [0, 0]  # another route is not affected
    sandbox.clear_faults()
    assert outcomes_of_lists(sandbox, 2, "business_phone_numbers") == [0, 0]


def pattern(seed: int, probability: float = 0.3, count: int = 60) -> list[int]:
    with Sandbox(seed=seed, faults={"business_accounts": Fault(
            status=503, probability=probability, times=None)}) as sandbox:
        return outcomes_of_lists(sandbox, count)


def test_probability_is_drawn_from_the_seed_and_replays() -> None:
    """Faults with a ``probability`` hit a share of requests, drawn from the sandbox's seeded
    generator: the same seed hits the same requests, another seed others."""
    first = pattern(11)
    assert first == pattern(11)
    assert first != pattern(12)
    assert 5 <= sum(first) <= 35
    assert pattern(3, probability=0.0) == [0] * 60
    assert pattern(3, probability=1.0) == [1] * 60


def test_faults_apply_oldest_first_and_the_next_one_takes_over(sandbox: Sandbox) -> None:
    """A request takes the oldest queued fault that fires for it: a probability fault that
    does not fire lets a later one answer."""
    sandbox.inject("business_accounts", status=502, probability=0.0, times=None)
    sandbox.inject("business_accounts", status=504, times=1)
    with sandbox.client(max_retries=0) as client:
        with pytest.raises(bizmsg.ServerError) as caught:
            client.business_accounts.list()
        assert caught.value.status_code == 504
        assert len(client.business_accounts.list()) == 3


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [({"every": 0}, "fault", "every must be 1 or more"),
     ({"probability": 1.5}, "fault", "probability must be from 0 to 1, got 1.5"),
     ({"probability": -0.1}, "fault", "probability must be from 0 to 1"),
     ({"times": 0}, "times", "must be 1 or more (or None"),
     ({"status": 99}, "fault", "status 99 is not a final HTTP status"),
     ({"delay": -1.0}, "delay", "must be 0 or more seconds")],
)
def test_inject_refuses_faults_that_cannot_behave_as_written(
    sandbox: Sandbox, fields: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        sandbox.inject("send", **fields)
    assert caught.value.field == field and says in str(caught.value)


# --- oversized and chunked bodies ---------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True])
def test_body_bytes_gives_a_json_object_of_exactly_that_size(
    sandbox: Sandbox, chunked: bool
) -> None:
    sandbox.inject("business_accounts", status=200, body_bytes=5000, chunked=chunked)
    status, headers, body = raw_get(sandbox)
    assert status == 200 and len(body) == 5000
    assert isinstance(json.loads(body), dict)
    if chunked:
        assert "content-length" not in headers
        assert headers.get("transfer-encoding") == "chunked"
    else:
        assert headers["content-length"] == "5000"
    assert headers["x-request-id"].startswith("req_")
    status, headers, body = raw_get(sandbox)
    assert status == 200 and json.loads(body)["total"] == 3  # used up


def test_body_bytes_without_a_status_processes_the_send(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """Like ``cut_connection``, an oversized answer without ``status`` replaces the answer of a
    request that was processed: the message went out."""
    sandbox.inject("send", body_bytes=300)
    with pytest.raises(bizmsg.SendOutcomeUnknownError):
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en")
    assert sandbox.stats()["accepted"] == 1
    [record] = sandbox.sent_messages()
    assert record["status"] == 200 and len(json.dumps(record["response_body"],
                                                      separators=(",", ":"))) == 300


# --- fault files --------------------------------------------------------------------------------


FAULT_FILE = {
    "seed": 7,
    "faults": {
        "send": [{"status": 503, "headers": {"Retry-After": "0"}, "times": 2}],
        "business_accounts": {"status": 500, "every": 2, "times": None},
        "business_phone_numbers": {"status": 200, "body_bytes": 64, "chunked": True},
    },
}


def check_fault_file_behaviour(sandbox: Sandbox, sender: Number) -> None:
    assert outcomes_of_lists(sandbox, 4) == [0, 1, 0, 1]
    status, headers, body = raw_get(sandbox, "/v1/chat/businessPhoneNumber")
    assert status == 200 and len(body) == 64 and "content-length" not in headers
    with sandbox.client(max_retries=2) as client:
        assert client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en").ok
    assert [r["status"] for r in sandbox.sent_messages()] == [503, 503, 200]


def test_a_fault_file_given_at_start(tmp_path: Path, sender: Number) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(FAULT_FILE))
    with Sandbox(faults=path) as sandbox:
        check_fault_file_behaviour(sandbox, sender)
    with Sandbox(faults=str(path)) as sandbox:
        check_fault_file_behaviour(sandbox, sender)


def test_a_fault_file_loaded_later_queues_after_earlier_faults(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(FAULT_FILE))
    sandbox.inject("send", status=502)
    sandbox.load_faults(path)
    with sandbox.client(max_retries=2) as client:
        with pytest.raises(bizmsg.SendOutcomeUnknownError):  # the 502 came first
            client.messages.send_template(
                to="14155550100", from_=sender.digits, name="n", parameters="p", language="en")
    sandbox.clear_requests()
    check_fault_file_behaviour(sandbox, sender)


def test_a_fault_file_seed_replays_its_draws(tmp_path: Path) -> None:
    """The file's ``seed`` restarts the draws of probability faults: the same file gives the
    same faulted requests in two sandboxes, and loading it again replays them."""
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"seed": 5, "faults": {"business_accounts": [
        {"status": 503, "probability": 0.4, "times": None}]}}))
    with Sandbox(faults=path, seed=1) as first, Sandbox(faults=path, seed=2) as second:
        drawn = outcomes_of_lists(first, 40)
        assert outcomes_of_lists(second, 40) == drawn
        assert 0 < sum(drawn) < 40
        first.clear_faults()
        first.load_faults(path)
        assert outcomes_of_lists(first, 40) == drawn


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{}", "missing field `faults`"),
        ("not json", "fault file:"),
        ('{"faults": {"sms": {"status": 500}}}', 'unknown sandbox route "sms"'),
        ('{"faults": {"send": [{"status": 503}, {"status": 700}]}}',
         "faults.send[1]: status 700 is not a final HTTP status"),
        ('{"faults": {"send": {"every": 0}}}', "faults.send[0]: every must be 1"),
        ('{"faults": {"business_accounts": {"probability": 2}}}',
         "faults.business_accounts[0]: probability must be from 0 to 1"),
        ('{"faults": {"send": {"delay": -1}}}', "faults.send[0]: delay must be 0 or more"),
        ('{"seed": -1, "faults": {}}', "expected u64 at line 1 column"),
    ],
)
def test_an_invalid_fault_file_names_the_place(
    sandbox: Sandbox, tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "faults.json"
    path.write_text(text)
    with pytest.raises(bizmsg.ValidationError) as loaded:
        sandbox.load_faults(path)
    assert loaded.value.field == "faults" and says in str(loaded.value), str(loaded.value)
    with pytest.raises(bizmsg.ValidationError, match="fault"):
        Sandbox(faults=path)
    assert outcomes_of_lists(sandbox, 3) == [0, 0, 0]  # nothing of it was queued


def test_a_misspelled_fault_field_is_named(sandbox: Sandbox, tmp_path: Path) -> None:
    """(A regression test: the refusal used to be serde's "data did not match any variant of
    untagged enum OneOrMany", naming neither the field nor the fault.)"""
    path = tmp_path / "faults.json"
    path.write_text('{"faults": {"send": {"statuss": 500}}}')
    with pytest.raises(bizmsg.ValidationError) as caught:
        sandbox.load_faults(path)
    assert "statuss" in str(caught.value) and "faults.send[0]" in str(caught.value)


def test_a_missing_fault_file_is_an_os_error(sandbox: Sandbox, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        sandbox.load_faults(tmp_path / "absent.json")


# --- seed data ----------------------------------------------------------------------------------


SEED_DATA: dict[str, Any] = {"tenants": {
    "shop": [
        {"bizAccountId": 200, "name": "Later", "createTime": "2024-02-01T00:00:00.000+0000",
         "businessPhoneNumbers": [{"phoneNumberId": "p2", "displayPhoneNumber": "+1 415 555 0102",
                                   "status": "DISCONNECTED", "throughput": "HIGH"}]},
        {"bizAccountId": "100", "chatBusinessManagerMessagingLimit": "TIER_50",
         "businessPhoneNumbers": [{"phoneNumberId": "p1",
                                   "displayPhoneNumber": "+1 415 555 0101"}]},
    ],
    "other": [{"bizAccountId": "300", "businessPhoneNumbers": []}],
}}


def check_seed_data(sandbox: Sandbox) -> None:
    assert sandbox.tenant_tokens == {"shop": "sandbox-token-shop", "other": "sandbox-token-other"}
    assert sandbox.token == "sandbox-token-shop"
    with sandbox.client() as client:
        page = client.business_accounts.list(raw=True)
        numbers = client.business_phone_numbers.list()
        result = client.messages.send_template(
            to="14155550100", from_="+1 415 555 0101", name="n", parameters="p", language="en")
        with pytest.raises(bizmsg.SendRejectedError) as disconnected:
            client.messages.send_template(
                to="14155550100", from_="14155550102", name="n", parameters="p", language="en")
    assert result.ok
    assert disconnected.value.code == "1003"
    first, later = page["data"]
    # Sorted by createTime; everything not given has its documented default.
    assert [first["bizAccountId"], later["bizAccountId"]] == ["100", "200"]
    assert first == {
        "bizAccountId": "100", "name": "100", "status": "ACTIVE",
        "businessVerificationStatus": "verified", "accountReviewStatus": "APPROVED",
        "chatBusinessManagerMessagingLimit": "TIER_50",
        "businessPhoneNumbers": [{
            "bizAccountId": "100", "phoneNumberId": "p1", "displayPhoneNumber": "+1 415 555 0101",
            "verifiedName": "100", "status": "CONNECTED", "qualityRating": "GREEN",
            "codeVerificationStatus": "VERIFIED", "throughput": "STANDARD",
            "messagingLimitTier": "TIER_50", "createTime": "2024-01-01T00:00:00.000+0000",
            "updateTime": "2024-01-01T00:00:00.000+0000"}],
        "createTime": "2024-01-01T00:00:00.000+0000",
        "updateTime": "2024-01-01T00:00:00.000+0000",
    }
    assert later["chatBusinessManagerMessagingLimit"] == "TIER_2K"
    assert later["businessPhoneNumbers"][0]["verifiedName"] == "Later"
    assert later["businessPhoneNumbers"][0]["throughput"] == "HIGH"
    assert [n.phone_number_id for n in numbers] == ["p1", "p2"]
    with sandbox.client(token=sandbox.tenant_tokens["other"]) as other:
        [account] = other.business_accounts.list()
        assert account.biz_account_id == "300" and account.business_phone_numbers == []
        assert len(other.business_phone_numbers.list()) == 0


def test_seed_data_from_a_mapping() -> None:
    """Accounts and numbers given as data replace the generated ones (and ``tenants``);
    missing fields take their defaults: number CONNECTED/GREEN/STANDARD, account TIER_2K."""
    with Sandbox(seed_data=SEED_DATA, tenants=["ignored"]) as sandbox:
        check_seed_data(sandbox)


def test_seed_data_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(SEED_DATA))
    with Sandbox(seed_data=path) as sandbox:
        check_seed_data(sandbox)
    with Sandbox(seed_data=str(path)) as sandbox:
        assert sandbox.token == "sandbox-token-shop"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"tenants": []}, 'seed data needs a "tenants" object'),
        ({"tenants": {}}, "seed data names no tenant"),  # regression: was a ConfigurationError
        ({"tenants": {"a": {}}}, "tenants.a must be a list of accounts"),
        ({"tenants": {"a": [{"name": "x"}]}}, "tenants.a[0]: bizAccountId is missing"),
        ({"tenants": {"a": [{"bizAccountId": "1"}, {"bizAccountId": "1"}]}},
         'tenants.a[1]: bizAccountId "1" is used twice'),
        ({"tenants": {"a": [{"bizAccountId": "1", "businessPhoneNumbers": [
            {"phoneNumberId": "p", "displayPhoneNumber": "12"}]}]}},
         'tenants.a[0].businessPhoneNumbers[0]: displayPhoneNumber "12" must hold 8 to 15'),
        ({"tenants": {"a": [{"bizAccountId": "1", "businessPhoneNumbers": [
            {"displayPhoneNumber": "+1 415 555 0100"}]}]}},
         "tenants.a[0].businessPhoneNumbers[0]: phoneNumberId is missing"),
        ({"tenants": {"a": [{"bizAccountId": "1", "businessPhoneNumbers": [
            {"phoneNumberId": "p", "displayPhoneNumber": "+1 415 555 0100"},
            {"phoneNumberId": "q", "displayPhoneNumber": "14155550100"}]}]}},
         "tenants.a[0].businessPhoneNumbers[1]: the number 14155550100 is listed twice"),
        ({"tenants": {"a": [{"bizAccountId": "1", "createTime": "soon"}]}},
         'tenants.a[0].createTime "soon" is not a timestamp'),
        ({"tenants": {"a": [{"bizAccountId": "1", "businessPhoneNumbers": 5}]}},
         "tenants.a[0].businessPhoneNumbers must be a list"),
    ],
)
def test_invalid_seed_data_names_the_place(data: dict[str, Any], says: str) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        Sandbox(seed_data=data)
    assert caught.value.field == "seed_data" and says in str(caught.value), str(caught.value)


def test_seed_data_file_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    with pytest.raises(bizmsg.ValidationError, match="seed data is not JSON"):
        Sandbox(seed_data=broken)
    with pytest.raises(FileNotFoundError):
        Sandbox(seed_data=tmp_path / "absent.json")
    # Regression: anything else reached open() and raised its TypeError.
    with pytest.raises(bizmsg.ValidationError,
                       match="seed_data must be a mapping or the path") as caught:
        Sandbox(seed_data=[])  # type: ignore[arg-type]
    assert caught.value.field == "seed_data"


# --- stats, the request log, close --------------------------------------------------------------


def test_stats_count_what_the_sandbox_answered(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """``requests`` (everything, even unauthenticated), ``sends``, ``accepted`` (messages that
    went out), ``failed_commits``, ``replayed``; they survive ``clear_requests()``."""
    assert sandbox.stats() == {"requests": 0, "sends": 0, "accepted": 0, "failed_commits": 0,
                               "replayed": 0, "throttled": 0}
    client.business_accounts.list()

    def send(from_: str, idempotency_key: str | None = None) -> bizmsg.SendResult:
        return client.messages.send_template(
            to="14155550100", from_=from_, name="n", parameters="p", language="en",
            idempotency_key=idempotency_key)

    send(from_=sender.digits, idempotency_key="k-1")
    send(from_=sender.digits, idempotency_key="k-1")  # replayed
    with pytest.raises(bizmsg.SendRejectedError):
        send(from_="14155550199")
    with pytest.raises(bizmsg.AuthenticationError):
        bizmsg.Client("nobody", base_url=sandbox.base_url).business_accounts.list()
    sandbox.clear_requests()
    assert sandbox.stats() == {"requests": 5, "sends": 3, "accepted": 1, "failed_commits": 1,
                               "replayed": 1, "throttled": 0}


def test_stats_count_throttled_sends_under_enforced_limits(sender: Number) -> None:
    """With ``enforce_limits=True`` a number's sends past 80/s (one second of burst) are
    refused before processing: 429 with a whole-second ``Retry-After`` and code 130429."""
    with Sandbox(enforce_limits=True) as sandbox, sandbox.client(max_retries=0) as client:
        result = client.messages.send_many(
            [{"to": f"1415{i:07d}", "from": sender.digits, "name": "n", "parameters": "p",
              "language": "en"} for i in range(200)], concurrency=64)
        stats = sandbox.stats()
        refused = result.failed()
        assert stats["throttled"] == len(refused) > 0
        assert stats["accepted"] == result.counts["sent"] == 200 - len(refused)
        for outcome in refused:
            error = outcome.error
            assert isinstance(error, bizmsg.RateLimitError)
            assert error.retry_after is not None and error.retry_after >= 1
            assert error.retry_after == int(error.retry_after)
            assert isinstance(error.body, dict) and error.body["code"] == "130429"


def test_max_logged_requests_keeps_the_newest() -> None:
    with Sandbox(max_logged_requests=3) as sandbox, sandbox.client() as client:
        for size in range(1, 7):
            client.business_accounts.list(page_size=size)
        assert [r["query"] for r in sandbox.requests()] == [
            f"pageNo=1&pageSize={size}" for size in (4, 5, 6)]
        assert sandbox.stats()["requests"] == 6
    with Sandbox(max_logged_requests=0) as sandbox, sandbox.client() as client:
        client.business_accounts.list()
        assert sandbox.requests() == [] and sandbox.stats()["requests"] == 1


def test_a_negative_max_logged_requests_is_a_validation_error() -> None:
    """Like every other bad ``Sandbox`` argument (it used to be a raw ``OverflowError``)."""
    with pytest.raises(bizmsg.ValidationError) as caught:
        Sandbox(max_logged_requests=-1)
    assert caught.value.field == "max_logged_requests"


def test_close_refuses_connections_afterwards(sender: Number) -> None:
    """After ``close()`` (idempotent) the port is closed: a new connection is refused, a pooled
    one is broken; the log and the counts remain readable."""
    sandbox = Sandbox()
    client = sandbox.client(max_retries=0)
    client.business_accounts.list()
    port = sandbox.port
    sandbox.close()
    sandbox.close()
    with pytest.raises(bizmsg.TransportError):
        client.business_accounts.list()
    with bizmsg.Client("t", base_url=sandbox.base_url, max_retries=0) as fresh:
        with pytest.raises(bizmsg.ConnectError):
            fresh.business_accounts.list()
    with socket.socket() as raw, pytest.raises(ConnectionRefusedError):
        raw.connect(("127.0.0.1", port))
    assert sandbox.stats()["requests"] == 1 and len(sandbox.requests()) == 1
    client.close()
