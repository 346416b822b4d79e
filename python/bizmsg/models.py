"""The data bizmsg returns and takes: frozen, slotted dataclasses.

The Rust core builds these objects directly from the decoded JSON. Each model also keeps the
JSON object it was decoded from, so ``to_dict()`` returns exactly what the service sent (camelCase
keys, unknown fields included), and call metadata on ``.meta`` (kept out of equality and repr).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, TypeVar, Union, cast

from . import _native
from .errors import BizmsgError, ValidationError

__all__ = [
    "Template",
    "SendResult",
    "BusinessPhoneNumber",
    "BusinessAccount",
    "Page",
    "AsyncPage",
    "ResponseMeta",
]

#: What ``Template.parameters`` takes: sent unchanged when a string, else encoded as compact JSON.
TemplateParameters = Union[str, Sequence[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Template:
    """A message template: its ``name``, the variable ``parameters`` and the ``language`` code.

    ``parameters`` given as a list or mapping of strings is sent as a compact JSON string
    (``["A1","B2"]``); a string is sent unchanged. ``language`` accepts ``en``, ``en_US``,
    ``es_419`` and the ``en-US`` spelling (sent as ``en_US``).

    A template is checked when it is made, with the same rules and messages as a send:
    an empty name, a parameter that is not a string (``parameters[1] is a number (2)``) or a
    language that is not a code raise :class:`~bizmsg.ValidationError` at once.
    """

    name: str
    parameters: TemplateParameters
    language: str

    def __post_init__(self) -> None:
        _native.template_wire(self.name, self.parameters, self.language)

    def to_dict(self) -> dict[str, str]:
        """The wire object ``{"name", "parameters", "language"}`` as a send carries it:
        parameters encoded as their string, the language normalized (``en-US`` -> ``en_US``)."""
        name, parameters, language = _native.template_wire(self.name, self.parameters,
                                                           self.language)
        return {"name": name, "parameters": parameters, "language": language}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Template:
        """A template from its wire object ``{"name", "parameters", "language"}`` (unknown keys
        are ignored); ``Template.from_dict(t.to_dict()) == t`` for a template built from wire
        values."""
        missing = [key for key in ("name", "parameters", "language") if key not in data]
        if missing:
            raise ValidationError(
                f"a template needs {', '.join(repr(key) for key in missing)}; got keys "
                f"{sorted(map(str, data))}",
                field="template",
            )
        return cls(name=data["name"], parameters=data["parameters"], language=data["language"])


@dataclass(frozen=True, slots=True)
class ResponseMeta:
    """How a call went: HTTP status, the service's request id, time taken, attempts made, and
    the ``Idempotency-Key`` a send went out with."""

    status_code: int
    request_id: str | None
    elapsed: timedelta
    attempts: int
    idempotency_key: str | None = None


class _Model:
    """Keeps the received JSON object and the call metadata beside the dataclass fields."""

    __slots__ = ("_wire", "_meta", "_ok", "_next")
    # Set by the Rust side (or absent on objects built by hand; read with getattr): the exact
    # bytes of the JSON object the model was decoded from.
    _wire: bytes
    _meta: ResponseMeta | None
    _ok: bool | None
    _next: tuple[Any, _native.Listing, int, Any, int | None] | None

    #: (field name, wire name) pairs, in the spec's order.
    _WIRE_NAMES: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The name the Rust decoder knows this model by.
    _KIND: ClassVar[str] = ""

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
        return _native.model_from_json(cls._KIND, _dumps(data))

    def _wire_bytes(self) -> bytes:
        wire = getattr(self, "_wire", None)
        return wire if wire is not None else _dumps(self._wire_from_fields())

    def _wire_from_fields(self) -> dict[str, Any]:
        # An object built by hand or by dataclasses.replace() has no received JSON: derive it.
        out: dict[str, Any] = {}
        for name, wire_name in self._WIRE_NAMES:
            out[wire_name] = _to_wire_value(getattr(self, name))
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle and copy go through the received JSON itself, so it survives them exactly.
        return (_restore, (type(self), self._wire_bytes(), getattr(self, "_ok", None)))

    def _repr_html_(self) -> str:
        # Jupyter's rich display: the main fields, the rest collapsed (bizmsg/_display.py).
        from ._display import model_html

        return model_html(self)


def _dumps(data: Mapping[str, Any]) -> bytes:
    """A mapping as JSON text for the Rust decoder: big integers and floats exact, NaN and
    anything that is not JSON refused with a ValidationError."""
    import json

    try:
        return json.dumps(dict(data), allow_nan=False, ensure_ascii=False,
                          separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"invalid data: it is not JSON data: {exc}", field="data") from None


def _restore(cls: type[_Model], wire: bytes, ok: bool | None,
             fallbacks: tuple[int, int] | None = None, item_kind: str | None = None) -> Any:
    obj = _native.model_from_json(cls._KIND, wire, item_kind, fallbacks)
    if ok is not None:
        object.__setattr__(obj, "_ok", ok)
    return obj


def _to_wire_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, _Model):
        return value.to_dict()
    items = _as_list(value)
    if items is not None:
        return [_to_wire_value(v) for v in items]
    return value


def _as_list(value: object) -> list[Any] | None:
    # pyright sees list[Unknown] where mypy sees list[Any]; both mean "any items".
    return value if isinstance(value, list) else None  # pyright: ignore[reportUnknownVariableType]


@dataclass(frozen=True, slots=True)
class SendResult(_Model):
    """The result of a send: ``sms_id``, ``status``, ``code`` and ``msg`` as the service sent
    them (string or number; the spec leaves the type open). ``ok`` says whether the commit
    succeeded under the client's ``success_codes``; a failed commit is raised as
    :class:`~bizmsg.SendRejectedError`, so a returned result is normally ``ok``."""

    sms_id: str | int | None
    status: str | int | None
    code: str | int | None
    msg: str | None

    _WIRE_NAMES = (("sms_id", "smsId"), ("status", "status"), ("code", "code"), ("msg", "msg"))
    _KIND = "SendResult"

    @property
    def ok(self) -> bool:
        """Whether the commit succeeded (code in the client's success codes)."""
        judged = getattr(self, "_ok", None)
        if judged is not None:
            return bool(judged)
        # Built by hand or by replace(): judged by the default codes, as the Rust side would.
        return _native.is_success_code(self.code, _native.DEFAULT_SUCCESS_CODES)


@dataclass(frozen=True, slots=True)
class BusinessPhoneNumber(_Model):
    """A business phone number. Enumerated fields are plain strings: values the spec never
    showed (``YELLOW``, ``TIER_10K``) pass through unchanged. Timestamps are timezone-aware;
    one that cannot be parsed is ``None`` (its text stays in ``to_dict()``)."""

    biz_account_id: str | None
    phone_number_id: str
    display_phone_number: str | None
    verified_name: str | None
    status: str | None
    quality_rating: str | None
    code_verification_status: str | None
    throughput: str | None
    messaging_limit_tier: str | None
    create_time: datetime | None
    update_time: datetime | None

    _WIRE_NAMES = (
        ("biz_account_id", "bizAccountId"),
        ("phone_number_id", "phoneNumberId"),
        ("display_phone_number", "displayPhoneNumber"),
        ("verified_name", "verifiedName"),
        ("status", "status"),
        ("quality_rating", "qualityRating"),
        ("code_verification_status", "codeVerificationStatus"),
        ("throughput", "throughput"),
        ("messaging_limit_tier", "messagingLimitTier"),
        ("create_time", "createTime"),
        ("update_time", "updateTime"),
    )
    _KIND = "BusinessPhoneNumber"


@dataclass(frozen=True, slots=True)
class BusinessAccount(_Model):
    """A business account with its phone numbers (``business_phone_numbers``)."""

    biz_account_id: str
    name: str | None
    status: str | None
    business_verification_status: str | None
    account_review_status: str | None
    chat_business_manager_messaging_limit: str | None
    business_phone_numbers: list[BusinessPhoneNumber]
    create_time: datetime | None
    update_time: datetime | None

    _WIRE_NAMES = (
        ("biz_account_id", "bizAccountId"),
        ("name", "name"),
        ("status", "status"),
        ("business_verification_status", "businessVerificationStatus"),
        ("account_review_status", "accountReviewStatus"),
        ("chat_business_manager_messaging_limit", "chatBusinessManagerMessagingLimit"),
        ("business_phone_numbers", "businessPhoneNumbers"),
        ("create_time", "createTime"),
        ("update_time", "updateTime"),
    )
    _KIND = "BusinessAccount"


T = TypeVar("T", BusinessAccount, BusinessPhoneNumber)


@dataclass(frozen=True, slots=True)
class Page(_Model, Generic[T]):
    """One page of a listing: ``data`` and the envelope (``total``, ``size``, ``current``,
    ``pages``). ``total`` and ``pages`` are ``None`` when the service leaves them out; ``size``
    and ``current`` then fall back to what was requested. Iterating a page iterates ``data``."""

    data: list[T]
    total: int | None
    size: int
    current: int
    pages: int | None

    _WIRE_NAMES = (
        ("data", "data"),
        ("total", "total"),
        ("size", "size"),
        ("current", "current"),
        ("pages", "pages"),
    )
    _KIND = "Page"

    def __iter__(self) -> Iterator[T]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        # A sync and an async client's pages of the same data are equal: AsyncPage differs only
        # in how it fetches the next page, which is not part of the page's value.
        if not isinstance(other, Page):
            return NotImplemented
        return self._value() == other._value()

    def _value(self) -> tuple[object, ...]:
        return (self.data, self.total, self.size, self.current, self.pages)

    def has_next_page(self) -> bool:
        """Whether another page may follow: ``current < pages``; without ``pages``,
        ``current * size < total``; without either, whether this page was full. An empty
        page is always the last."""
        return _native.has_next_page(self.current, self.size, len(self.data), self.pages,
                                     self.total)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Decodes a page envelope. Its items are read as phone numbers when the first one
        has a ``phoneNumberId``, else as accounts."""
        items: object = data.get("data")
        first: object = items[0] if isinstance(items, list) and items else None  # pyright: ignore[reportUnknownVariableType]
        numbers = isinstance(first, Mapping) and "phoneNumberId" in first
        kind = "BusinessPhoneNumber" if numbers else "BusinessAccount"
        return _native.model_from_json(cls._KIND, _dumps(data), kind)

    def __reduce__(self) -> tuple[Any, ...]:
        # The item kind travels (a page of accounts stays one whatever its items hold), and
        # `current` and `size` too: decoding falls back on them when the service left them
        # out, so an unpickled page equals the original.
        kind = type(self.data[0])._KIND if self.data else "BusinessPhoneNumber"
        return (_restore, (type(self), self._wire_bytes(), None, (self.current, self.size),
                           kind))

    def next_page(self) -> Page[T] | None:
        """Fetches the page after this one with the client, page size and options that
        fetched this one; ``None`` when this is the last page."""
        if not self.has_next_page():
            return None
        native, kind, size, timeout, max_retries = self._source()
        page = cast("Page[T]", native.list(kind, self.current + 1, size, False, timeout, max_retries))
        object.__setattr__(page, "_next", self._next)
        return page

    async def next_page_async(self) -> Page[T] | None:
        """Awaitable :meth:`next_page` (for pages of an :class:`~bizmsg.AsyncClient`, or any)."""
        if not self.has_next_page():
            return None
        native, kind, size, timeout, max_retries = self._source()
        page = cast(
            "Page[T]", await native.list_async(kind, self.current + 1, size, False, timeout, max_retries)
        )
        object.__setattr__(page, "_next", self._next)
        return page

    def _source(self) -> tuple[Any, _native.Listing, int, Any, int | None]:
        source: tuple[Any, _native.Listing, int, Any, int | None] | None = getattr(self, "_next", None)
        if source is None:
            raise BizmsgError(
                "this page was not fetched by a client (built by from_dict, unpickled or "
                "copied), so it cannot fetch the next one"
            )
        return source

    def to_records(self) -> list[dict[str, Any]]:
        """The items as plain dicts keyed by field name (nested phone numbers as dicts too);
        values as on the models (timestamps are ``datetime`` or ``None``)."""
        from ._frames import record

        return [record(item) for item in self.data]

    def to_pandas(self, *, explode: bool = False) -> Any:
        """The items as a ``pandas.DataFrame`` (``pip install 'bizmsg[pandas]'``).

        Columns are the snake_case field names; timestamps are ``datetime64[ns, UTC]``
        columns (``NaT`` for a missing or unparseable one). A page of accounts gives one row
        per account: ``business_phone_numbers`` holds the **count** of its numbers and
        ``phone_number_ids`` the list of their ids. ``explode=True`` gives one row per
        (account, number) instead, with the number's fields prefixed ``number_``
        (``number_phone_number_id``, ``number_status``, ...); an account without numbers
        keeps one row with those columns empty. For a page of numbers ``explode`` changes
        nothing. :func:`bizmsg.to_pandas` does the same for any iterable of models.
        """
        from ._frames import models_to_frame

        return models_to_frame(self.data, explode=explode, what="Page.to_pandas()")

    def _repr_html_(self) -> str:
        # The columns that matter, badges, UTC timestamps, the rest collapsed (_display.py).
        from ._display import page_html

        return page_html(self)


@dataclass(frozen=True, slots=True, eq=False)  # Page.__eq__: equal to a sync page of the same data
class AsyncPage(Page[T]):
    """A page fetched by an :class:`~bizmsg.AsyncClient`: a :class:`Page` whose
    :meth:`next_page` is awaitable (``await page.next_page()``), so paging never blocks the
    event loop. ``next_page_async`` is the same call."""

    async def next_page(self) -> AsyncPage[T] | None:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        """Fetches the page after this one with the client, page size and options that
        fetched this one; ``None`` when this is the last page."""
        if not self.has_next_page():
            return None
        native, kind, size, timeout, max_retries = self._source()
        page = cast("AsyncPage[T]", await native.list_async(kind, self.current + 1, size, False,
                                                             timeout, max_retries))
        object.__setattr__(page, "_next", self._next)
        return page

    async def next_page_async(self) -> AsyncPage[T] | None:
        """The same as :meth:`next_page`."""
        return await self.next_page()
