"""The embedded sandbox as users script it: tenants, paging validation, determinism, faults,
the request log, and the pytest fixtures it ships."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Fault, Sandbox
from conftest import Number


def raw_get(url: str, token: str | None) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_basic_properties(sandbox: Sandbox) -> None:
    assert sandbox.base_url == f"http://127.0.0.1:{sandbox.port}"
    assert sandbox.port > 0
    assert sandbox.token == "sandbox-token-acme"
    assert sandbox.tenant_tokens == {"acme": "sandbox-token-acme", "globex": "sandbox-token-globex"}
    assert repr(sandbox) == f"Sandbox(base_url={sandbox.base_url!r})"
    assert sandbox.delay == 0.0
    assert sandbox.requests() == [] and sandbox.sent_messages() == []


def test_tenants_see_only_their_own_data(sandbox: Sandbox, globex_sender: Number) -> None:
    with sandbox.client() as acme, sandbox.client(token=sandbox.tenant_tokens["globex"]) as globex:
        acme_numbers = acme.business_phone_numbers.list(page_size=1000)
        globex_numbers = globex.business_phone_numbers.list(page_size=1000)
        acme_accounts = acme.business_accounts.list(page_size=1000)
        globex_accounts = globex.business_accounts.list(page_size=1000)
        with pytest.raises(bizmsg.SendRejectedError) as caught:
            acme.messages.send_template(to="14155550100", from_=globex_sender.digits, name="n",
                                        parameters="p", language="en")
    assert caught.value.code == "1002"
    acme_ids = {n.phone_number_id for n in acme_numbers}
    globex_ids = {n.phone_number_id for n in globex_numbers}
    assert acme_ids and globex_ids and not acme_ids & globex_ids
    assert {a.biz_account_id for a in acme_accounts}.isdisjoint(a.biz_account_id for a in globex_accounts)
    assert {a.name for a in acme_accounts} == {"Acme Support", "Acme Sales", "Acme Store"}
    assert all(a.name.startswith("Globex ") for a in globex_accounts if a.name)
    assert {n.biz_account_id for n in acme_numbers} == {a.biz_account_id for a in acme_accounts}
    assert [r["tenant"] for r in sandbox.requests()] == ["acme", "globex", "acme", "globex", "acme"]


def test_custom_tenants_and_sizes() -> None:
    with Sandbox(tenants=["one", "two", "three"], accounts_per_tenant=5,
                 numbers_per_account=(1, 1)) as sandbox:
        assert list(sandbox.tenant_tokens) == ["one", "two", "three"]
        assert sandbox.token == "sandbox-token-one"
        with sandbox.client(token=sandbox.tenant_tokens["three"]) as client:
            accounts = client.business_accounts.list()
            numbers = client.business_phone_numbers.list()
    assert accounts.total == 5
    assert all(len(a.business_phone_numbers) == 1 for a in accounts)
    assert numbers.total == 5
    assert accounts.data[0].name == "Three Support"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"tenants": []}, bizmsg.ValidationError),
        ({"numbers_per_account": (3, 2)}, bizmsg.ValidationError),
        ({"delay": -1}, bizmsg.ValidationError),
        ({"host": "0.0.0.0"}, bizmsg.ConfigurationError),
        ({"host": "not-an-ip"}, bizmsg.ValidationError),
        ({"tenants": ["a b"]}, bizmsg.ConfigurationError),
        ({"tenants": ["x", "x"]}, bizmsg.ConfigurationError),
    ],
)
def test_refused_configurations(arguments: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Sandbox(**arguments)


def test_a_taken_port_is_refused(sandbox: Sandbox) -> None:
    with pytest.raises(bizmsg.ConfigurationError, match="could not start"):
        Sandbox(port=sandbox.port)


@pytest.mark.parametrize(
    ("query", "msg"),
    [
        ("pageNo=abc", 'invalid pageNo "abc": must be a base-10 integer >= 1'),
        ("pageNo=0", 'invalid pageNo "0": must be a base-10 integer >= 1'),
        ("pageSize=1001", 'invalid pageSize "1001": must be a base-10 integer from 1 to 1000'),
        ("pageSize=-1", 'invalid pageSize "-1": must be a base-10 integer from 1 to 1000'),
        ("pageNo=1.5", 'invalid pageNo "1.5": must be a base-10 integer >= 1'),
    ],
)
def test_paging_validation_answers_400_with_a_json_body(
    sandbox: Sandbox, query: str, msg: str
) -> None:
    for path in ("/v1/chat/businessPhoneNumber", "/v1/chat/businessAccounts"):
        status, headers, body = raw_get(f"{sandbox.base_url}{path}?{query}", sandbox.token)
        assert status == 400
        assert headers["content-type"] == "application/json"
        assert body == {"code": "400", "msg": msg}
    assert [r["status"] for r in sandbox.requests()] == [400, 400]


def test_raw_http_access_and_auth_errors(sandbox: Sandbox) -> None:
    status, headers, body = raw_get(f"{sandbox.base_url}/v1/chat/businessAccounts?pageSize=1", sandbox.token)
    assert status == 200 and len(body["data"]) == 1
    assert headers["x-request-id"].startswith("req_")
    status, headers, body = raw_get(f"{sandbox.base_url}/v1/chat/businessAccounts", None)
    assert (status, body["code"]) == (401, "401")
    assert headers["www-authenticate"] == "Bearer"
    assert body["msg"].startswith("missing Authorization header")
    status, _, body = raw_get(f"{sandbox.base_url}/v1/chat/nothing", None)
    assert (status, body) == (404, {"code": "404", "msg": "no route for GET /v1/chat/nothing"})


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data() -> None:
    def snapshot(seed: int) -> tuple[Any, Any]:
        with Sandbox(seed=seed) as sandbox, sandbox.client() as client:
            return (client.business_accounts.list(raw=True),
                    client.business_phone_numbers.list(page_size=1000, raw=True))

    assert snapshot(7) == snapshot(7)
    assert snapshot(7) != snapshot(8)
    assert snapshot(0)[0]["data"][0]["name"] == "Acme Support"


def test_sms_ids_are_deterministic_per_seed(sender: Number) -> None:
    with Sandbox(seed=0) as sandbox, sandbox.client() as client:
        first = client.messages.send_template(to="14155550100", from_=sender.digits, name="n",
                                              parameters="p", language="en")
    assert first.sms_id == "sms_00000000000000000001"


def test_data_sorted_by_create_time_then_id(client: bizmsg.Client) -> None:
    for page in (client.business_accounts.list(page_size=1000),
                 client.business_phone_numbers.list(page_size=1000)):
        keys = [(item.create_time, item.to_dict().get("phoneNumberId", item.to_dict()["bizAccountId"]))
                for item in page]
        assert keys == sorted(keys)


def test_delay_applies_to_every_answer_and_can_change(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.delay = 0.3
    assert sandbox.delay == 0.3
    started = time.monotonic()
    client.business_accounts.list()
    assert time.monotonic() - started >= 0.3
    sandbox.delay = 0
    started = time.monotonic()
    client.business_accounts.list()
    assert time.monotonic() - started < 0.3
    with pytest.raises(bizmsg.ValidationError):
        sandbox.delay = -1


def test_delay_at_start() -> None:
    with Sandbox(delay=0.25) as sandbox, sandbox.client() as client:
        started = time.monotonic()
        client.business_phone_numbers.list()
        assert time.monotonic() - started >= 0.25


def test_faults_given_at_start_apply_in_order() -> None:
    faults = {
        "business_accounts": [Fault(status=503, headers={"Retry-After": "0"}),
                              Fault(status=429, headers={"Retry-After": "0"})],
        "*": Fault(status=500, headers={"Retry-After": "0"}),
    }
    with Sandbox(faults=faults) as sandbox, sandbox.client(max_retries=5) as client:
        client.business_accounts.list()
        client.business_phone_numbers.list()
        statuses = [(r["path"].rsplit("/", 1)[1], r["status"]) for r in sandbox.requests()]
    assert statuses == [
        ("businessAccounts", 503), ("businessAccounts", 429), ("businessAccounts", 500),
        ("businessAccounts", 200), ("businessPhoneNumber", 200),
    ]


def test_fault_times_and_clear(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.inject("business_phone_numbers", status=418, times=2)
    for _ in range(2):
        with pytest.raises(bizmsg.APIError):
            client.business_phone_numbers.list()
    assert len(client.business_phone_numbers.list()) > 0
    sandbox.inject("*", status=500, times=5)
    sandbox.clear_faults()
    assert len(client.business_accounts.list()) == 3
    assert [r["status"] for r in sandbox.requests()] == [418, 418, 200, 200]


def test_a_fault_with_a_status_does_not_process_the_send(sandbox: Sandbox, client: bizmsg.Client,
                                                         sender: Number) -> None:
    sandbox.inject("send", status=503, headers={"Retry-After": "0"}, body='{"busy": true}')
    result = client.messages.send_template(to="14155550100", from_=sender.digits, name="n",
                                           parameters="p", language="en")
    # The faulted attempt used no smsId.
    assert result.sms_id == "sms_00000000000000000001"
    first, second = sandbox.sent_messages()
    assert first["response_body"] == {"busy": True}
    assert (first["status"], second["status"]) == (503, 200)


@pytest.mark.parametrize(
    "fields",
    [{"times": 0}, {"status": 99}, {"status": 600}, {"delay": -1.0}],
)
def test_inject_refuses_nonsense(sandbox: Sandbox, fields: dict[str, Any]) -> None:
    with pytest.raises(bizmsg.ValidationError):
        sandbox.inject("send", **fields)


def test_inject_refuses_unknown_routes(sandbox: Sandbox) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        sandbox.inject("Send", status=500)
    assert caught.value.field == "route"
    assert '"business_phone_numbers"' in str(caught.value)


def test_request_log_records_everything_and_clears(sandbox: Sandbox, client: bizmsg.Client,
                                                   sender: Number) -> None:
    client.business_accounts.list()
    client.messages.send_template(to="14155550100", from_=sender.digits, name="n",
                                  parameters="p", language="en")
    records = sandbox.requests()
    assert [r["method"] for r in records] == ["GET", "POST"]
    assert sandbox.sent_messages() == records[1:]
    expected_keys = {"method", "path", "query", "headers", "body", "body_text", "tenant", "status",
                     "response_body", "idempotent_replay", "request_id", "connection"}
    assert all(set(r) == expected_keys for r in records)
    assert [r["connection"] for r in records] == [1, 1]  # one client, one keep-alive connection
    assert records[0]["body"] is None
    assert records[1]["body"] == json.loads(records[1]["body_text"])
    sandbox.clear_requests()
    assert sandbox.requests() == [] and sandbox.sent_messages() == []


def test_close_stops_the_server() -> None:
    sandbox = Sandbox()
    base_url = sandbox.base_url
    sandbox.close()
    sandbox.close()
    with bizmsg.Client("sandbox-token-acme", base_url=base_url, max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError):
            client.business_accounts.list()


def test_a_hundred_thousand_numbers_page_quickly() -> None:
    started = time.monotonic()
    with Sandbox(tenants=["big"], accounts_per_tenant=1000, numbers_per_account=(100, 100)) as sandbox:
        with sandbox.client() as client:
            last = client.business_phone_numbers.list(page_no=100, page_size=1000)
    assert last.total == 100_000 and len(last) == 1000 and last.pages == 100
    assert last.has_next_page() is False
    assert time.monotonic() - started < 15


# --- the shipped pytest plugin ---------------------------------------------------------------


def test_plugin_fixtures(bizmsg_sandbox: Sandbox, bizmsg_client: bizmsg.Client) -> None:
    assert isinstance(bizmsg_sandbox, Sandbox)
    assert isinstance(bizmsg_client, bizmsg.Client)
    assert bizmsg_client.base_url == bizmsg_sandbox.base_url
    page = bizmsg_client.business_accounts.list()
    assert page.total == 3
    assert bizmsg_sandbox.requests()[0]["headers"]["authorization"] == f"Bearer {bizmsg_sandbox.token}"


def test_plugin_fixtures_are_fresh_per_test(bizmsg_sandbox: Sandbox) -> None:
    assert bizmsg_sandbox.requests() == []


def test_plugin_is_registered(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("bizmsg")
    assert plugin is not None
    assert plugin.__name__ == "bizmsg.pytest_plugin"


def test_traffic_counts_each_senders_busiest_second_and_repeated_recipients() -> None:
    """What a multi-process test judges a run by, in process and at ``GET /_sandbox/traffic``;
    with ``honour_idempotency_keys=False`` a repeated key commits again (a service that does
    not deduplicate)."""
    import json as json_module
    import urllib.request

    template = bizmsg.Template("order_update", ["A-1"], "en")
    for honour, commits in ((True, 1), (False, 3)):
        with Sandbox(honour_idempotency_keys=honour) as sandbox, sandbox.client() as client:
            sender = client.business_phone_numbers.list().data[0].display_phone_number or ""
            for _ in range(3):
                client.messages.send(to="8613800000001", from_=sender, template=template,
                                     idempotency_key="same-key")
            client.messages.send(to="8613800000002", from_=sender, template=template)
            traffic = sandbox.traffic()
            digits = "".join(c for c in sender if c.isdigit())
            assert traffic["senders"] == [{"sender": digits, "accepted": commits + 1,
                                           "busiest_second": commits + 1, "throttled": 0}]
            assert traffic["most_to_one_recipient"] == commits
            assert traffic["repeated_recipients"] == (0 if honour else 1)
            with urllib.request.urlopen(sandbox.base_url + "/_sandbox/traffic") as answer:
                remote = json_module.load(answer)
            assert remote["senders"] == traffic["senders"]
            assert remote["accepted"] == sandbox.stats()["accepted"] == commits + 1
