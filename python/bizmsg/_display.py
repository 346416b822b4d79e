"""Notebook display: HTML for models, pages and errors, and the short traceback IPython shows
for a bizmsg error.

Imported on first display only (``import bizmsg`` never loads it, nor ``html``). The markup uses
inline styles only (notebook renderers drop or scope ``<style>`` blocks), sets no text colour
(the theme's is used) and tints badges with semi-transparent backgrounds, so it reads in light
and dark themes alike. Alignment, striping and fonts are left to the host, as for a DataFrame.
Every text that comes from the service or the caller is escaped.

It imports no other module of bizmsg (the models import it when they are displayed): what it
shows of a model, the model says itself, in its class attributes ``_MAIN_COLUMNS`` (the
columns shown first) and ``_WIRE_NAMES`` (its field table).
"""

from __future__ import annotations

import html
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ._model import Model
    from ._pagination import BasePage

__all__ = ["model_html", "page_html", "error_html", "error_traceback", "format_time",
           "bulk_result_html", "plan_html"]

_esc = html.escape

# --- columns ---------------------------------------------------------------------------------

TEXT, BADGE, TIME, NUMBERS = "text", "badge", "time", "numbers"

#: How a field is shown: (header label, kind). Fields not listed are shown as text under their
#: name; a datetime value is shown as a time whatever its field.
_FIELDS: dict[str, tuple[str, str]] = {
    "biz_account_id": ("account id", TEXT),
    "phone_number_id": ("phone number id", TEXT),
    "display_phone_number": ("display number", TEXT),
    "verified_name": ("verified name", TEXT),
    "name": ("name", TEXT),
    "status": ("status", BADGE),
    "quality_rating": ("quality", BADGE),
    "code_verification_status": ("code verification", BADGE),
    "business_verification_status": ("business verification", BADGE),
    "account_review_status": ("review", BADGE),
    "messaging_limit_tier": ("tier", TEXT),
    "chat_business_manager_messaging_limit": ("limit", TEXT),
    "business_phone_numbers": ("numbers", NUMBERS),
    "throughput": ("throughput", TEXT),
    "create_time": ("created (UTC)", TIME),
    "update_time": ("updated (UTC)", TIME),
    "sms_id": ("sms id", TEXT),
    "code": ("code", TEXT),
    "msg": ("msg", TEXT),
}

#: The columns of the numbers nested in an account row (narrow: they sit in one cell).
_NESTED_NUMBER = (
    "display_phone_number", "phone_number_id", "status", "quality_rating", "messaging_limit_tier",
)

# --- styles (kept short: they repeat on every row of a long page) ----------------------------

_GREEN = frozenset({"GREEN", "CONNECTED", "VERIFIED", "ACTIVE", "APPROVED", "ACCEPTED"})
_AMBER = frozenset({"YELLOW", "PENDING", "PENDING_REVIEW", "IN_REVIEW", "FLAGGED"})
_RED = frozenset({
    "RED", "DISCONNECTED", "BANNED", "REJECTED", "FAILED", "DISABLED", "SUSPENDED",
    "RESTRICTED", "DELETED",
})
# Tints, not colours: the text keeps the theme's colour on any background.
_TINT = {"green": "#2ea04340", "amber": "#d2992240", "red": "#e5534b40", "grey": "#8b949e33"}
_BADGE = "<span style='background:{};border-radius:4px;padding:0 5px;white-space:nowrap'>{}</span>"
_TABLE = "<table style='margin:0;font-size:12px'>"
_SMALL_TABLE = "<table style='margin:2px 0;font-size:11px'>"
_CAPTION = ("<caption style='text-align:left;caption-side:top;padding:2px 0;font-size:12px'>"
            "{}</caption>")
_SUMMARY = "<summary style='cursor:pointer;font-size:12px'>{}</summary>"
_LEFT = " style='text-align:left'"
# Cells of the small tables nested in a row: tight, never wrapped.
_NESTED = " style='text-align:left;white-space:nowrap;padding:2px 6px'"
_MUTED = "opacity:.65"


