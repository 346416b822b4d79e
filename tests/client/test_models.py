"""The models: frozen slotted dataclasses built by the Rust side, ``to_dict``/``from_dict``,
unknown fields and values, timestamps, ``Page`` helpers."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, number_wire

NUMBER_WIRE_NAMES = [
    "bizAccountId", "phoneNumberId", "displayPhoneNumber", "verifiedName", "status",
    "qualityRating", "codeVerificationStatus", "throughput", "messagingLimitTier",
    "createTime", "updateTime",
]
ACCOUNT_WIRE_NAMES = [
    "bizAccountId", "name", "status", "businessVerificationStatus", "accountReviewStatus",
    "chatBusinessManagerMessagingLimit", "businessPhoneNumbers", "createTime", "updateTime",
]
ENVELOPE_NAMES = ["data", "total", "size", "current", "pages"]


def account_wire(**overrides: Any) -> dict[str, Any]:
    wire = {
        "bizAccountId": "100000000000001",
        "name": "Acme Support",
        "status": "ACTIVE",
        "businessVerificationStatus": "verified",
        "accountReviewStatus": "APPROVED",
        "chatBusinessManagerMessagingLimit": "TIER_2K",
        "businessPhoneNumbers": [number_wire(), number_wire(phoneNumberId="200000000000002")],
        "createTime": "2024-03-05T10:15:30.123Z",
        "updateTime": "2024-03-05T10:15:30.123+0000",
    }
    wire.update(overrides)
    return wire


# --- dataclass behaviour ---------------------------------------------------------------------


def test_field_names_are_the_snake_case_of_the_wire_names() -> None:
    def snake(name: str) -> str:
        return "".join("_" + c.lower() if c.isupper() else c for c in name)

    assert [f.name for f in dataclasses.fields(bizmsg.BusinessPhoneNumber)] == [
        snake(n) for n in NUMBER_WIRE_NAMES
    ]
    assert [f.name for f in dataclasses.fields(bizmsg.BusinessAccount)] == [
        snake(n) for n in ACCOUNT_WIRE_NAMES
    ]
    assert [f.name for f in dataclasses.fields(bizmsg.SendResult)] == [
        "sms_id", "status", "code", "msg",
    ]
    assert [f.name for f in dataclasses.fields(bizmsg.Page)] == ENVELOPE_NAMES
    assert [f.name for f in dataclasses.fields(bizmsg.Template)] == [
        "name", "parameters", "language",
    ]


@pytest.mark.parametrize(
    "cls",
    [bizmsg.SendResult, bizmsg.BusinessAccount, bizmsg.BusinessPhoneNumber, bizmsg.Page,
     bizmsg.AsyncPage, bizmsg.Template, bizmsg.ResponseMeta],
)
def test_models_are_frozen_slotted_dataclasses(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen is True
    assert "__slots__" in cls.__dict__
    # Page and AsyncPage keep their fields in the slots of the base they share.
    slots = {name for c in cls.__mro__ for name in c.__dict__.get("__slots__", ())}
    assert set(f.name for f in dataclasses.fields(cls)) <= slots


def test_decoded_models_refuse_assignment_and_new_attributes(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=1)
    account = page.data[0]
    number = account.business_phone_numbers[0]
    for obj, field in ((page, "total"), (account, "name"), (number, "status")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, "changed")
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(obj, field)
        # Slots leave no room for new attributes. (CPython 3.11's frozen+slots dataclasses
        # raise TypeError here instead of FrozenInstanceError: a CPython bug, gh-90562.)
        with pytest.raises((AttributeError, TypeError)):
            obj.not_a_field = 1  # type: ignore[attr-defined]
        assert not hasattr(obj, "not_a_field")
        assert not hasattr(obj, "__dict__")
    assert page.total == 3 and account.name == "Acme Support"


def test_asdict_replace_and_equality_on_decoded_models(client: bizmsg.Client) -> None:
    account = client.business_accounts.list(page_size=1).data[0]
    as_dict = dataclasses.asdict(account)
    assert list(as_dict) == [f.name for f in dataclasses.fields(account)]
    assert as_dict["biz_account_id"] == account.biz_account_id
    nested = as_dict["business_phone_numbers"][0]
    assert isinstance(nested, dict)
    assert nested["phone_number_id"] == account.business_phone_numbers[0].phone_number_id
    assert nested["create_time"] == account.business_phone_numbers[0].create_time

    number = account.business_phone_numbers[0]
    changed = dataclasses.replace(number, status="DISCONNECTED", quality_rating="RED")
    assert (changed.status, changed.quality_rating) == ("DISCONNECTED", "RED")
    assert changed.phone_number_id == number.phone_number_id
    assert changed != number
    assert number.status == "CONNECTED"  # the original is untouched
    # A replaced object has no received JSON: its wire form is derived from its fields.
    derived = changed.to_dict()
    assert list(derived) == NUMBER_WIRE_NAMES
    assert derived["status"] == "DISCONNECTED"
    assert derived["phoneNumberId"] == number.phone_number_id
    assert dataclasses.replace(number) == number


def test_hand_built_models_work_without_a_response() -> None:
    result = bizmsg.SendResult(sms_id="s1", status="ACCEPTED", code="0", msg="success")
    assert result.ok is True
    assert result.meta is None
    assert result.to_dict() == {"smsId": "s1", "status": "ACCEPTED", "code": "0", "msg": "success"}
    failed = bizmsg.SendResult(sms_id=None, status="FAILED", code=1002, msg="no")
    assert failed.ok is False
    template = bizmsg.Template(name="n", parameters=["a"], language="en")
    with pytest.raises(dataclasses.FrozenInstanceError):
        template.name = "m"  # type: ignore[misc]
    assert template == bizmsg.Template("n", ["a"], "en")


def test_pickle_and_copy_keep_the_received_json(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=2)
    for clone in (pickle.loads(pickle.dumps(page)), copy.deepcopy(page), copy.copy(page)):
        assert clone == page
        assert clone.to_dict() == page.to_dict()
        assert json.dumps(clone.to_dict()) == json.dumps(page.to_dict())
        assert type(clone.data[0].business_phone_numbers[0]) is bizmsg.BusinessPhoneNumber
    account = page.data[0]
    restored = pickle.loads(pickle.dumps(account, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == account and restored.to_dict() == account.to_dict()


def test_pickle_keeps_ok_of_a_custom_success_code(sandbox: Sandbox) -> None:
    with sandbox.client(success_codes=["1002"]) as client:
        result = client.messages.send_template(
            to="14155550100", from_="14155550199", name="n", parameters="p", language="en"
        )
    assert (result.code, result.ok) == ("1002", True)
    restored = pickle.loads(pickle.dumps(result))
    assert restored == result
    assert restored.ok is True
    assert restored.to_dict() == result.to_dict()


def test_pattern_matching(sandbox: Sandbox, client: bizmsg.Client, sender: Number) -> None:
    result = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
    )
    match result:
        case bizmsg.SendResult(code="0", sms_id=str() as sms_id):
            matched = sms_id
        case _:
            matched = None
    assert matched == "sms_00000000000000000001"

    page = client.business_accounts.list(page_size=1)
    match page:
        case bizmsg.Page(data=[bizmsg.BusinessAccount(status="ACTIVE", name=name)], total=3):
            first = name
        case _:
            first = None
    assert first == "Acme Support"

    match bizmsg.SendResult.from_dict({"smsId": None, "status": "FAILED", "code": 1002, "msg": "x"}):
        case bizmsg.SendResult(code=1002 | "1002", msg=msg):
            reason = msg
        case _:
            reason = None
    assert reason == "x"


# --- wire mapping ----------------------------------------------------------------------------


def test_unknown_fields_are_kept_in_to_dict() -> None:
    wire = account_wire(
        futureField={"nested": [1, 2]},
        businessPhoneNumbers=[number_wire(newFlag=True, weight=1.5)],
    )
    account = bizmsg.BusinessAccount.from_dict(wire)
    assert account.to_dict() == wire
    assert json.dumps(account.to_dict()) == json.dumps(wire)
    assert account.business_phone_numbers[0].to_dict()["newFlag"] is True
    assert "futureField" not in [f.name for f in dataclasses.fields(account)]
    # to_dict() hands out a copy: changing it does not change the model.
    mutated = account.to_dict()
    mutated["futureField"]["nested"].append(3)
    assert account.to_dict()["futureField"] == {"nested": [1, 2]}


def test_unknown_enum_values_pass_through_untouched() -> None:
    number = bizmsg.BusinessPhoneNumber.from_dict(
        number_wire(
            status="FLAGGED", qualityRating="YELLOW", codeVerificationStatus="EXPIRED",
            throughput="HIGH", messagingLimitTier="TIER_UNLIMITED",
        )
    )
    assert (number.status, number.quality_rating, number.code_verification_status,
            number.throughput, number.messaging_limit_tier) == (
        "FLAGGED", "YELLOW", "EXPIRED", "HIGH", "TIER_UNLIMITED")
    account = bizmsg.BusinessAccount.from_dict(
        account_wire(status="SUSPENDED", businessVerificationStatus="Pending_Review",
                     accountReviewStatus="REJECTED", chatBusinessManagerMessagingLimit="TIER_10K")
    )
    assert (account.status, account.business_verification_status,
            account.account_review_status, account.chat_business_manager_messaging_limit) == (
        "SUSPENDED", "Pending_Review", "REJECTED", "TIER_10K")


def test_sandbox_values_beyond_the_observed_ones_come_through() -> None:
    with Sandbox(accounts_per_tenant=30) as big, big.client() as c:
        numbers = c.business_phone_numbers.list(page_size=1000)
    qualities = {n.quality_rating for n in numbers}
    statuses = {n.status for n in numbers}
    assert "YELLOW" in qualities
    assert statuses - {"CONNECTED"}, statuses
    assert {n.code_verification_status for n in numbers} == {"VERIFIED", "NOT_VERIFIED"}


@pytest.mark.parametrize(
    ("wire", "sms_id", "status", "code", "ok"),
    [
        ({"smsId": 17, "status": 1, "code": 0, "msg": ""}, 17, 1, 0, True),
        ({"smsId": "17", "status": "1", "code": "0", "msg": ""}, "17", "1", "0", True),
        ({"smsId": None, "status": "FAILED", "code": 1002, "msg": "x"}, None, "FAILED", 1002, False),
        # No code: never ok (an smsId alone proves nothing).
        ({"smsId": "a", "status": "QUEUED"}, "a", "QUEUED", None, False),
        ({"status": "QUEUED"}, None, "QUEUED", None, False),
    ],
)
def test_send_result_codes_may_be_numbers_or_strings(
    wire: dict[str, Any], sms_id: Any, status: Any, code: Any, ok: bool
) -> None:
    result = bizmsg.SendResult.from_dict(wire)
    assert (result.sms_id, result.status, result.code) == (sms_id, status, code)
    assert type(result.sms_id) is type(sms_id)
    assert type(result.code) is type(code)
    assert result.ok is ok
    assert result.to_dict() == wire


def test_numeric_values_over_the_wire(sandbox: Sandbox, client: bizmsg.Client, sender: Number) -> None:
    sandbox.inject("send", status=200, body='{"smsId": 4200000001, "status": 1, "code": 0, "msg": null}')
    result = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
    )
    assert (result.sms_id, result.status, result.code, result.msg) == (4200000001, 1, 0, None)
    assert result.ok is True
    assert result.to_dict() == {"smsId": 4200000001, "status": 1, "code": 0, "msg": None}


def test_timestamps_are_timezone_aware_in_every_offset_form() -> None:
    expected = datetime(2024, 3, 5, 2, 15, 30, 123000, tzinfo=timezone.utc)
    forms = {
        "2024-03-05T10:15:30.123+08:00": timedelta(hours=8),
        "2024-03-05T10:15:30.123+0800": timedelta(hours=8),
        "2024-03-05T02:15:30.123Z": timedelta(0),
        "2024-03-04T21:15:30.123-0500": timedelta(hours=-5),
        "2024-03-05T07:45:30.123+05:30": timedelta(hours=5, minutes=30),
    }
    for text, offset in forms.items():
        number = bizmsg.BusinessPhoneNumber.from_dict(number_wire(createTime=text))
        assert number.create_time == expected, text
        assert number.create_time is not None and number.create_time.utcoffset() == offset, text
        assert number.to_dict()["createTime"] == text


@pytest.mark.parametrize(
    "text", ["yesterday", "", "2024-13-05T10:15:30.123+0800", "1709604930", "2024-03-05"]
)
def test_unparseable_timestamp_is_none_and_kept_in_to_dict(text: str) -> None:
    number = bizmsg.BusinessPhoneNumber.from_dict(number_wire(updateTime=text))
    assert number.update_time is None
    assert number.create_time is not None
    assert number.to_dict()["updateTime"] == text


def test_unparseable_timestamp_over_the_wire_does_not_fail_the_call(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    body = {"data": [number_wire(createTime="not a time", updateTime=None)],
            "total": 1, "size": 20, "current": 1, "pages": 1}
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps(body))
    page = client.business_phone_numbers.list()
    [number] = page.data
    assert number.create_time is None and number.update_time is None
    assert number.to_dict()["createTime"] == "not a time"
    assert number.to_dict()["updateTime"] is None


def test_a_timestamp_python_cannot_hold_does_not_fail_the_call(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    body = {"data": [number_wire(createTime="0000-01-01T00:00:00.000Z")], "total": 1}
    sandbox.inject("business_phone_numbers", status=200, body=json.dumps(body))
    page = client.business_phone_numbers.list()
    assert page.data[0].create_time is None
    assert page.data[0].to_dict()["createTime"] == "0000-01-01T00:00:00.000Z"


def test_sandbox_timestamps_keep_their_offsets(client: bizmsg.Client) -> None:
    numbers = client.business_phone_numbers.list(page_size=1000)
    for number in numbers:
        for value, text in ((number.create_time, number.to_dict()["createTime"]),
                            (number.update_time, number.to_dict()["updateTime"])):
            assert value is not None and value.tzinfo is not None
            assert value == datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")
            assert value.strftime("%z") == text[-5:]


# --- Page helpers ----------------------------------------------------------------------------


def page_wire(items: list[dict[str, Any]], **envelope: Any) -> dict[str, Any]:
    return {"data": items, **envelope}


@pytest.mark.parametrize(
    ("envelope", "count", "expected"),
    [
        ({"total": 3, "size": 2, "current": 1, "pages": 2}, 2, True),
        ({"total": 3, "size": 2, "current": 2, "pages": 2}, 1, False),
        ({"total": 9, "size": 2, "current": 3, "pages": 2}, 2, False),
        ({"size": 2}, 2, True),  # no `pages`: a full page may have a successor
        ({"size": 2}, 1, False),  # ... a short one does not
        ({"total": 9, "size": 2, "current": 1, "pages": 5}, 0, False),  # empty: always last
    ],
)
def test_has_next_page_rules(envelope: dict[str, Any], count: int, expected: bool) -> None:
    items = [number_wire(phoneNumberId=str(i)) for i in range(count)]
    page = bizmsg.Page.from_dict(page_wire(items, **envelope))
    assert page.has_next_page() is expected
    assert len(page) == count


def test_a_page_without_a_data_list_is_a_decode_error() -> None:
    # Read as an empty page, it would end a listing early without a word.
    for wire in ({"data": None, "total": 0}, {}, {"smsId": "s", "code": "0"}):
        with pytest.raises(bizmsg.DecodeError, match="data"):
            bizmsg.Page.from_dict(wire)
    page = bizmsg.Page.from_dict({"data": [], "total": 0})
    assert page.data == [] and page.total == 0 and page.has_next_page() is False


def test_page_from_dict_picks_the_item_model() -> None:
    numbers = bizmsg.Page.from_dict(page_wire([number_wire()], total=1, size=20, current=1, pages=1))
    accounts = bizmsg.Page.from_dict(page_wire([account_wire()], total=1, size=20, current=1, pages=1))
    assert type(numbers.data[0]) is bizmsg.BusinessPhoneNumber
    assert type(accounts.data[0]) is bizmsg.BusinessAccount
    assert type(accounts.data[0].business_phone_numbers[1]) is bizmsg.BusinessPhoneNumber


def test_to_records(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=2)
    records = page.to_records()
    assert len(records) == 2
    assert records[0] == {
        **{f.name: getattr(page.data[0], f.name) for f in dataclasses.fields(page.data[0])
           if f.name != "business_phone_numbers"},
        "business_phone_numbers": [
            {f.name: getattr(n, f.name) for f in dataclasses.fields(n)}
            for n in page.data[0].business_phone_numbers
        ],
    }
    assert all(type(r) is dict for r in records[0]["business_phone_numbers"])


# The HTML reprs (columns, badges, timestamps, details blocks, errors): tests/notebooks/test_display.py.


def test_repr_html_escapes_text() -> None:
    page = bizmsg.Page.from_dict(
        page_wire([number_wire(verifiedName="<script>x</script>")], total=1, size=1, current=1, pages=1)
    )
    html = page._repr_html_()
    assert "<script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html


# --- properties ------------------------------------------------------------------------------

KNOWN_NUMBER_KEYS = set(NUMBER_WIRE_NAMES)
KNOWN_ACCOUNT_KEYS = set(ACCOUNT_WIRE_NAMES)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=6), inner, max_size=3),
    max_leaves=8,
)
plain_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


def unknown_fields(known: set[str]) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10).filter(
        lambda k: k not in known
    )
    return st.dictionaries(keys, json_values, max_size=4)


@st.composite
def number_wires(draw: st.DrawFn) -> dict[str, Any]:
    wire: dict[str, Any] = {"phoneNumberId": draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=15).filter(str.strip) | st.integers(0, 2**53).map(str))}
    for name in NUMBER_WIRE_NAMES:
        if name != "phoneNumberId" and draw(st.booleans()):
            wire[name] = draw(plain_text)
    wire.update(draw(unknown_fields(KNOWN_NUMBER_KEYS)))
    keys = list(wire)
    order = draw(st.permutations(keys))
    return {k: wire[k] for k in order}


@given(number_wires())
def test_number_round_trips_with_unknown_fields(wire: dict[str, Any]) -> None:
    number = bizmsg.BusinessPhoneNumber.from_dict(wire)
    assert json.dumps(number.to_dict()) == json.dumps(wire)
    assert number.phone_number_id == wire["phoneNumberId"]
    assert number.status == wire.get("status")
    assert bizmsg.BusinessPhoneNumber.from_dict(number.to_dict()) == number
    assert pickle.loads(pickle.dumps(number)).to_dict() == wire


@given(
    st.lists(number_wires(), max_size=3),
    unknown_fields(KNOWN_ACCOUNT_KEYS),
    plain_text,
)
def test_account_round_trips_with_unknown_fields(
    numbers: list[dict[str, Any]], extra: dict[str, Any], name: str
) -> None:
    wire = {"bizAccountId": "1", "name": name, "businessPhoneNumbers": numbers, **extra}
    account = bizmsg.BusinessAccount.from_dict(wire)
    assert json.dumps(account.to_dict()) == json.dumps(wire)
    assert [n.to_dict() for n in account.business_phone_numbers] == numbers
    assert account.name == name


@given(
    st.lists(number_wires(), min_size=1, max_size=3),
    st.integers(0, 10**6),
    st.integers(1, 1000),
    st.integers(1, 10**6),
    st.integers(0, 10**6),
    unknown_fields(set(ENVELOPE_NAMES)),
)
def test_page_round_trips_with_unknown_fields(
    items: list[dict[str, Any]], total: int, size: int, current: int, pages: int,
    extra: dict[str, Any],
) -> None:
    wire = {**extra, "data": items, "total": total, "size": size, "current": current, "pages": pages}
    page = bizmsg.Page.from_dict(wire)
    assert json.dumps(page.to_dict()) == json.dumps(wire)
    assert (page.total, page.size, page.current, page.pages) == (total, size, current, pages)
    assert [n.to_dict() for n in page] == items
    assert page.has_next_page() is (current < pages)
    clone = pickle.loads(pickle.dumps(page))
    assert clone == page and clone.to_dict() == wire


@given(
    when=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 12, 31)),
    offset_minutes=st.integers(min_value=-14 * 60, max_value=14 * 60),
    form=st.sampled_from(["+HH:MM", "+HHMM", "Z"]),
)
def test_timestamps_parse_in_every_offset_form(
    when: datetime, offset_minutes: int, form: str
) -> None:
    if form == "Z":
        offset_minutes = 0
    when = when.replace(microsecond=when.microsecond // 1000 * 1000)
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    suffix = {"+HH:MM": f"{sign}{hours:02d}:{minutes:02d}",
              "+HHMM": f"{sign}{hours:02d}{minutes:02d}", "Z": "Z"}[form]
    text = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}" + suffix
    number = bizmsg.BusinessPhoneNumber.from_dict({"phoneNumberId": "p", "createTime": text})
    offset = timedelta(minutes=offset_minutes)
    expected = when.replace(tzinfo=timezone(offset))
    assert number.create_time == expected
    assert number.create_time is not None and number.create_time.utcoffset() == offset
    assert number.to_dict() == {"phoneNumberId": "p", "createTime": text}


def test_a_page_whose_size_came_from_the_request_survives_pickling(sandbox: Sandbox) -> None:
    # Regression: unpickling decoded the page again with size 20 instead of the requested 5.
    import pickle

    sandbox.inject("business_phone_numbers", status=200,
                   body='{"data": [{"phoneNumberId": "p1"}], "total": 1}')
    with sandbox.client() as client:
        page = client.business_phone_numbers.list(page_no=1, page_size=5)
    assert page.size == 5  # not sent by the service: what was asked for
    copy = pickle.loads(pickle.dumps(page))
    assert copy == page and copy.size == 5
    assert copy.to_dict() == {"data": [{"phoneNumberId": "p1"}], "total": 1}


@pytest.mark.parametrize("model", [bizmsg.SendResult, bizmsg.BusinessPhoneNumber,
                                   bizmsg.BusinessAccount])
def test_each_model_has_the_fields_of_its_one_table(model: type[Any]) -> None:
    """A model's fields are listed once, in Rust (``wire_model!``); the dataclass declares the
    same fields, in the same order, and reads its wire names from that table."""
    table = bizmsg._native.model_fields(model.__name__)
    assert [f.name for f in dataclasses.fields(model)] == [name for name, _ in table]
    assert model._WIRE_NAMES == tuple(table)
