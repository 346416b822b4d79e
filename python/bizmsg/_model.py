"""What every model decoded from the service keeps beside its dataclass fields: the JSON object
it was decoded from, and the metadata of the call that returned it.

The Rust core builds the models without calling ``__init__``: it fills the fields and the slots
of :class:`Model` directly. The model classes themselves are in :mod:`bizmsg.models` (and the
pages in ``_pagination``); this module also gives the notebook display what it reads of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, cast

from . import _native
from .errors import ValidationError

__all__ = ["Model", "ResponseMeta", "as_list", "dumps", "restore"]


@dataclass(frozen=True, slots=True)
class ResponseMeta:
    """How a call went: HTTP status, the service's request id, time taken, attempts made, and
    the ``Idempotency-Key`` a send went out with."""

    status_code: int
    request_id: str | None
    elapsed: timedelta
    attempts: int
    idempotency_key: str | None = None


class Model:
    """Keeps the received JSON object and the call metadata beside the dataclass fields."""

    __slots__ = ("_wire", "_meta", "_ok")
    # Set by the Rust side (or absent on objects built by hand; read with getattr): the exact
    # bytes of the JSON object the model was decoded from.
    _wire: bytes
    _meta: ResponseMeta | None
    _ok: bool | None

    #: (field name, wire name) pairs, in the spec's order.
    _WIRE_NAMES: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The name the Rust decoder knows this model by.
    _KIND: ClassVar[str] = ""
    #: The fields a display shows first (a notebook's card or table); the others are folded
    #: away. Empty: every field, in order.
    _MAIN_COLUMNS: ClassVar[tuple[str, ...]] = ()

    @property
    def meta(self) -> ResponseMeta | None:
        """Metadata of the call that returned this object (``None`` if built by hand)."""
        return getattr(self, "_meta", None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object as the service sent it: camelCase keys, unknown fields kept,
        timestamps as their original text, numbers exactly as written (a new dict each
        call)."""
        wire = getattr(self, "_wire", None)
        if wire is not None:
            return cast("dict[str, Any]", _native.json_loads(wire))
        return self._wire_from_fields()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Decodes a wire object (camelCase, as the service sends it), with the same rules
        as a response: unknown fields kept, unparseable timestamps become ``None``."""
        return _native.model_from_json(kind=cls._KIND, json=dumps(data))

    def _wire_bytes(self) -> bytes:
        wire = getattr(self, "_wire", None)
        return wire if wire is not None else dumps(self._wire_from_fields())

    def _wire_from_fields(self) -> dict[str, Any]:
        # An object built by hand or by dataclasses.replace() has no received JSON: derive it.
        out: dict[str, Any] = {}
        for name, wire_name in self._WIRE_NAMES:
            out[wire_name] = _to_wire_value(getattr(self, name))
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle and copy go through the received JSON itself, so it survives them exactly;
        # the call's metadata goes along (a copy of a result a call returned still has it).
        return (restore, (type(self), self._wire_bytes(), getattr(self, "_ok", None), None,
                          None, getattr(self, "_meta", None)))

    def _repr_html_(self) -> str:
        # Jupyter's rich display: the main fields, the rest collapsed (bizmsg/_display.py).
        from ._display import model_html

        return model_html(self)


def dumps(data: Mapping[str, Any]) -> bytes:
    """A mapping as JSON text for the Rust decoder: big integers and floats exact, NaN and
    anything that is not JSON refused with a ValidationError."""
    import json

    try:
        return json.dumps(dict(data), allow_nan=False, ensure_ascii=False,
                          separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"invalid data: it is not JSON data: {exc}", field="data") from None


def restore(cls: type[Model], wire: bytes, ok: bool | None,
            fallbacks: tuple[int, int] | None = None, item_kind: str | None = None,
            meta: ResponseMeta | None = None) -> Any:
    """A pickled (or copied) model, decoded again from its JSON, with its call's metadata."""
    obj = _native.model_from_json(kind=cls._KIND, json=wire, item_kind=item_kind,
                                  fallbacks=fallbacks)
    if ok is not None:
        object.__setattr__(obj, "_ok", ok)
    if meta is not None:
        object.__setattr__(obj, "_meta", meta)
    return obj


def _to_wire_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, Model):
        return value.to_dict()
    items = as_list(value)
    if items is not None:
        return [_to_wire_value(v) for v in items]
    return value


def as_list(value: object) -> list[Any] | None:
    """``value`` if it is a list (of any items), else ``None``."""
    # pyright sees list[Unknown] where mypy sees list[Any]; both mean "any items".
    return value if isinstance(value, list) else None  # pyright: ignore[reportUnknownVariableType]