def badge_tone(value: object) -> str:
    """``green``, ``amber``, ``red`` or ``grey`` for a status-like value (case ignored)."""
    key = str(value).upper()
    if key in _GREEN:
        return "green"
    if key in _AMBER:
        return "amber"
    if key in _RED:
        return "red"
    return "grey"


def _badge(value: object) -> str:
    if value is None or value == "":
        return ""
    return _BADGE.format(_TINT[badge_tone(value)], _esc(str(value)))


def format_time(value: datetime) -> str:
    """A timestamp in the one form the HTML uses: UTC, to the second, ``2024-03-05 02:15:30Z``
    (naive values are taken as UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M:%SZ")


def _time_cell(item: object, name: str, value: object, tag: str = "td", extra: str = "") -> str:
    # The received text, as the service sent it, goes in the tooltip.
    wire = received(item)
    original: object = None
    if wire is not None:
        original = wire.get(wire_names(type(item)).get(name, name))
    if isinstance(value, datetime):
        shown = format_time(value).replace(" ", "\u00a0")  # never wrapped at the space
        title = original if isinstance(original, str) else value.isoformat(timespec="milliseconds")
        return f"<{tag}{extra} title='{_esc(title)}'>{shown}</{tag}>"
    if original is None or original == "":
        return f"<{tag}{extra}></{tag}>"
    # Not a timestamp bizmsg could read (the field is None): show the text, dimmed.
    return (f"<{tag}{extra} title='not a timestamp bizmsg could read'>"
            f"<span style='{_MUTED}'>{_esc(str(original))}</span></{tag}>")


def _text(value: object) -> str:
    if value is None:
        return ""
    items = as_list(value)
    if items is not None:
        return f"[{len(items)} items]"
    if isinstance(value, datetime):
        return format_time(value)
    return _esc(str(value))


def _kind(name: str, value: object) -> str:
    kind = _FIELDS.get(name, (name, TEXT))[1]
    if kind == TEXT and isinstance(value, datetime):
        return TIME
    return kind


def _label(name: str) -> str:
    return _FIELDS.get(name, (name.replace("_", " "), TEXT))[0]


def _header(names: Sequence[str], extra: str = "") -> str:
    cells = "".join(f"<th{extra} title='{_esc(n)}'>{_esc(_label(n))}</th>" for n in names)
    return f"<thead><tr>{cells}</tr></thead>"


def _cell(item: object, name: str, tag: str = "td", extra: str = "") -> str:
    value = getattr(item, name, None)
    kind = _kind(name, value)
    if kind == TIME:
        return _time_cell(item, name, value, tag, extra)
    if kind == BADGE:
        return f"<{tag}{extra}>{_badge(value)}</{tag}>"
    items = as_list(value)
    if kind == NUMBERS and items is not None:
        return f"<{tag}{extra}>{_numbers(items)}</{tag}>"
    return f"<{tag}{extra}>{_text(value)}</{tag}>"


def _numbers(numbers: list[Any]) -> str:
    """An account's numbers: their count, expandable in place into a small table."""
    if not numbers:
        return "0"
    label = f"{len(numbers)} number{'s' if len(numbers) != 1 else ''}"
    rows = "".join(
        "<tr>" + "".join(_cell(n, name, extra=_NESTED) for name in _NESTED_NUMBER) + "</tr>"
        for n in numbers
    )
    return (f"<details>{_SUMMARY.format(label)}{_SMALL_TABLE}"
            f"{_header(_NESTED_NUMBER, _NESTED)}<tbody>{rows}</tbody></table></details>")


def _field_names(item: object) -> list[str]:
    return [f.name for f in fields(item)]  # type: ignore[arg-type]


def _split(item: object) -> tuple[list[str], list[str]]:
    """The columns a model shows first (its ``_MAIN_COLUMNS``, else all), and the others."""
    names = _field_names(item)
    first: tuple[str, ...] = getattr(type(item), "_MAIN_COLUMNS", None) or tuple(names)
    main = [n for n in first if n in names]
    return main, [n for n in names if n not in main]


