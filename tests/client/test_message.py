"""``bizmsg.Message``: a frozen dataclass whose fields are held by a Rust object (so a campaign
makes and reads one per row cheaply). Everything a dataclass user relies on must hold."""

from __future__ import annotations

import copy
import dataclasses
import gc
import inspect
import pickle
import weakref
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bizmsg
from bizmsg.testing import Sandbox
from campaign_support import recipient
from conftest import Number

TEMPLATE = bizmsg.Template(name="order_update", parameters="A-1", language="en_US")
FIELDS = ("to", "from_", "template", "idempotency_key")


def make(**changes: Any) -> bizmsg.Message:
    values: dict[str, Any] = {"to": "8613800000001", "from_": "15550001111",
                              "template": TEMPLATE}
    values.update(changes)
    return bizmsg.Message(**values)


def test_it_is_a_frozen_dataclass_with_its_four_fields() -> None:
    message = make()
    assert dataclasses.is_dataclass(bizmsg.Message) and dataclasses.is_dataclass(message)
    fields = dataclasses.fields(message)
    assert tuple(f.name for f in fields) == FIELDS
    assert [f.default for f in fields] == [dataclasses.MISSING] * 3 + [None]
    assert bizmsg.Message.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert bizmsg.Message.__match_args__ == FIELDS
    assert str(inspect.signature(bizmsg.Message)) == (
        "(to, from_, template, idempotency_key=None)")


def test_positional_and_keyword_construction_and_the_default_key() -> None:
    positional = bizmsg.Message("8613800000001", "15550001111", TEMPLATE, "key-1")
    assert (positional.to, positional.from_, positional.template, positional.idempotency_key) \
        == ("8613800000001", "15550001111", TEMPLATE, "key-1")
    assert make().idempotency_key is None


@pytest.mark.parametrize("args, kwargs, names", [
    ((), {}, "to"),
    (("1",), {}, "from_"),
    (("1", "2"), {}, "template"),
    (("1", "2", TEMPLATE, None, "extra"), {}, "5"),
    (("1", "2", TEMPLATE), {"colour": "red"}, "colour"),
    (("1",), {"to": "2", "from_": "3", "template": TEMPLATE}, "to"),
])
def test_a_wrong_call_is_a_type_error_naming_the_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], names: str
) -> None:
    with pytest.raises(TypeError, match=names):
        bizmsg.Message(*args, **kwargs)


def test_replace_asdict_and_astuple() -> None:
    message = make(idempotency_key="k")
    changed = dataclasses.replace(message, to="8613800000002")
    assert type(changed) is bizmsg.Message
    assert (changed.to, changed.from_, changed.template, changed.idempotency_key) == (
        "8613800000002", "15550001111", TEMPLATE, "k")
    assert message.to == "8613800000001"
    assert dataclasses.asdict(message) == {
        "to": "8613800000001", "from_": "15550001111",
        "template": {"name": "order_update", "parameters": "A-1", "language": "en_US"},
        "idempotency_key": "k"}
    assert dataclasses.astuple(make()) == (
        "8613800000001", "15550001111", ("order_update", "A-1", "en_US"), None)


def test_equality_hash_and_repr_are_the_dataclass_ones() -> None:
    assert make() == make() and hash(make()) == hash(make())
    assert make() != make(to="8613800000002")
    assert make() != make(idempotency_key="k")
    assert make() != ("8613800000001", "15550001111", TEMPLATE, None)  # type: ignore[comparison-overlap]
    assert len({make(), make(), make(idempotency_key="k")}) == 2
    assert repr(make()) == (
        "Message(to='8613800000001', from_='15550001111', template=Template("
        "name='order_update', parameters='A-1', language='en_US'), idempotency_key=None)")
    # As before: a template holding a list makes the message unhashable, like any dataclass.
    listed = make(template=bizmsg.Template(name="n", parameters=["a"], language="en"))
    with pytest.raises(TypeError, match="unhashable"):
        hash(listed)


def test_it_cannot_be_changed() -> None:
    message = make()
    for name in (*FIELDS, "other"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, name, "x")
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(message, name)
    assert message == make()
    assert not hasattr(message, "__dict__")


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_copy_and_deepcopy(protocol: int) -> None:
    message = make(idempotency_key="k")
    for twin in (pickle.loads(pickle.dumps(message, protocol)), copy.copy(message),
                 copy.deepcopy(message)):
        assert type(twin) is bizmsg.Message and twin == message


