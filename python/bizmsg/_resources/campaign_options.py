"""The keywords of a campaign, declared once for ``send_many``, ``send_many_iter`` and ``plan``
of both clients.

:class:`CampaignOptions` (with :class:`PlanOptions`, the part ``plan()`` takes) names every
keyword with its type: the methods take ``**options: Unpack[CampaignOptions]``, which type
checkers and IDEs read as keyword parameters. :data:`DEFAULTS` holds the default of each, in the
order a signature lists them. The functions below check what a call gave and turn it into the
arguments of the Rust campaign (``NativeClient.campaign``) or preflight
(``NativeClient.planner``), the same for the sync and the async client; :func:`spelled_out`
shows the keywords, with their defaults, to ``help()`` and ``inspect.signature``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast

from .. import _native
from .._timeout import TimeoutArg, call_timeout
from ..errors import ValidationError

if TYPE_CHECKING:
    from .._campaign.collector import OnResult

__all__ = ["PlanOptions", "CampaignOptions", "DEFAULTS", "resolve", "start_campaign",
           "planner_arguments", "spelled_out"]


# Real classes (typing's, no dependency), not only for type checkers: their keys are also the
# keywords the methods accept at run time, so the names are written nowhere else.
class PlanOptions(TypedDict, total=False):
    """The keywords of ``plan()``; every campaign takes them too. See
    :meth:`~bizmsg._resources.messages.Messages.send_many` for what each one does."""

    rate_limit: float | None
    pace: Literal["auto"] | None
    dedupe: bool
    timeout: TimeoutArg
    max_retries: int | None


class CampaignOptions(PlanOptions, total=False):
    """The keywords of ``send_many()`` and ``send_many_iter()``: those of :class:`PlanOptions`
    and these."""

    concurrency: int
    progress: bool
    on_result: OnResult | None
    stop_on_error: bool
    stop_on_sigterm: bool
    journal: str | os.PathLike[str] | None
    campaign_id: str | None
    resend_unknown: bool
    enforce_tier: bool
    lease: float | None
    unreachable_after: int | None
    unreachable_for: float


#: The default of every keyword, in the order signatures list them.
DEFAULTS: CampaignOptions = {
    "concurrency": _native.DEFAULT_CONCURRENCY,
    "rate_limit": None,
    "pace": None,
    "progress": False,
    "on_result": None,
    "stop_on_error": False,
    "stop_on_sigterm": False,
    "journal": None,
    "campaign_id": None,
    "dedupe": True,
    "resend_unknown": False,
    "enforce_tier": True,
    "lease": None,
    "unreachable_after": _native.DEFAULT_UNREACHABLE_AFTER,
    "unreachable_for": _native.DEFAULT_UNREACHABLE_FOR,
    "timeout": None,
    "max_retries": None,
}
# Read by name below (a TypedDict is indexed by literal keys only).
_DEFAULTS: Mapping[str, Any] = DEFAULTS


def resolve(given: Mapping[str, object], keywords: type[PlanOptions],
            method: str) -> dict[str, Any]:
    """Every keyword of ``keywords``: what the call gave, else its default. A keyword that is
    not one raises the TypeError Python raises for a signature without it."""
    names = keywords.__annotations__
    for name in given:
        if name not in names:
            raise TypeError(f"{method}() got an unexpected keyword argument {name!r}")
    return {name: given.get(name, _DEFAULTS[name]) for name in names}


def start_campaign(native: _native.NativeClient, options: Mapping[str, Any], *,
                   in_loop: bool = False) -> _native.CampaignRun:
    """Starts the Rust campaign with resolved ``options`` (raises ``ValidationError`` for a bad
    one, before anything is read or sent). ``in_loop``: started by an ``AsyncClient`` in a
    running event loop, where its sends call back into Python (an async token callable)."""
    if not isinstance(options["stop_on_sigterm"], bool):
        raise ValidationError(f"invalid stop_on_sigterm: must be True or False, got "
                              f"{options['stop_on_sigterm']!r}", field="stop_on_sigterm")
    return native.campaign(
        concurrency=options["concurrency"], rate_limit=_rate(options["rate_limit"]),
        pace=_optional_text("pace", options["pace"]), stop_on_error=options["stop_on_error"],
        dedupe=options["dedupe"], journal=_journal_path(options["journal"]),
        campaign_id=_optional_text("campaign_id", options["campaign_id"]),
        resend_unknown=options["resend_unknown"], enforce_tier=options["enforce_tier"],
        lease=_seconds("lease", options["lease"]),
        unreachable_after=options["unreachable_after"],
        unreachable_for=_required_seconds("unreachable_for", options["unreachable_for"]),
        timeout=call_timeout(options["timeout"]),
        max_retries=options["max_retries"],
        in_loop=in_loop,
    )


def planner_arguments(options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``NativeClient.planner`` (and ``planner_async``) for resolved
    ``options``."""
    return {
        "rate_limit": _rate(options["rate_limit"]),
        "pace": _optional_text("pace", options["pace"]),
        "dedupe": options["dedupe"],
        "timeout": call_timeout(options["timeout"]),
        "max_retries": options["max_retries"],
    }