def as_list(value: object) -> list[Any] | None:
    """``value`` if it is a list (of any items), else ``None``."""
    # pyright sees list[Unknown] where mypy sees list[Any]; both mean "any items".
    return value if isinstance(value, list) else None  # pyright: ignore[reportUnknownVariableType]


def received(item: object) -> dict[str, Any] | None:
    """The JSON object a model was decoded from (``None`` for one built by hand, or for
    anything that is not a model)."""
    to_dict = getattr(item, "to_dict", None)
    if getattr(item, "_wire", None) is None or to_dict is None:
        return None
    wire: dict[str, Any] = to_dict()
    return wire


_WIRE_NAMES: dict[type, dict[str, str]] = {}


def wire_names(cls: type) -> dict[str, str]:
    """Field name to wire name (``sms_id`` -> ``smsId``) for the fields of a model class (its
    ``_WIRE_NAMES`` table; none for anything else)."""
    names = _WIRE_NAMES.get(cls)
    if names is None:
        names = _WIRE_NAMES[cls] = dict(getattr(cls, "_WIRE_NAMES", ()))
    return names


# --- one model -------------------------------------------------------------------------------


def _committed(item: object) -> bool | None:
    """Whether a send result's commit succeeded (its ``ok``); ``None`` for other models."""
    if not isinstance(getattr(type(item), "ok", None), property):
        return None
    return bool(getattr(item, "ok"))


def model_html(item: Model) -> str:
    """A card: the main fields, one per line; the others (and fields the service sent that
    bizmsg does not know) in a collapsed block; the call's metadata when there is one."""
    meta = item.meta
    main, rest = _split(item)
    name = type(item).__name__
    caption = _esc(name)
    ok = _committed(item)
    if ok is not None:
        caption += " " + _BADGE.format(_TINT["green" if ok else "red"],
                                       "committed" if ok else "not committed")
    rows = "".join(_card_row(item, n) for n in main)
    out = [f"<div>{_TABLE}{_CAPTION.format(caption)}<tbody>{rows}</tbody></table>"]
    more = "".join(_card_row(item, n) for n in rest)
    unknown, unknown_rows = _unknown_fields(item)
    if more or unknown:
        names = ", ".join(_label(n) for n in rest)
        if unknown:
            names += (", " if names else "") + f"{unknown} more sent by the service"
        out.append(f"<details>{_SUMMARY.format('more fields: ' + _esc(names))}{_TABLE}"
                   f"<tbody>{more}{unknown_rows}</tbody></table></details>")
    if meta is not None:
        pairs = [("HTTP status", meta.status_code), ("request id", meta.request_id),
                 ("attempts", meta.attempts),
                 ("elapsed", f"{meta.elapsed.total_seconds() * 1000:.1f} ms"),
                 ("idempotency key", meta.idempotency_key)]
        meta_rows = "".join(
            f"<tr><th{_LEFT}>{_esc(k)}</th><td{_LEFT}>{_text(v)}</td></tr>"
            for k, v in pairs if v is not None
        )
        out.append(f"<details>{_SUMMARY.format('call')}{_TABLE}<tbody>{meta_rows}</tbody>"
                   "</table></details>")
    out.append("</div>")
    return "".join(out)


def _card_row(item: object, name: str) -> str:
    head = f"<th{_LEFT} title='{_esc(name)}'>{_esc(_label(name))}</th>"
    value = getattr(item, name, None)
    items = as_list(value)
    if _kind(name, value) == NUMBERS and items:
        # One account on its own: its numbers are the point, so they start expanded.
        cell = _numbers(items).replace("<details>", "<details open>", 1)
        return f"<tr>{head}<td{_LEFT}>{cell}</td></tr>"
    return f"<tr>{head}{_cell(item, name, extra=_LEFT)}</tr>"


