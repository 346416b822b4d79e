"""The input of a campaign: :class:`Message`, or anything :data:`MessageLike` (a mapping of
the same fields), one per recipient."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Union

from .. import _native
from ..models import Template

__all__ = ["Message", "MessageLike", "restore"]


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