def test_pattern_matching() -> None:
    match make(idempotency_key="k"):
        case bizmsg.Message(to, from_, bizmsg.Template(name=name), key):
            assert (to, from_, name, key) == ("8613800000001", "15550001111", "order_update", "k")
        case _:
            pytest.fail("a Message did not match its own class pattern")


TEXT_OR_ANYTHING = st.one_of(st.text(), st.none(), st.integers(), st.lists(st.text(), max_size=3))


@given(to=TEXT_OR_ANYTHING, from_=TEXT_OR_ANYTHING, template=TEXT_OR_ANYTHING,
       key=TEXT_OR_ANYTHING)
def test_any_values_are_kept_as_given_unchecked(
    to: Any, from_: Any, template: Any, key: Any
) -> None:
    """Nothing is checked when a message is made (a bad row is that message's failed outcome),
    and each field is the very object given, through replace and pickle too."""
    message = bizmsg.Message(to, from_, template, key)
    assert message.to is to and message.from_ is from_ and message.template is template
    assert message.idempotency_key is key
    assert dataclasses.replace(message) == message
    assert pickle.loads(pickle.dumps(message)) == message


def test_a_campaign_takes_subclasses_and_reports_bad_fields_per_message(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    @dataclasses.dataclass(frozen=True, init=False)
    class Tagged(bizmsg.Message):
        __slots__ = ()

        @property
        def tag(self) -> str:
            return f"row for {self.to}"

    items = [Tagged(recipient(1), sender.digits, TEMPLATE),
             bizmsg.Message(12345, sender.digits, TEMPLATE),  # type: ignore[arg-type]
             bizmsg.Message(recipient(2), sender.digits, TEMPLATE, idempotency_key="chosen-key"),
             bizmsg.Message(recipient(3), sender.digits, None)]  # type: ignore[arg-type]
    result = client.messages.send_many(items)
    assert [o.status for o in result] == ["sent", "failed", "sent", "failed"]
    assert result.outcomes[0].message.tag == f"row for {recipient(1)}"
    assert [type(o.error).__name__ for o in result.failed()] == ["ValidationError"] * 2
    assert [getattr(o.error, "field", None) for o in result.failed()] == ["to", "template"]
    assert result.outcomes[2].idempotency_key == "chosen-key"
    keys = {r["body"]["to"]: r["headers"].get("idempotency-key")
            for r in sandbox.sent_messages()}
    assert keys[recipient(2)] == "chosen-key"


@dataclasses.dataclass(frozen=True)
class WithRow(bizmsg.Message):
    """A subclass as users write them: a frozen dataclass adding a field (its own __init__)."""

    row: int = 0


def test_a_dataclass_subclass_with_fields_of_its_own_works_as_before(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    made = WithRow(recipient(1), sender.digits, TEMPLATE, row=7)
    assert (made.to, made.from_, made.template, made.idempotency_key, made.row) == (
        recipient(1), sender.digits, TEMPLATE, None, 7)
    assert [f.name for f in dataclasses.fields(made)] == [*FIELDS, "row"]
    assert made == WithRow(recipient(1), sender.digits, TEMPLATE, None, 7)
    assert made != make(to=recipient(1), from_=sender.digits)
    assert repr(made).startswith("WithRow(to=") and repr(made).endswith("row=7)")
    assert dataclasses.replace(made, row=8).row == 8
    assert pickle.loads(pickle.dumps(made)) == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.row = 9  # type: ignore[misc]
    with pytest.raises(TypeError, match="colour"):
        WithRow(recipient(1), sender.digits, TEMPLATE, row=1, colour="red")  # type: ignore[call-arg]
    result = client.messages.send_many([made, WithRow(recipient(2), sender.digits, TEMPLATE)])
    assert [(o.status, o.message.row) for o in result] == [("sent", 7), ("sent", 0)]


def test_a_message_in_a_reference_cycle_is_collected() -> None:
    """The fields are visible to Python's cycle collector (a template dict may refer back to
    the message it is in)."""
    class Probe:
        pass

    template: dict[str, Any] = {"name": "n", "parameters": "p", "language": "en",
                                "probe": Probe()}
    message = bizmsg.Message("8613800000001", "15550001111", template)  # type: ignore[arg-type]
    template["message"] = message
    watch = weakref.ref(template["probe"])
    del message, template
    gc.collect()
    assert watch() is None