def _unknown_fields(item: Model) -> tuple[int, str]:
    wire = received(item)
    if not wire:
        return 0, ""
    known = set(wire_names(type(item)).values())
    extra = [(k, v) for k, v in wire.items() if k not in known]
    rows = "".join(
        f"<tr><th{_LEFT} title='not a field of {_esc(type(item).__name__)}; in to_dict()'>"
        f"{_esc(k)}</th><td{_LEFT}>{_esc(_short(repr(v)))}</td></tr>"
        for k, v in extra
    )
    return len(extra), rows


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- a page ----------------------------------------------------------------------------------


def _caption(page: BasePage[Any], kind: str) -> str:
    where = f"page {page.current}" + (f" of {page.pages}" if page.pages is not None else "")
    count = f"{len(page.data)}" + (f" of {page.total}" if page.total is not None else "")
    return f"{kind} · {where} · {count} item{'s' if (page.total or len(page.data)) != 1 else ''}"


def page_html(page: BasePage[Any]) -> str:
    """The items as a table of the columns that matter, the other fields in a collapsed
    table below (keyed by the item's id). All rows are shown; cells stay plain text except
    badges and timestamps."""
    if not page.data:
        return f"<div>{_esc(_caption(page, 'Page'))}: no items</div>"
    first = page.data[0]
    main, rest = _split(first)
    caption = _CAPTION.format(_esc(_caption(page, type(first).__name__)))
    meta = page.meta
    if meta is not None and meta.request_id:
        title = f"<caption title='request id {_esc(meta.request_id)}' "
        caption = caption.replace("<caption ", title, 1)
    body = "".join(
        "<tr>" + "".join(_cell(item, n) for n in main) + "</tr>" for item in page.data
    )
    out = [f"<div>{_TABLE}{caption}{_header(main)}<tbody>{body}</tbody></table>"]
    if rest:
        key = main[0]
        names = ", ".join(_label(n) for n in rest)
        rows = "".join(
            "<tr>" + "".join(_cell(item, n) for n in (key, *rest)) + "</tr>"
            for item in page.data
        )
        out.append(f"<details style='margin-top:4px'>"
                   f"{_SUMMARY.format('more fields: ' + _esc(names))}"
                   f"{_TABLE}{_header((key, *rest))}<tbody>{rows}</tbody></table></details>")
    out.append("</div>")
    return "".join(out)


# --- errors ----------------------------------------------------------------------------------

#: The attributes worth a line of their own, in this order, when an error has them.
_ERROR_ATTRIBUTES = ("status_code", "code", "msg", "request_id", "idempotency_key", "field",
                     "retry_after")


def _error_name(error: BaseException) -> str:
    cls = type(error)
    return f"bizmsg.{cls.__name__}" if cls.__module__ == "bizmsg.errors" else cls.__qualname__


def _error_attributes(error: BaseException) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    state = getattr(error, "__dict__", {})
    for name in _ERROR_ATTRIBUTES:
        value = state.get(name)
        if value is None:
            continue
        if name == "retry_after":
            out.append((name, f"{value:g} s" if isinstance(value, (int, float)) else str(value)))
        else:
            out.append((name, str(value)))
    return out


def _message(error: BaseException) -> str:
    return str(getattr(error, "message", None) or error)


def _ansi() -> bool:
    return not os.environ.get("NO_COLOR")


def error_traceback(error: BaseException) -> list[str]:
    """The lines IPython shows for a bizmsg error (``_render_traceback_``): the class and
    message, the attributes that matter, then the usual traceback, causes included."""
    bold_red, dim, reset = ("\x1b[1;31m", "\x1b[2m", "\x1b[0m") if _ansi() else ("", "", "")
    lines = [f"{bold_red}{_error_name(error)}{reset}: {_message(error)}"]
    attributes = _error_attributes(error)
    width = max((len(k) for k, _ in attributes), default=0)
    lines += [f"  {dim}{k.ljust(width)}{reset}  {v}" for k, v in attributes]
    lines.append("")
    text = "".join(traceback.format_exception(type(error), error, _user_frames(error)))
    lines += text.rstrip("\n").split("\n")
    return lines