def _rate(rate_limit: object) -> float | None:
    # A number, not whatever float() accepts ("5" is a mistake in a rate, not a rate).
    if rate_limit is None:
        return None
    if isinstance(rate_limit, bool) or not isinstance(rate_limit, (int, float)):
        raise ValidationError(
            f"invalid rate_limit: must be a number of messages per second, got "
            f"{type(rate_limit).__name__} {rate_limit!r}", field="rate_limit")
    try:
        return float(rate_limit)
    except OverflowError:
        raise ValidationError(f"invalid rate_limit: {rate_limit} is out of range",
                              field="rate_limit") from None


def _optional_text(field: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValidationError(f"invalid {field}: must be a string, got {type(value).__name__} "
                          f"{value!r}", field=field)


def _seconds(field: str, value: object) -> float | None:
    # A number, not whatever float() accepts.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"invalid {field}: must be a number of seconds, got "
                              f"{type(value).__name__} {value!r}", field=field)
    return float(value)


def _required_seconds(field: str, value: object) -> float:
    seconds = _seconds(field, value)
    if seconds is None:
        raise ValidationError(f"invalid {field}: must be a number of seconds, got None",
                              field=field)
    return seconds


def _journal_path(journal: object) -> str | None:
    if journal is None:
        return None
    try:
        path = os.fspath(journal)  # type: ignore[call-overload]
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise ValidationError(f"invalid journal: must be a file path, got "
                              f"{type(journal).__name__} {journal!r}", field="journal")
    return path


Method = TypeVar("Method", bound=Callable[..., Any])

# The keywords of each TypedDict as signature parameters, made once (this runs at import).
_SPELLED: dict[type, list[Any]] = {}


def spelled_out(keywords: type[PlanOptions]) -> Callable[[Method], Method]:
    """Gives a method taking ``**options: Unpack[keywords]`` the signature it stands for, each
    keyword with its default, for ``help()``, ``inspect.signature`` and a notebook's completion
    (type checkers read the ``Unpack`` themselves). The keywords come before the method's own
    keyword-only parameters (``dry_run``), as they did when each was written out."""
    import inspect  # loaded already (by dataclasses): costs nothing here

    spelled = _SPELLED.get(keywords)
    if spelled is None:
        if DEFAULTS.keys() != CampaignOptions.__annotations__.keys():
            raise TypeError("every keyword of CampaignOptions needs its default in DEFAULTS")
        names = keywords.__annotations__
        # The annotations as written (strings, like the rest of the signature's).
        spelled = _SPELLED[keywords] = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                              annotation=getattr(names[name], "__forward_arg__", names[name]))
            for name, default in _DEFAULTS.items() if name in names
        ]

    def decorate(method: Method) -> Method:
        signature = inspect.signature(method)
        own = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
        leading = [p for p in own if p.kind != p.KEYWORD_ONLY]
        trailing = [p for p in own if p.kind == p.KEYWORD_ONLY]
        cast(Any, method).__signature__ = signature.replace(
            parameters=[*leading, *spelled, *trailing])
        return method

    return decorate
