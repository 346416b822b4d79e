"""Input validation before anything is sent: phone numbers, language codes, template
parameters, paging arguments. Property tests share one sandbox per module."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, compact

SEPARATORS = " -.()"


@pytest.fixture(scope="module")
def mclient(module_sandbox: Sandbox) -> Any:
    with module_sandbox.client() as c:
        yield c


def last_send(sandbox: Sandbox) -> dict[str, Any]:
    return sandbox.sent_messages()[-1]


@st.composite
def formatted(draw: st.DrawFn, digits: st.SearchStrategy[str]) -> tuple[str, str]:
    """(digits, the digits with random separators between and around them, and maybe a
    leading +)."""
    plain = draw(digits)
    pieces = [draw(st.sampled_from(["", "+", " +", "(+"])),
              draw(st.text(alphabet=SEPARATORS, max_size=2))]
    for digit in plain:
        pieces.append(digit)
        pieces.append(draw(st.text(alphabet=SEPARATORS, max_size=2)))
    return plain, "".join(pieces)


def digit_strings(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet="0123456789", min_size=min_size, max_size=max_size)


def e164_digits(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """Digits of an international number: a country code never starts with 0."""
    return st.builds(
        lambda first, rest: first + rest,
        st.sampled_from("123456789"),
        digit_strings(min_size - 1, max_size - 1),
    )


# --- phone numbers ---------------------------------------------------------------------------


@given(formatted(e164_digits(8, 15)))
def test_any_formatting_of_8_to_15_digits_is_sent_as_digits(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number, to: tuple[str, str]
) -> None:
    digits, written = to
    result = mclient.messages.send_template(
        to=written, from_=sender.digits, name="n", parameters="p", language="en"
    )
    record = last_send(module_sandbox)
    assert record["body"]["to"] == digits
    assert record["body_text"].startswith('{"to":"' + digits + '","from":"' + sender.digits + '"')
    assert result.sms_id == record["response_body"]["smsId"]


@given(data=st.data())
def test_the_sender_may_be_written_any_way_too(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number, data: st.DataObject
) -> None:
    digits, written = data.draw(formatted(st.just(sender.digits)))
    mclient.messages.send_template(
        to="14155550100", from_=written, name="n", parameters="p", language="en"
    )
    assert last_send(module_sandbox)["body"]["from"] == digits


@given(
    formatted(st.just("") | e164_digits(1, 7) | e164_digits(16, 30)),
    st.sampled_from(["to", "from_"]),
)
def test_too_few_or_too_many_digits_are_refused_before_sending(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number,
    number: tuple[str, str], field: str,
) -> None:
    digits, written = number
    before = len(module_sandbox.requests())
    arguments = {"to": "14155550100", "from_": sender.digits, field: written}
    with pytest.raises(bizmsg.ValidationError) as caught:
        mclient.messages.send_template(name="n", parameters="p", language="en", **arguments)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.field == field
    assert str(error).startswith(f"invalid {field}:")
    assert repr(written) in str(error) or json.dumps(written) in str(error)
    assert f"{len(digits)} digits" in str(error)
    assert len(module_sandbox.requests()) == before


@given(
    formatted(e164_digits(8, 15)),
    st.characters(blacklist_categories=("Cs", "Nd"), blacklist_characters=SEPARATORS + "+"),
    st.integers(min_value=0, max_value=20),
)
def test_any_other_character_is_refused(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number,
    number: tuple[str, str], intruder: str, position: int,
) -> None:
    _, written = number
    position = min(position, len(written))
    bad = written[:position] + intruder + written[position:]
    before = len(module_sandbox.requests())
    with pytest.raises(bizmsg.ValidationError) as caught:
        mclient.messages.send_template(
            to=bad, from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert caught.value.field == "to"
    assert len(module_sandbox.requests()) == before


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("008613800138000", "8613800138000"),
        ("0086 138 0013 8000", "8613800138000"),
        ("00 1 (415) 555-0100", "14155550100"),
    ],
)
def test_a_leading_00_is_the_international_prefix_and_is_dropped(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, written: str, sent: str
) -> None:
    # Regression: 008613800138000 was sent as is, 15 digits that name no subscriber.
    client.messages.send_template(
        to=written, from_=sender.digits, name="n", parameters="p", language="en"
    )
    assert last_send(sandbox)["body"]["to"] == sent


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("+0086 138 0013 8000", "after \"+\" comes the country code, which never starts with 0"),
        ("+086 138 0013 8000", "never starts with 0"),
        ("013800138000", "it starts with 0; write it in international form"),
        ("000 86 138 0013 8000", "after the international prefix 00"),
        ("86 138 +0013 8000", "\"+\" may only start the number"),
    ],
)
def test_numbers_starting_with_0_are_refused_with_the_reason(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, written: str, reason: str
) -> None:
    for field, arguments in (("to", {"to": written, "from_": sender.digits}),
                             ("from_", {"to": "14155550100", "from_": written})):
        with pytest.raises(bizmsg.ValidationError) as caught:
            client.messages.send_template(name="n", parameters="p", language="en", **arguments)
        assert caught.value.field == field
        assert reason in str(caught.value) and repr(written)[1:-1] in str(caught.value)
    assert sandbox.requests() == []



@pytest.mark.parametrize("value", [8613800000000, None, b"8613800000000", ["8613800000000"]])
def test_phone_numbers_must_be_strings(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, value: Any
) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        client.messages.send_template(
            to=value, from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert caught.value.field == "to"
    assert sandbox.requests() == []


# --- language codes --------------------------------------------------------------------------

letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=5)


@given(
    lang=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=2, max_size=3),
    region=st.none()
    | st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=2, max_size=2)
    | st.text(alphabet="0123456789", min_size=3, max_size=3),
    separator=st.sampled_from(["_", "-"]),
)
def test_language_codes_are_normalized(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number,
    lang: str, region: str | None, separator: str,
) -> None:
    written = lang if region is None else f"{lang}{separator}{region}"
    expected = lang.lower() if region is None else f"{lang.lower()}_{region.upper()}"
    mclient.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language=written
    )
    assert last_send(module_sandbox)["body"]["template"]["language"] == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [("en", "en"), ("en_US", "en_US"), ("en-US", "en_US"), ("pt_BR", "pt_BR"),
     ("zh_HK", "zh_HK"), ("es_419", "es_419"), ("es-419", "es_419"), ("fil", "fil")],
)
def test_documented_language_examples(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, written: str, expected: str
) -> None:
    client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language=written
    )
    assert sandbox.sent_messages()[0]["body"]["template"]["language"] == expected


@given(
    st.one_of(
        letters.filter(lambda s: len(s) in (1, 4, 5)),  # wrong length
        st.builds(lambda a, b: f"{a}_{b}", st.sampled_from(["en", "pt"]), letters.filter(lambda s: len(s) != 2)),
        st.builds(lambda a, b: f"{a}-{b}", st.sampled_from(["es"]), st.text(alphabet="0123456789", min_size=1, max_size=5).filter(lambda s: len(s) != 3)),
        st.builds(lambda a, b: f"{a}{b}", st.sampled_from(["e1", "en US", "en__US", "en_US_x", "1en"]), st.just("")),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=8).filter(
            lambda s: not any(c.isascii() and c.isalnum() for c in s)
        ),
    )
)
def test_bad_language_codes_are_refused_before_sending(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number, language: str
) -> None:
    before = len(module_sandbox.requests())
    with pytest.raises(bizmsg.ValidationError) as caught:
        mclient.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language=language
        )
    assert caught.value.field == "template.language"
    assert len(module_sandbox.requests()) == before


# --- template parameters ---------------------------------------------------------------------

param_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(st.lists(param_text, max_size=5) | st.dictionaries(param_text, param_text, max_size=5))
def test_list_and_dict_parameters_are_sent_as_compact_json(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number,
    parameters: list[str] | dict[str, str],
) -> None:
    mclient.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters=parameters, language="en"
    )
    record = last_send(module_sandbox)
    sent = record["body"]["template"]["parameters"]
    assert sent == compact(parameters)
    assert json.loads(sent) == parameters
    assert record["body_text"] == compact(
        {"to": "14155550100", "from": sender.digits, "type": "template",
         "template": {"name": "n", "parameters": sent, "language": "en"}}
    )


@given(param_text.filter(lambda s: s.strip() != ""))
def test_string_parameters_are_sent_unchanged(
    module_sandbox: Sandbox, mclient: bizmsg.Client, sender: Number, parameters: str
) -> None:
    mclient.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters=parameters, language="en"
    )
    assert last_send(module_sandbox)["body"]["template"]["parameters"] == parameters


@pytest.mark.parametrize(
    "parameters",
    [[1, 2], ["a", None], {"k": 1}, {"k": ["v"]}, 7, None, [["nested"]], {1: "v"}, object()],
)
def test_parameters_that_are_not_strings_are_refused(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, parameters: Any
) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters=parameters, language="en"
        )
    assert caught.value.field == "template.parameters"
    assert sandbox.requests() == []


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        (["A-1", 2, None], "parameters[1] is a number (2)"),
        (["A-1", "B", None], "parameters[2] is None (null)"),
        ({"order": "A-1", "count": 3}, 'parameters["count"] is a number (3)'),
        ([["nested"]], 'parameters[0] is a list (["nested"])'),
        (7, "not a number (7)"),
    ],
)
def test_the_offending_parameter_is_named_with_its_type(
    client: bizmsg.Client, sender: Number, parameters: Any, named: str
) -> None:
    # Regression: every bad parameter got one generic message, naming neither element nor type.
    with pytest.raises(bizmsg.ValidationError) as caught:
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters=parameters, language="en"
        )
    assert named in str(caught.value), str(caught.value)
    with pytest.raises(bizmsg.ValidationError) as at_construction:
        bizmsg.Template(name="n", parameters=parameters, language="en")
    assert str(at_construction.value) == str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"name": ""}, "template.name"),
        ({"name": "  "}, "template.name"),
        ({"name": 5}, "template.name"),
        ({"language": "english"}, "template.language"),
        ({"parameters": [1]}, "template.parameters"),
    ],
)
def test_a_template_is_validated_when_it_is_made(arguments: dict[str, Any], field: str) -> None:
    # Regression: Template(name="") was accepted until send time.
    template: dict[str, Any] = {"name": "n", "parameters": "p", "language": "en", **arguments}
    with pytest.raises(bizmsg.ValidationError) as caught:
        bizmsg.Template(**template)
    assert caught.value.field == field


def test_a_template_round_trips_through_its_wire_object() -> None:
    template = bizmsg.Template(name="order_update", parameters=["A-1", "x y"], language="en-US")
    wire = template.to_dict()
    assert wire == {"name": "order_update", "parameters": '["A-1","x y"]', "language": "en_US"}
    again = bizmsg.Template.from_dict(wire)
    assert again.to_dict() == wire
    assert bizmsg.Template.from_dict(again.to_dict()) == again
    with pytest.raises(bizmsg.ValidationError, match="'language'"):
        bizmsg.Template.from_dict({"name": "n", "parameters": "p"})


# --- other arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"name": ""}, "template.name"),
        ({"name": "   "}, "template.name"),
        ({"name": "bad\nname"}, "template.name"),
        ({"name": 5}, "template.name"),
        ({"language": ""}, "template.language"),
        ({"language": None}, "template.language"),
        ({"idempotency_key": "has space"}, "idempotency_key"),
        ({"idempotency_key": "line\nbreak"}, "idempotency_key"),
        ({"idempotency_key": ""}, "idempotency_key"),
    ],
)
def test_other_send_arguments_are_checked_before_sending(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, arguments: dict[str, Any], field: str
) -> None:
    call: dict[str, Any] = {"to": "14155550100", "from_": sender.digits, "name": "n",
                            "parameters": "p", "language": "en", **arguments}
    with pytest.raises(bizmsg.ValidationError) as caught:
        client.messages.send_template(**call)
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)
    assert sandbox.requests() == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"page_no": 0}, "page_no"),
        ({"page_no": -3}, "page_no"),
        ({"page_size": 0}, "page_size"),
        ({"page_size": 1001}, "page_size"),
        ({"page_size": True}, "page_size"),
        ({"page_no": 1.0}, "page_no"),
        ({"page_no": "2"}, "page_no"),
        ({"page_no": 2**70}, "page_no"),
    ],
)
def test_paging_arguments_are_checked_before_sending(
    sandbox: Sandbox, client: bizmsg.Client, arguments: dict[str, Any], field: str
) -> None:
    for listing in (client.business_accounts, client.business_phone_numbers):
        with pytest.raises(bizmsg.ValidationError) as caught:
            listing.list(**arguments)
        assert caught.value.field == field
    assert sandbox.requests() == []


async def test_async_calls_validate_before_sending(
    sandbox: Sandbox, aclient: bizmsg.AsyncClient, sender: Number
) -> None:
    with pytest.raises(bizmsg.ValidationError) as caught:
        await aclient.messages.send_template(
            to="123", from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert caught.value.field == "to"
    with pytest.raises(bizmsg.ValidationError) as caught:
        await aclient.messages.send(
            to="14155550100", from_=sender.digits,
            template=bizmsg.Template(name="n", parameters="p", language="english"),
        )
    assert caught.value.field == "template.language"
    with pytest.raises(bizmsg.ValidationError) as caught:
        await aclient.business_phone_numbers.list(page_size=5000)
    assert caught.value.field == "page_size"
    with pytest.raises(bizmsg.ValidationError) as caught:
        await aclient.business_accounts.list(page_no=0)
    assert caught.value.field == "page_no"
    assert sandbox.requests() == []


@given(st.integers(min_value=1, max_value=1000), st.integers(min_value=1, max_value=10**12))
def test_any_valid_paging_is_sent_as_given(
    module_sandbox: Sandbox, mclient: bizmsg.Client, page_size: int, page_no: int
) -> None:
    assume(page_no * page_size < 2**62)
    page = mclient.business_phone_numbers.list(page_no=page_no, page_size=page_size)
    record = module_sandbox.requests()[-1]
    assert record["query"] == f"pageNo={page_no}&pageSize={page_size}"
    assert (page.current, page.size) == (page_no, page_size)