def _user_frames(error: BaseException) -> TracebackType | None:
    # IPython's own frames (the shell running the cell) lead every cell's traceback; IPython
    # hides them from its tracebacks, so do we.
    tb = error.__traceback__
    marker = f"{os.sep}IPython{os.sep}"
    while tb is not None and tb.tb_next is not None and marker in tb.tb_frame.f_code.co_filename:
        tb = tb.tb_next
    return tb


def error_html(error: BaseException) -> str:
    """An error shown as a value: a tinted block with the class, message, attributes, cause,
    and the traceback (collapsed) when it was raised."""
    rows = "".join(  # transparent rows: the theme's striping would patch the tinted block
        f"<tr style='background:transparent'><th{_NESTED}>{_esc(k)}</th>"
        f"<td{_NESTED}>{_esc(v)}</td></tr>"
        for k, v in _error_attributes(error)
    )
    out = [
        "<div style='border-left:3px solid #e5534bcc;background:#e5534b14;padding:6px 10px;"
        "margin:2px 0'>",
        f"<div><b>{_esc(_error_name(error))}</b>: "
        f"<span style='white-space:pre-wrap'>{_esc(_message(error))}</span></div>",
    ]
    if rows:
        out.append(f"<table style='margin:4px 0 0 0;font-size:12px'><tbody>{rows}</tbody></table>")
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None:
        out.append(f"<div style='margin-top:4px'>caused by <b>{_esc(type(cause).__name__)}</b>: "
                   f"{_esc(str(cause))}</div>")
    if error.__traceback__ is not None:
        text = "".join(traceback.format_exception(type(error), error, _user_frames(error)))
        out.append(f"<details style='margin-top:4px'>{_SUMMARY.format('traceback')}"
                   f"<pre style='font-size:11px;white-space:pre-wrap'>{_esc(text)}</pre></details>")
    out.append("</div>")
    return "".join(out)


# --- campaigns -------------------------------------------------------------------------------

#: A tone per outcome status: unknown is amber (reconcile it), not red (it may have been sent).
_STATUS_TONE = {"sent": "green", "rejected": "red", "unknown": "amber", "failed": "red",
                "skipped": "grey"}
#: Rows of the "not sent" and "invalid" tables: the first few; the rest are in the object.
_SHOWN = 10


def _recipient(message: object) -> object:
    """The ``to`` of an input item, whatever its form (a Message, a mapping, anything)."""
    if isinstance(message, Mapping):
        return cast("Mapping[str, object]", message).get("to")
    return getattr(message, "to", None)


