"""The input of a campaign: :class:`Message`, or anything :data:`MessageLike` (a mapping of
the same fields), one per recipient."""

from __future__ import annotations

import numbers
import sys
from collections.abc import AsyncIterable, Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Protocol, Union, cast, overload

from .. import _native
from ..models import Template

__all__ = ["Message", "MessageLike", "MessageFrame", "MessageInput", "AsyncMessageInput", "restore", "rows_of", "message_columns"]


# The fields live in a Rust object (``MessageFields``) that the constructor fills in one call and
# the campaign reads directly: a campaign makes a message per row, and a frozen dataclass's own
# __init__ (one object.__setattr__ per field) was a large part of its cost. The dataclass
# decorator still gives Message its fields, repr, equality, hash, match_args and frozenness, so
# dataclasses.fields/replace/asdict work as on any frozen dataclass.
@dataclass(frozen=True, init=False)
class Message(_native.MessageFields):
    """One message of a campaign: ``template`` from the business number ``from_`` to ``to``.

    Unlike :class:`Template`, a message is not checked when it is made: a bad phone number is
    reported as that message's ``failed`` outcome (with a :class:`ValidationError`), so one bad
    row never stops a campaign. ``idempotency_key`` replaces the key bizmsg would give it.
    """

    __slots__ = ()

    to: str
    from_: str
    template: Template
    # No `= None` here: a class attribute would hide the stored field. The default is the
    # constructor's, and is recorded on the field below.
    idempotency_key: str | None

    def __reduce__(self) -> tuple[Any, ...]:
        # Every dataclass field, set again on a blank instance, as a frozen dataclass's own
        # pickling does: a subclass's fields come back too.
        return (restore, (type(self), [getattr(self, f.name) for f in fields(self)]))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass may be a dataclass with fields of its own, whose generated __init__ takes
        # them all and sets each one: it is made blank first, whatever the arguments.
        cls.__new__ = _new_subclass  # type: ignore[method-assign, assignment]


def restore(cls: type[Message], values: list[Any]) -> Message:
    """A pickled (or copied) message: its fields, in the order of ``dataclasses.fields``."""
    message = _blank(cls)
    for field_, value in zip(fields(cls), values):
        object.__setattr__(message, field_.name, value)
    return message


def _new_subclass(cls: type[Message], *args: Any, **kwargs: Any) -> Message:
    if cls.__init__ is object.__init__:
        # No __init__ of its own: the arguments are Message's.
        return _native.MessageFields.__new__(cls, *args, **kwargs)
    return _blank(cls)


def _blank(cls: type[Message]) -> Message:
    """An instance of ``cls`` whose fields are None, for the caller to set."""
    nothing: Any = None
    return _native.MessageFields.__new__(cls, nothing, nothing, nothing)


# The fields' defaults are the constructor's (the decorator took the inherited descriptors for
# defaults), so dataclasses.fields() describes Message as before.
for _name, _field in Message.__dataclass_fields__.items():
    _field.default = None if _name == "idempotency_key" else MISSING


#: What ``send_many`` takes per message: a :class:`Message`, or a mapping with ``to``, ``from``
#: (or ``from_``) and ``template`` (a :class:`Template` or a mapping), or with the template's
#: ``name``, ``parameters`` and ``language`` flat beside them; ``idempotency_key`` optional.
MessageLike = Union[Message, Mapping[str, Any]]



class MessageFrame(Protocol):
    """What a campaign also takes instead of an iterable of messages: a pandas ``DataFrame``,
    read row by row (each row a dict of its columns). Named structurally, so that bizmsg's
    types need no pandas."""

    def itertuples(self, index: bool = ..., name: str | None = ...) -> Any: ...



#: The columns of a DataFrame's row that hold a phone number: a number pandas read as an
#: integer (or, in a column with a missing value, as a float) is sent as its digits.
_NUMBER_COLUMNS = frozenset({"to", "from", "from_"})


#: What a campaign reads its messages from: any iterable of them, or a pandas DataFrame (one
#: message per row); an ``AsyncClient``'s campaign also from an async iterable.
MessageInput = Union[Iterable[MessageLike], MessageFrame]
AsyncMessageInput = Union[Iterable[MessageLike], AsyncIterable[MessageLike], MessageFrame]


@overload
def rows_of(messages: MessageInput) -> Iterable[MessageLike]: ...
@overload
def rows_of(messages: AsyncMessageInput
            ) -> Iterable[MessageLike] | AsyncIterable[MessageLike]: ...


def rows_of(messages: Any) -> Any:
    """``messages`` as a campaign reads it: a pandas DataFrame becomes its rows, each a dict
    of its columns (:class:`FrameRows`); anything else is read as it is. Whether it is a
    DataFrame is asked only when pandas was imported already (it cannot be one otherwise), so
    ``import bizmsg`` and a campaign over a list never import pandas."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(messages, pandas.DataFrame):
        return FrameRows(messages, pandas)
    return messages


class FrameRows:
    """The rows of a DataFrame as the dicts a campaign takes, made one at a time as the
    campaign reads them (``itertuples``: the frame is never copied into a list of dicts).

    A missing value (``None``, ``NaN``, ``pd.NA``, ``NaT``) leaves its column out of the row;
    ``to`` and ``from`` read as numbers (``8613800138000``, or ``8613800138000.0`` in a column
    with a missing value) are sent as their digits. Its length is the frame's, so a progress
    bar knows its total."""

    def __init__(self, frame: Any, pandas: Any) -> None:
        self._frame = frame
        self._missing = (pandas.NA, pandas.NaT)

    def __len__(self) -> int:
        return len(self._frame)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        columns = [str(column) for column in self._frame.columns]
        phone = [column in _NUMBER_COLUMNS for column in columns]
        missing = self._missing
        for values in self._frame.itertuples(index=False, name=None):
            row: dict[str, Any] = {}
            for column, number, value in zip(columns, phone, values):
                if value is None or value is missing[0] or value is missing[1] or (
                        isinstance(value, numbers.Real) and value != value):  # NaN
                    continue
                if number and not isinstance(value, bool) and isinstance(value, numbers.Real):
                    value = _digits(value)  # numpy's numbers too
                row[column] = value
            yield row


def _digits(number: Any) -> Any:
    """A phone number pandas read as a number, as its digits (a real number: Python's or
    numpy's)."""
    as_float = float(number)
    if isinstance(number, numbers.Integral):
        return str(int(number))
    if not as_float.is_integer():
        return number  # not a phone number: the campaign says so
    return str(int(as_float))


def message_columns(item: object) -> tuple[Any, Any, Any, Any, Any]:
    """``(to, from, template name, parameters, language)`` of a campaign's input item as it
    was given (``None`` for what it does not have): the columns by which a result joins back
    to its input."""
    if isinstance(item, Message):
        return (item.to, item.from_, *_template_columns(item.template))
    if isinstance(item, Mapping):
        get = cast("Mapping[str, Any]", item).get
        sender = get("from", get("from_"))
        template = get("template")
        if template is not None:
            return (get("to"), sender, *_template_columns(template))
        return (get("to"), sender, get("name"), get("parameters"), get("language"))
    return (None, None, None, None, None)


def _template_columns(template: object) -> tuple[Any, Any, Any]:
    if isinstance(template, Template):
        return (template.name, template.parameters, template.language)
    if isinstance(template, Mapping):
        get = cast("Mapping[str, Any]", template).get
        return (get("name"), get("parameters"), get("language"))
    return (None, None, None)
