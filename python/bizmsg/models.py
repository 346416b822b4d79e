"""The data bizmsg returns and takes: frozen, slotted dataclasses.

The Rust core builds these objects directly from the decoded JSON. Each model also keeps the
JSON object it was decoded from, so ``to_dict()`` returns exactly what the service sent (camelCase
keys, unknown fields included), and call metadata on ``.meta`` (kept out of equality and repr):
what they share is in ``_model.py``. Pages of a listing are in ``_pagination.py`` and are
exported here too (the Rust side builds them from the classes of this module).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Optional, Union, cast

from . import _native
from ._model import Model, ResponseMeta, restore
from ._pagination import AsyncPage, BasePage, Page
from .errors import ValidationError

__all__ = [
    "Template",
    "SendResult",
    "BusinessPhoneNumber",
    "BusinessAccount",
    "Page",
    "AsyncPage",
    "BasePage",
    "ResponseMeta",
]

# Pickles made before the models' shared base moved to _model.py name this function: they load.
_restore = restore

#: What ``Template.parameters`` takes: sent unchanged when a string, else encoded as compact JSON.
TemplateParameters = Union[str, Sequence[str], Mapping[str, str]]

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    #: What ``SendResult.meta`` is: ``ResponseMeta`` on a result a call returned (the
    #: send methods return ``SendResult[ResponseMeta]``), ``ResponseMeta | None`` (the
    #: default, so plain ``SendResult`` means it) where the result may have been made by
    #: hand.
    MetaT = TypeVar("MetaT", bound=Optional[ResponseMeta], covariant=True,
                    default=Optional[ResponseMeta])
else:
    from typing import TypeVar

    # typing's TypeVar takes no default before Python 3.13; only type checkers read it.
    MetaT = TypeVar("MetaT", covariant=True)


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
class SendResult(Model, Generic[MetaT]):
    """The result of a send: ``sms_id``, ``status``, ``code`` and ``msg`` as the service sent
    them (string or number; the spec leaves the type open). ``ok`` says whether the commit
    succeeded under the client's ``success_codes``; a failed commit is raised as
    :class:`~bizmsg.SendRejectedError`, so a returned result is normally ``ok``.

    ``meta`` is the metadata of the call that returned it: a send always has it, and its
    methods return ``SendResult[ResponseMeta]``, so ``result.meta.request_id`` type-checks.
    Plain ``SendResult`` (``SendResult[ResponseMeta | None]``) is what may have been made by
    hand (``SendResult(...)``, ``from_dict``, ``dataclasses.replace``), whose ``meta`` is
    ``None``; a campaign's ``outcome.result`` is one too (a result recorded by an earlier run
    has no call of this run)."""

    sms_id: str | int | None
    status: str | int | None
    code: str | int | None
    msg: str | None

    # The wire names come from the model's one field table, in Rust (src/wire/send.rs);
    # tests/client/test_models.py holds the fields above to it.
    _WIRE_NAMES = tuple(_native.model_fields("SendResult"))
    _KIND = "SendResult"
    _MAIN_COLUMNS = ("sms_id", "status", "code", "msg")

    @property
    def meta(self) -> MetaT:
        """Metadata of the call that returned this result (``None`` if made by hand)."""
        return cast("MetaT", getattr(self, "_meta", None))

    @property
    def ok(self) -> bool:
        """Whether the commit succeeded (code in the client's success codes)."""
        judged = getattr(self, "_ok", None)
        if judged is not None:
            return bool(judged)
        # Built by hand or by replace(): judged by the default codes, as the Rust side would.
        return _native.is_success_code(self.code, _native.DEFAULT_SUCCESS_CODES)


@dataclass(frozen=True, slots=True)
class BusinessPhoneNumber(Model):
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

    _WIRE_NAMES = tuple(_native.model_fields("BusinessPhoneNumber"))
    _KIND = "BusinessPhoneNumber"
    _MAIN_COLUMNS = ("phone_number_id", "display_phone_number", "verified_name", "status",
                     "quality_rating", "messaging_limit_tier", "create_time")


@dataclass(frozen=True, slots=True)
class BusinessAccount(Model):
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

    _WIRE_NAMES = tuple(_native.model_fields("BusinessAccount"))
    _KIND = "BusinessAccount"
    # The numbers last: expanded in place, they widen only the last column.
    _MAIN_COLUMNS = ("biz_account_id", "name", "status", "account_review_status",
                     "chat_business_manager_messaging_limit", "business_phone_numbers")