def _rows_table(header: Sequence[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th{_NESTED}>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td{_NESTED}>{c}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"{_SMALL_TABLE}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _list_block(title: str, items: Sequence[str]) -> str:
    lines = "".join(f"<li>{_esc(item)}</li>" for item in items)
    return (f"<details open style='margin-top:4px'>{_SUMMARY.format(_esc(title))}"
            f"<ul style='margin:2px 0;font-size:12px'>{lines}</ul></details>")


def bulk_result_html(result: Any) -> str:
    """A campaign's result: the counts per status as badges, time and rate, why it stopped,
    its warnings, and the first messages that were not sent (with the key to reconcile the
    unknown ones)."""
    if result.warnings:
        notebook = sys.modules.get("bizmsg._notebook")
        if notebook is not None:
            notebook.shown(result.warnings)  # not logged again when the cell ends
    counts = " ".join(_BADGE.format(_TINT[tone], f"{status}&nbsp;{result.counts[status]:,}")
                      for status, tone in _STATUS_TONE.items())
    seconds = result.elapsed.total_seconds()
    out = [f"<div><div style='font-size:12px'>BulkResult · {len(result):,} "
           f"message{'s' if len(result) != 1 else ''} · {seconds:,.2f} s · "
           f"{result.rate:,.0f}/s</div><div style='margin:4px 0'>{counts}</div>"]
    if result.stop_reason:
        out.append(f"<div style='font-size:12px'>stopped: {_esc(result.stop_reason)}</div>")
    if result.unread_from is not None:
        out.append(f"<div style='font-size:12px'>the input was not read from message "
                   f"#{result.unread_from:,} on: run the campaign again with its journal to go "
                   f"on</div>")
    if result.warnings:
        out.append(_list_block(f"{len(result.warnings)} warning(s)",
                               [w.message for w in result.warnings]))
    not_sent = [o for o in result.outcomes if o.status in ("rejected", "unknown", "failed")]
    if not_sent:
        rows = [[str(o.index), _BADGE.format(_TINT[_STATUS_TONE[o.status]], o.status),
                 _text(_recipient(o.message)),
                 _esc(_short(f"{type(o.error).__name__}: {o.error}", 120)) if o.error else "",
                 _esc(o.idempotency_key or "")]
                for o in not_sent[:_SHOWN]]
        more = len(not_sent) - _SHOWN
        title = (f"{len(not_sent):,} not sent"
                 + (f" (first {_SHOWN}; all in .rejected(), .unknown(), .failed())"
                    if more > 0 else ""))
        out.append(f"<details open style='margin-top:4px'>{_SUMMARY.format(_esc(title))}"
                   f"{_rows_table(['index', 'status', 'to', 'error', 'idempotency key'], rows)}"
                   "</details>")
    out.append("</div>")
    return "".join(out)


def plan_html(plan: Any) -> str:
    """A campaign's plan: the totals, ok or not, each sender (status, quality, pace, problem)
    and account (unique recipients against its tier), the first invalid messages and the
    warnings."""
    ok = _BADGE.format(_TINT["green" if plan.ok else "red"], "ok" if plan.ok else "not ok")
    duration = ("unpaced" if plan.estimated_duration is None
                else f"~{plan.estimated_duration.total_seconds():,.1f} s at the chosen pace")
    out = [f"<div><div style='font-size:12px'>CampaignPlan {ok} · {plan.total:,} messages · "
           f"{plan.to_send:,} to send · {plan.invalid_count:,} invalid · "
           f"{plan.duplicate_count:,} duplicate{'' if plan.duplicate_count == 1 else 's'} · "
           f"{_esc(duration)}</div>"]
    if plan.senders:
        rows = [[_esc(s.sender), f"{s.messages:,}",
                 _badge(s.status) if s.listed else _BADGE.format(_TINT["red"], "not yours"),
                 _badge(s.quality_rating), _text(s.throughput), _text(s.account_id),
                 "" if s.pace is None else f"{s.pace:g}/s",
                 _esc(s.problem or s.warning or "")]
                for s in plan.senders]
        out.append(_rows_table(["sender", "messages", "status", "quality", "throughput",
                                "account", "pace", "problem or warning"], rows))
    if plan.accounts:
        rows = [[_esc(a.account_id), _text(a.name), _text(a.tier),
                 "unlimited" if a.limit is None else f"{a.limit:,}",
                 _BADGE.format(_TINT["red" if a.over_tier else "green"],
                               f"{a.unique_recipients:,}")]
                for a in plan.accounts]
        out.append(_rows_table(["account", "name", "tier", "limit / 24 h", "unique recipients"],
                               rows))
    if plan.invalid:
        rows = [[str(index), _esc(_short(str(error), 160))]
                for index, error in plan.invalid[:_SHOWN]]
        title = f"{plan.invalid_count:,} invalid" + (
            f" (first {_SHOWN}; all in .invalid)" if plan.invalid_count > _SHOWN else "")
        out.append(f"<details open style='margin-top:4px'>{_SUMMARY.format(_esc(title))}"
                   f"{_rows_table(['index', 'problem'], rows)}</details>")
    if plan.warnings:
        out.append(_list_block(f"{len(plan.warnings)} warning(s)", plan.warnings))
    out.append("</div>")
    return "".join(out)
