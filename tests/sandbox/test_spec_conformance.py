"""The sandbox checked against the OpenAPI document of the service (docs/openapi.json).

Every answer is fetched over real HTTP with httpx, not with bizmsg's client, so the check does
not depend on bizmsg's decoder, and validated with jsonschema against the schema the document
gives for that operation and status: sends committed and failed, sends refused before
processing, both listings at many page sizes and numbers (past the last page too), bad tokens and
bad query parameters. The document is checked first: its shape as OpenAPI 3.1, every schema in
it against the JSON Schema 2020-12 meta-schema, every reference resolved.

Where the document and the sandbox disagree, fix whichever is wrong (docs/spec.md says which
parts are the spec and which are the project's decisions), never the check.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bizmsg.testing import Sandbox

from openapi_support import (
    ACCOUNTS,
    assert_valid,
    at,
    check_answer,
    check_headers,
    DOCUMENT,
    follow,
    is_valid,
    LISTINGS,
    NUMBERS,
    operation_pointer,
    OPERATIONS,
    SEND,
)


# --- The sandbox, over plain HTTP --------------------------------------------------------------


def parameter_schema(path: str, name: str) -> tuple[dict[str, Any], str]:
    operation = operation_pointer(path)
    for index in range(len(at(f"{operation}/parameters"))):
        parameter, parameter_at = follow(f"{operation}/parameters/{index}")
        if parameter["name"] == name:
            return parameter["schema"], f"{parameter_at}/schema"
    raise KeyError(name)


@pytest.fixture(scope="module")
def conformance_sandbox() -> Iterator[Sandbox]:
    # 40 accounts of 2 to 4 numbers: listings of many pages, and numbers that are not CONNECTED.
    with Sandbox(accounts_per_tenant=40) as sandbox:
        yield sandbox


def http_client(sandbox: Sandbox, authorization: str | None = "token") -> httpx.Client:
    """A plain HTTP client for ``sandbox``: with its first tenant's token, another
    ``Authorization`` header, or none (``None``). No environment proxies."""
    if authorization == "token":
        authorization = f"Bearer {sandbox.token}"
    headers = {"Authorization": authorization} if authorization is not None else {}
    return httpx.Client(base_url=sandbox.base_url, headers=headers, trust_env=False, timeout=30)


@pytest.fixture(scope="module")
def http(conformance_sandbox: Sandbox) -> Iterator[httpx.Client]:
    with http_client(conformance_sandbox) as client:
        yield client


@pytest.fixture(scope="module")
def everything(http: httpx.Client) -> dict[str, list[dict[str, Any]]]:
    """Both whole listings, in one page each."""
    return {
        path: check_answer(path, http.get(path, params={"pageSize": 1000}), 200)["data"]
        for path in LISTINGS
    }


def digits(display: str) -> str:
    return "".join(c for c in display if c.isdigit())


@pytest.fixture(scope="module")
def senders(everything: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    numbers = everything[NUMBERS]
    connected = [n for n in numbers if n["status"] == "CONNECTED"]
    idle = [n for n in numbers if n["status"] != "CONNECTED"]
    assert connected and idle, "the sandbox's data should have CONNECTED numbers and others"
    return {
        "connected": digits(connected[0]["displayPhoneNumber"]),
        "idle": digits(idle[0]["displayPhoneNumber"]),
    }


def send(http: httpx.Client, body: Any, **headers: str) -> httpx.Response:
    return http.post(
        SEND,
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )


DROP = object()
SEND_REQUEST = "/components/schemas/SendRequest"


def body_of(sender: str, **changes: Any) -> dict[str, Any]:
    """A valid send body from ``sender``, with ``changes`` (``template_<field>`` for a field
    of the template; ``DROP`` leaves a field out)."""
    body: dict[str, Any] = {
        "to": "8613800138000",
        "from": sender,
        "type": "template",
        "template": {"name": "order_update", "parameters": '["A-1042"]', "language": "en_US"},
    }
    for name, value in changes.items():
        if name.startswith("template_"):
            template = body["template"]
            if value is DROP:
                template.pop(name.removeprefix("template_"))
            else:
                template[name.removeprefix("template_")] = value
        elif value is DROP:
            body.pop(name)
        else:
            body[name] = value
    return body


def test_a_valid_send_is_committed(http: httpx.Client, senders: dict[str, str]) -> None:
    body = body_of(senders["connected"])
    assert_valid(SEND_REQUEST, body, "the request")
    result = check_answer(SEND, send(http, body), 200)
    assert (result["status"], result["code"]) == ("ACCEPTED", "0")


# Each a failed commit: (changes to a valid body, the code, whether the document's request
# schema refuses it too; 1002 and 1003 depend on the sandbox's data, not on the body's shape).
FAILED_COMMITS = [
    ({"type": "text"}, "1005", True),
    ({"type": DROP}, "1005", True),
    ({"type": 1}, "1005", True),
    ({"template": DROP}, "1006", True),
    ({"template": "order_update"}, "1006", True),
    ({"template_name": "  "}, "1006", True),
    ({"template_parameters": ["A-1042"]}, "1006", True),
    ({"template_language": DROP}, "1006", True),
    ({"from": "+86 139 0000 0000"}, "1001", True),
    ({"from": 8613900000000}, "1001", True),
    ({"from": "99999999999"}, "1002", False),
    ({"from": "idle"}, "1003", False),
    ({"to": "1234567"}, "1004", True),
    ({"to": "1234567890123456"}, "1004", True),
    ({"to": "86 138 0013 8000"}, "1004", True),
    ({"to": "12345678\n"}, "1004", True),
    ({"to": DROP}, "1004", True),
]


@pytest.mark.parametrize(("changes", "code", "schema_refuses"), FAILED_COMMITS)
def test_a_send_that_fails_validation_is_a_documented_failed_commit(
    http: httpx.Client,
    senders: dict[str, str],
    changes: dict[str, Any],
    code: str,
    schema_refuses: bool,
) -> None:
    if changes.get("from") == "idle":
        changes = {"from": senders["idle"]}
    body = body_of(senders["connected"], **changes)
    assert is_valid(SEND_REQUEST, body) is not schema_refuses
    result = check_answer(SEND, send(http, body), 200)
    assert (result["status"], result["code"]) == ("FAILED", code)


def mostly(
    likely: st.SearchStrategy[Any], other: st.SearchStrategy[Any], in_twenty: int
) -> st.SearchStrategy[Any]:
    """``likely`` ``in_twenty`` times in twenty, else ``other``."""
    return st.integers(0, 19).flatmap(lambda i: likely if i < in_twenty else other)


def bodies(connected: str, idle: str) -> st.SearchStrategy[dict[str, Any]]:
    """Send bodies near the line between valid and not: each field mostly a plausible value,
    right or wrong by a little (a digit too many, a name of white space only, a number of
    another tenant), now and then a value of another type or none at all. About a third are
    valid. Whether a body is valid is for the document to say, not for this strategy."""
    anything = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.lists(st.text(max_size=3), max_size=2),
        st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    )
    phone = mostly(
        st.from_regex(r"\A[0-9]{8,15}\Z"),
        st.integers(5, 18).flatmap(lambda n: st.from_regex(rf"\A[0-9]{{{n}}}\Z"))
        | st.text(alphabet="0123456789 +-.\n", min_size=7, max_size=16),
        15,
    )
    # White space as the sandbox reads it (Unicode's White_Space) is neither Python's
    # str.isspace() nor ECMA-262's \s: U+001C, U+0085 and U+FEFF tell the three apart.
    text = mostly(
        st.sampled_from(
            ["order_update", "x", '["A"]', "{}", "en_US", " a ", "\ufeff", "\u200b", "\x1c"]
        )
        | st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), min_size=1, max_size=4),
        st.sampled_from(["", " ", "\u3000", "\t\n", "\u0085", "\u2028 "])
        | st.text(
            alphabet=st.characters(
                categories=["Zs", "Cc"], include_characters="\u0085\ufeff\u200b"
            ),
            max_size=3,
        ),
        18,
    )

    def field(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        # Another type or missing, each one time in forty.
        return st.integers(0, 39).flatmap(
            lambda i: plausible if i < 38 else anything if i == 38 else st.just(DROP)
        )

    def present(fields: dict[str, Any]) -> dict[str, Any]:
        return {name: value for name, value in fields.items() if value is not DROP}

    template = st.fixed_dictionaries(
        {"name": field(text), "parameters": field(text), "language": field(text)}
    ).map(present)
    return st.fixed_dictionaries(
        {
            "to": field(phone),
            "from": field(
                mostly(
                    st.just(connected),
                    st.sampled_from([idle, "99999999999", "0" + connected]) | phone,
                    16,
                )
            ),
            "type": field(
                mostly(
                    st.just("template"), st.sampled_from(["text", "TEMPLATE", "", " template"]), 18
                )
            ),
            "template": field(template),
        }
    ).map(present)


@settings(max_examples=200)
@given(data=st.data())
def test_any_send_body_is_committed_exactly_when_the_document_calls_it_valid(
    http: httpx.Client, senders: dict[str, str], data: st.DataObject
) -> None:
    body = data.draw(bodies(senders["connected"], senders["idle"]), label="body")
    result = check_answer(SEND, send(http, body), 200)
    # The schema cannot know which numbers are the caller's and CONNECTED: the data decides.
    valid = is_valid(SEND_REQUEST, body) and body.get("from") == senders["connected"]
    event("committed" if valid else f"failed commit {result['code']}")
    assert (result["status"] == "ACCEPTED") is valid, (body, result)


@pytest.mark.parametrize("length", [7, 8, 15, 16])
def test_the_bounds_of_to_are_the_documents(
    http: httpx.Client, senders: dict[str, str], length: int
) -> None:
    body = body_of(senders["connected"], to="8" + "6" * (length - 1))
    result = check_answer(SEND, send(http, body), 200)
    assert (result["status"] == "ACCEPTED") is is_valid(SEND_REQUEST, body)


def test_idempotency_key_replay_conflict_and_refusal(
    http: httpx.Client, senders: dict[str, str]
) -> None:
    key = f"conformance-{uuid.uuid4()}"
    body = body_of(senders["connected"])
    first = send(http, body, **{"Idempotency-Key": key})
    assert check_answer(SEND, first, 200)["status"] == "ACCEPTED"
    assert "Idempotent-Replayed" not in first.headers
    again = send(http, body, **{"Idempotency-Key": key})
    assert check_answer(SEND, again, 200) == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    check_answer(
        SEND,
        send(http, body_of(senders["connected"], to="8613800138001"), **{"Idempotency-Key": key}),
        409,
    )
    key_schema, key_at = follow(f"{operation_pointer(SEND)}/parameters/0")
    assert key_schema["name"] == "Idempotency-Key"
    for bad in ["with space", "k" * 256, ""]:
        assert not is_valid(f"{key_at}/schema", bad)
        check_answer(SEND, send(http, body, **{"Idempotency-Key": bad}), 400)
    for good in ["k" * 255, "!~", uuid.uuid4().hex]:
        assert is_valid(f"{key_at}/schema", good)
        check_answer(SEND, send(http, body, **{"Idempotency-Key": good}), 200)


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),
        (b"[1, 2]", "application/json", 400),
        (b'"text"', "application/json; charset=utf-8", 400),
        (b"{}", "text/plain", 415),
        (b"{}", None, 415),
        (b'{"pad": "' + b"x" * (1024 * 1024) + b'"}', "application/json", 413),
    ],
)
def test_a_send_refused_before_processing_has_the_documented_error(
    http: httpx.Client, content: bytes, content_type: str | None, status: int
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    check_answer(SEND, http.post(SEND, content=content, headers=headers), status)


# (httpx refuses header values with blanks at either end, so "Bearer   " is not among them.)
BAD_AUTHORIZATION = [
    None,
    "sandbox-token-acme",
    "Basic YWNtZTp4",
    "Bearer",
    "Token x",
    "Bearer sandbox-token-nobody",
    "Bearer sandbox-token-ACME",
]


@pytest.mark.parametrize("path", list(OPERATIONS))
@pytest.mark.parametrize("authorization", BAD_AUTHORIZATION)
def test_a_bad_token_is_a_documented_401(
    conformance_sandbox: Sandbox, senders: dict[str, str], path: str, authorization: str | None
) -> None:
    with http_client(conformance_sandbox, authorization) as bare:
        if path == SEND:
            response = send(bare, body_of(senders["connected"]))
        else:
            response = bare.get(path)
    body = check_answer(path, response, 401)
    assert conformance_sandbox.token not in json.dumps(body)


@pytest.mark.parametrize("path", LISTINGS)
def test_the_scheme_is_case_insensitive(conformance_sandbox: Sandbox, path: str) -> None:
    with http_client(conformance_sandbox, f"bearer  {conformance_sandbox.token}") as bare:
        check_answer(path, bare.get(path), 200)


def check_page(
    path: str, response: httpx.Response, page_no: int, page_size: int, everything: list[Any]
) -> Any:
    """The page validates, and its envelope is the one the document describes for this request
    (which the document must allow: these are requests answered 200)."""
    for name, value in [("pageNo", page_no), ("pageSize", page_size)]:
        assert is_valid(parameter_schema(path, name)[1], value), (
            f"{name}={value} is outside the document's bounds"
        )
    page = check_answer(path, response, 200)
    total = len(everything)
    assert (page["size"], page["current"], page["total"]) == (page_size, page_no, total)
    assert page["pages"] == math.ceil(total / page_size)
    start = (page_no - 1) * page_size
    assert page["data"] == everything[start : start + page_size]
    return page


@pytest.mark.parametrize("path", LISTINGS)
def test_a_listing_without_parameters_uses_the_documented_defaults(
    http: httpx.Client, everything: dict[str, list[dict[str, Any]]], path: str
) -> None:
    page_no = parameter_schema(path, "pageNo")[0]["default"]
    page_size = parameter_schema(path, "pageSize")[0]["default"]
    check_page(path, http.get(path), page_no, page_size, everything[path])


@pytest.mark.parametrize("path", LISTINGS)
@pytest.mark.parametrize("page_size", [1, 7, 20, 1000])
def test_every_page_of_a_listing_and_the_one_after_the_last(
    http: httpx.Client, everything: dict[str, list[dict[str, Any]]], path: str, page_size: int
) -> None:
    items = everything[path]
    pages = math.ceil(len(items) / page_size)
    assert len(items) > 20
    walked: list[Any] = []
    for page_no in range(1, pages + 2):
        page = check_page(
            path,
            http.get(path, params={"pageNo": page_no, "pageSize": page_size}),
            page_no,
            page_size,
            items,
        )
        walked.extend(page["data"])
    assert page["data"] == []
    assert walked == items


def order_key(item: dict[str, Any], id_field: str) -> tuple[Any, ...]:
    stamp = item["createTime"]
    instant = datetime.datetime.strptime(
        stamp[:23] + stamp[23:].replace(":", ""), "%Y-%m-%dT%H:%M:%S.%f%z"
    )
    return instant, item[id_field]


def test_listings_are_in_the_documented_order(everything: dict[str, list[dict[str, Any]]]) -> None:
    for path, id_field in [(ACCOUNTS, "bizAccountId"), (NUMBERS, "phoneNumberId")]:
        keys = [order_key(item, id_field) for item in everything[path]]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)


@given(
    path=st.sampled_from(LISTINGS),
    page_size=st.integers(1, 1000),
    page_no=st.one_of(st.integers(1, 200), st.integers(1, 2**64 - 1)),
)
def test_any_page_number_and_size(
    http: httpx.Client,
    everything: dict[str, list[dict[str, Any]]],
    path: str,
    page_size: int,
    page_no: int,
) -> None:
    response = http.get(path, params={"pageNo": str(page_no), "pageSize": str(page_size)})
    check_page(path, response, page_no, page_size, everything[path])


def query_value_is_valid(schema_at: str, raw: str) -> bool:
    """Whether the document allows ``raw`` as the value of an integer query parameter: plain
    base-10 digits (as its description says) of an integer its schema allows."""
    return re.fullmatch(r"[0-9]+", raw) is not None and is_valid(schema_at, int(raw))


QUERY_VALUES = st.one_of(
    st.integers(-3, 1003).map(str),
    st.sampled_from(
        [
            "",
            "0",
            "00",
            "01",
            "+2",
            "-1",
            "1.5",
            "1e3",
            " 1",
            "1 ",
            "0x10",
            "\u0663",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
        ]
    ),
    st.text(alphabet="0123456789+-. eE\u0663x", max_size=6),
)


@given(
    path=st.sampled_from(LISTINGS), name=st.sampled_from(["pageNo", "pageSize"]), raw=QUERY_VALUES
)
def test_any_query_value_is_answered_as_the_document_says(
    http: httpx.Client, path: str, name: str, raw: str
) -> None:
    schema_at = parameter_schema(path, name)[1]
    check_answer(
        path,
        http.get(path, params={name: raw}),
        200 if query_value_is_valid(schema_at, raw) else 400,
    )


@pytest.mark.parametrize("path", LISTINGS)
@pytest.mark.parametrize("name", ["pageNo", "pageSize"])
def test_the_bounds_of_the_query_parameters_are_the_documents(
    http: httpx.Client, path: str, name: str
) -> None:
    schema, schema_at = parameter_schema(path, name)
    low, high = schema["minimum"], schema["maximum"]
    for value in [low - 1, low, low + 1, high - 1, high, high + 1]:
        raw = str(value)
        check_answer(
            path,
            http.get(path, params={name: raw}),
            200 if query_value_is_valid(schema_at, raw) else 400,
        )


def test_an_empty_listing() -> None:
    with Sandbox(accounts_per_tenant=0) as sandbox, http_client(sandbox) as http:
        for path in LISTINGS:
            for page_no in [1, 2]:
                page = check_answer(path, http.get(path, params={"pageNo": page_no}), 200)
                assert (page["data"], page["total"], page["pages"]) == ([], 0, 0)


def test_seed_data_of_any_scalar_type_is_served_as_the_specs_strings() -> None:
    # Seed data takes ids and values as numbers too, and timestamps in three offset forms; what
    # the listings serve must still be the spec's strings and timestamp form.
    seed = {
        "tenants": {
            "acme": [
                {
                    "bizAccountId": 100,
                    "name": 7,
                    "status": 1,
                    "chatBusinessManagerMessagingLimit": "TIER_UNLIMITED",
                    "createTime": "2024-01-01T00:00:00Z",
                    "updateTime": "2024-02-01T00:00:00.5+05:30",
                    "businessPhoneNumbers": [
                        {
                            "phoneNumberId": 200,
                            "displayPhoneNumber": "+1 415 555 0100",
                            "status": "FLAGGED",
                            "qualityRating": "NA",
                            "throughput": "NOT_APPLICABLE",
                            "createTime": "2024-03-05T10:15:30.123+0800",
                        },
                        {
                            "phoneNumberId": "201",
                            "displayPhoneNumber": "14155550101",
                            "status": 0,
                            "messagingLimitTier": 2000,
                        },
                    ],
                },
                {"bizAccountId": "101", "businessPhoneNumbers": []},
            ]
        }
    }
    with Sandbox(seed_data=seed) as sandbox, http_client(sandbox) as http:
        for path in LISTINGS:
            for page_size in [1, 2, 1000]:
                check_answer(path, http.get(path, params={"pageSize": page_size}), 200)


def properties_of(name: str) -> list[str]:
    return list(DOCUMENT["components"]["schemas"][name]["properties"])


def test_the_sandbox_sends_exactly_the_documented_fields_in_their_order(
    http: httpx.Client, everything: dict[str, list[dict[str, Any]]], senders: dict[str, str]
) -> None:
    # The schemas leave room for fields they do not name (a real service may add some); the
    # sandbox's answers are exactly the spec's fields, in its order (docs/sandbox.md).
    page = check_answer(ACCOUNTS, http.get(ACCOUNTS), 200)
    assert list(page) == properties_of("PageEnvelope")
    for account in everything[ACCOUNTS]:
        assert list(account) == properties_of("BusinessAccount")
        for number in account["businessPhoneNumbers"]:
            assert list(number) == properties_of("BusinessPhoneNumber")
    for number in everything[NUMBERS]:
        assert list(number) == properties_of("BusinessPhoneNumber")
    result = check_answer(SEND, send(http, body_of(senders["connected"])), 200)
    assert list(result) == properties_of("SendResult")
    error = check_answer(ACCOUNTS, http.get(ACCOUNTS, params={"pageNo": "x"}), 400)
    assert list(error) == properties_of("Error")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/chat/nothing", 404),
        ("GET", "/v1/chat/businessAccounts/", 404),
        ("GET", SEND, 405),
        ("POST", ACCOUNTS, 405),
        ("DELETE", NUMBERS, 405),
    ],
)
def test_answers_outside_the_three_operations_have_the_error_body(
    http: httpx.Client, method: str, path: str, status: int
) -> None:
    response = http.request(method, path)
    assert response.status_code == status
    # Not an operation of the document: the answer is the `default` response of the operations.
    documented, documented_at = follow("/components/responses/Error")
    check_headers(documented, documented_at, response, f"{method} {path}")
    body = response.json()
    assert_valid("/components/schemas/Error", body, f"{method} {path}")
    assert body["code"] == str(status)


def test_platform_limits_answers_with_enforce_limits() -> None:
    seed = {
        "tenants": {
            "acme": [
                {
                    "bizAccountId": "100",
                    "name": "Acme",
                    "chatBusinessManagerMessagingLimit": "TIER_2",
                    "businessPhoneNumbers": [
                        {"phoneNumberId": "200", "displayPhoneNumber": "+1 415 555 0100"}
                    ],
                }
            ]
        }
    }
    with Sandbox(seed_data=seed, enforce_limits=True) as sandbox, http_client(sandbox) as http:
        for to in ["8613800000001", "8613800000002"]:
            accepted = check_answer(SEND, send(http, body_of("14155550100", to=to)), 200)
            assert accepted["status"] == "ACCEPTED"
        failed = check_answer(SEND, send(http, body_of("14155550100", to="8613800000003")), 200)
        assert (failed["status"], failed["code"]) == ("FAILED", "1007")
        # STANDARD: 80 per second with a one-second burst; loopback sends far faster than that.
        for _ in range(1000):
            response = send(http, body_of("14155550100", to="8613800000001"))
            if response.status_code != 200:
                break
            check_answer(SEND, response, 200)
        check_answer(SEND, response, 429)


def test_the_check_fails_on_an_answer_the_document_does_not_allow() -> None:
    """The checks can fail: answers a little off the document are refused."""
    page = {"data": [], "total": 0, "size": 20, "current": 1, "pages": 0}
    assert is_valid("/components/schemas/BusinessAccountPage", page)
    off: list[tuple[str, Any]] = [
        ("/components/schemas/BusinessAccountPage", {**page, "total": "0"}),
        (
            "/components/schemas/BusinessAccountPage",
            {k: v for k, v in page.items() if k != "pages"},
        ),
        ("/components/schemas/BusinessAccountPage", {**page, "size": 1001}),
        ("/components/schemas/BusinessAccountPage", {**page, "data": [{"bizAccountId": "1"}]}),
        ("/components/schemas/BusinessPhoneNumberPage", {**page, "data": [1]}),
        (
            "/components/schemas/SendResult",
            {"smsId": None, "status": "ACCEPTED", "code": "0", "msg": "success"},
        ),
        (
            "/components/schemas/SendResult",
            {"smsId": "sms_1", "status": "FAILED", "code": "1004", "msg": "no"},
        ),
        (
            "/components/schemas/SendResult",
            {
                "smsId": "sms_00000000000000000001",
                "status": "ACCEPTED",
                "code": 0,
                "msg": "success",
            },
        ),
        ("/components/schemas/Error", {"code": 401, "msg": "no"}),
        ("/components/schemas/Timestamp", "2024-03-05T10:15:30.123Z"),
        ("/components/schemas/Timestamp", "2024-03-05T10:15:30.123+0800\n"),
    ]
    for pointer, instance in off:
        assert not is_valid(pointer, instance), (pointer, instance)
