"""Notebook display: the HTML reprs of pages, models and errors, and the short traceback
IPython shows for a bizmsg error (``_render_traceback_``). Real objects from the sandbox or
decoded with ``from_dict``; nothing is mocked."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from html.parser import HTMLParser
from typing import Any

import pytest

import bizmsg
from bizmsg import _display
from bizmsg.testing import Sandbox
from conftest import Number, number_wire

NUMBER_COLUMNS = [
    "phone_number_id", "display_phone_number", "verified_name", "status", "quality_rating",
    "messaging_limit_tier", "create_time",
]
NUMBER_LABELS = [
    "phone number id", "display number", "verified name", "status", "quality", "tier",
    "created (UTC)",
]
NUMBER_MORE = ["biz_account_id", "code_verification_status", "throughput", "update_time"]
ACCOUNT_COLUMNS = [
    "biz_account_id", "name", "status", "account_review_status",
    "chat_business_manager_messaging_limit", "business_phone_numbers",
]
ACCOUNT_MORE = ["business_verification_status", "create_time", "update_time"]
TINT = {"green": "#2ea04340", "amber": "#d2992240", "red": "#e5534b40", "grey": "#8b949e33"}


def numbers_page(*numbers: dict[str, Any],
                 **envelope: Any) -> bizmsg.Page[bizmsg.BusinessPhoneNumber]:
    envelope = {"total": len(numbers), "size": 20, "current": 1, "pages": 1, **envelope}
    page: bizmsg.Page[bizmsg.BusinessPhoneNumber] = bizmsg.Page.from_dict(
        {"data": list(numbers), **envelope}
    )
    return page


class _Markup(HTMLParser):
    """Parses the HTML the way a browser tokenizes it: tags in order, attributes, text."""

    VOID = {"br", "hr", "img", "input", "meta", "link", "col", "wbr"}

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, (tag, self.open)
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(text: str) -> _Markup:
    markup = _Markup(text)
    assert markup.open == [], f"unclosed tags: {markup.open}"
    return markup


def header_titles(text: str, table: int = 0) -> list[str]:
    """The field names (``title``) of the header cells of the n-th ``<thead>``."""
    heads = re.findall(r"<thead>(.*?)</thead>", text)
    return re.findall(r"<th[^>]* title='([^']*)'", heads[table])


def header_labels(text: str, table: int = 0) -> list[str]:
    heads = re.findall(r"<thead>(.*?)</thead>", text)
    return re.findall(r"<th[^>]*>([^<]*)</th>", heads[table])


def badges(text: str) -> list[tuple[str, str]]:
    """(tint, text) of every badge."""
    return re.findall(r"<span style='background:(#[0-9a-f]+);[^']*'>([^<]*)</span>", text)


# --- pages -----------------------------------------------------------------------------------


def test_page_of_numbers_shows_the_columns_that_matter_first(client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=5)
    text = page._repr_html_()
    parse(text)
    assert header_titles(text) == NUMBER_COLUMNS
    assert header_labels(text) == NUMBER_LABELS
    # The other fields, collapsed below, keyed by the phone number id.
    assert header_titles(text, 1) == ["phone_number_id", *NUMBER_MORE]
    assert text.count("<details") == 1 and "<details open" not in text
    assert re.search(r"<summary[^>]*>more fields: account id, code verification, throughput, "
                     r"updated \(UTC\)</summary>", text)
    for number in page:
        row = re.search(rf"<tr><td>{number.phone_number_id}</td>(.*?)</tr>", text)
        assert row is not None
        assert f"<td>{number.display_phone_number}</td>" in row.group(1)
        assert f"<td>{number.verified_name}</td>" in row.group(1)


def test_page_caption_names_the_type_the_page_and_the_counts(client: bizmsg.Client) -> None:
    page = client.business_phone_numbers.list(page_size=5)
    assert page.total is not None and page.pages is not None
    caption = re.search(r"<caption[^>]*>(.*?)</caption>", page._repr_html_())
    assert caption is not None
    assert caption.group(1) == (
        f"BusinessPhoneNumber · page 1 of {page.pages} · 5 of {page.total} items"
    )
    # Without `total` and `pages` (the service may leave them out) it says what it knows.
    partial = bizmsg.Page.from_dict({"data": [number_wire()], "size": 20, "current": 3})
    assert "BusinessPhoneNumber · page 3 · 1 item<" in partial._repr_html_()


def test_page_of_accounts_expands_numbers_in_place(client: bizmsg.Client) -> None:
    page = client.business_accounts.list(page_size=3)
    text = page._repr_html_()
    parse(text)
    assert header_titles(text) == ACCOUNT_COLUMNS
    assert header_labels(text)[:6] == ["account id", "name", "status", "review", "limit", "numbers"]
    rows = re.findall(r"<tr><td>(\d+)</td>(.*?)</table></details></td></tr>", text)
    assert [account_id for account_id, _ in rows] == [a.biz_account_id for a in page]
    for account, (_, row) in zip(page, rows):
        count = len(account.business_phone_numbers)
        assert f"<summary style='cursor:pointer;font-size:12px'>{count} numbers</summary>" in row
        # The nested table: one row per number, with its id and display number.
        assert header_titles(row) == [
            "display_phone_number", "phone_number_id", "status", "quality_rating",
            "messaging_limit_tier",
        ]
        for number in account.business_phone_numbers:
            assert f">{number.phone_number_id}</td>" in row
            assert f">{number.display_phone_number}</td>" in row
        assert row.count("<tr>") == count + 1
    # The fields not shown as columns are in the collapsed block after the table.
    assert header_titles(text, len(rows) + 1) == ["biz_account_id", *ACCOUNT_MORE]


def test_an_account_without_numbers_shows_zero_without_a_details_block() -> None:
    wire = {"bizAccountId": "1", "name": "Empty", "status": "ACTIVE", "businessPhoneNumbers": []}
    page = bizmsg.Page.from_dict({"data": [wire], "total": 1, "size": 20, "current": 1, "pages": 1})
    text = page._repr_html_()
    parse(text)
    assert "<td>0</td>" in text
    assert text.count("<details") == 1  # only the "more fields" block


@pytest.mark.parametrize(
    ("value", "tone"),
    [("GREEN", "green"), ("CONNECTED", "green"), ("VERIFIED", "green"), ("ACTIVE", "green"),
     ("verified", "green"), ("YELLOW", "amber"), ("PENDING", "amber"), ("RED", "red"),
     ("DISCONNECTED", "red"), ("BANNED", "red"), ("UNKNOWN", "grey"), ("NOT_VERIFIED", "grey"),
     ("TIER_10K", "grey")],
)
def test_badge_tones(value: str, tone: str) -> None:
    assert _display.badge_tone(value) == tone


def test_status_like_values_are_badges_in_their_tone() -> None:
    page = numbers_page(
        number_wire(status="CONNECTED", qualityRating="GREEN"),
        number_wire(phoneNumberId="2", status="PENDING", qualityRating="YELLOW",
                    codeVerificationStatus="NOT_VERIFIED"),
        number_wire(phoneNumberId="3", status="BANNED", qualityRating="RED"),
        number_wire(phoneNumberId="4", status="SOMETHING_NEW", qualityRating=None),
    )
    text = page._repr_html_()
    main, more = text.split("<details", 1)
    assert badges(main) == [
        (TINT["green"], "CONNECTED"), (TINT["green"], "GREEN"),
        (TINT["amber"], "PENDING"), (TINT["amber"], "YELLOW"),
        (TINT["red"], "BANNED"), (TINT["red"], "RED"),
        (TINT["grey"], "SOMETHING_NEW"),  # no badge for a missing quality rating
    ]
    assert badges(more) == [
        (TINT["green"], "VERIFIED"), (TINT["grey"], "NOT_VERIFIED"), (TINT["green"], "VERIFIED"),
        (TINT["green"], "VERIFIED"),
    ]
    # Semi-transparent tints (8-digit hex), no text colour: legible on light and dark themes.
    assert all(len(tint) == 9 for tint in TINT.values())
    assert "color:" not in text


def test_timestamps_in_one_utc_form_with_the_original_in_the_tooltip() -> None:
    page = numbers_page(
        number_wire(createTime="2024-03-05T10:15:30.123+0800"),
        number_wire(phoneNumberId="2", createTime="2024-03-04T21:15:30.999-0500"),
        number_wire(phoneNumberId="3", createTime="2024-03-05T02:15:30Z"),
    )
    text = page._repr_html_()
    cells = re.findall(r"<td title='([^']*)'>([^<]*)</td>", text.split("<details", 1)[0])
    assert cells == [
        ("2024-03-05T10:15:30.123+0800", "2024-03-05\u00a002:15:30Z"),
        ("2024-03-04T21:15:30.999-0500", "2024-03-05\u00a002:15:30Z"),
        ("2024-03-05T02:15:30Z", "2024-03-05\u00a002:15:30Z"),
    ]
    # The visible text is the readable form (a no-break space keeps it on one line).
    assert "".join(parse(text).text).count("2024-03-05\u00a002:15:30Z") == 3


def test_an_unparseable_timestamp_shows_its_text_dimmed() -> None:
    page = numbers_page(number_wire(createTime="yesterday", updateTime=None))
    number = page.data[0]
    assert number.create_time is None
    text = page._repr_html_()
    assert ("<td title='not a timestamp bizmsg could read'><span style='opacity:.65'>yesterday"
            "</span></td>") in text
    # A missing one is an empty cell.
    more = text.split("<details", 1)[1]
    assert more.count("<td></td>") == 1


def test_hand_built_models_show_their_timestamps_too() -> None:
    number = bizmsg.BusinessPhoneNumber.from_dict(number_wire())
    import dataclasses

    built = dataclasses.replace(number, verified_name="Built")  # no received JSON
    text = built._repr_html_()
    parse(text)
    assert "<td style='text-align:left' title='2024-03-05T10:15:30.123+08:00'>" \
           "2024-03-05\u00a002:15:30Z</td>" in text


def test_hostile_text_is_escaped_everywhere() -> None:
    evil = "<script>alert('x')</script>\"&"
    page = numbers_page(
        number_wire(verifiedName=evil, displayPhoneNumber=evil, status=evil,
                    createTime="<img src=x onerror=alert(1)>", throughput=evil,
                    **{"<b onclick=x>": evil}),
    )
    account = bizmsg.BusinessAccount.from_dict(
        {"bizAccountId": evil, "name": evil, "status": evil,
         "businessPhoneNumbers": [number_wire(verifiedName=evil)], evil: evil}
    )
    accounts = bizmsg.Page.from_dict(
        {"data": [account.to_dict()], "total": 1, "size": 20, "current": 1, "pages": 1}
    )
    for text in (page._repr_html_(), page.data[0]._repr_html_(), account._repr_html_(),
                 accounts._repr_html_()):
        markup = parse(text)
        assert "<script" not in text and "<img" not in text and "<b " not in text
        assert {tag for tag, _ in markup.tags} <= {
            "div", "table", "caption", "thead", "tbody", "tr", "th", "td", "span", "details",
            "summary",
        }
        assert all(name in ("style", "title", "open") for _, attrs in markup.tags for name in attrs)
        assert evil in "".join(markup.text)  # shown as the text it is
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;&amp;" in page._repr_html_()


def test_long_pages_show_every_row_with_light_markup() -> None:
    with Sandbox(accounts_per_tenant=334, numbers_per_account=(3, 3)) as big, big.client() as c:
        page = c.business_phone_numbers.list(page_size=1000)
    assert len(page) == 1000
    text = page._repr_html_()
    parse(text)
    main, more = text.split("<details", 1)
    assert main.count("<tr>") == 1001 and more.count("<tr>") == 1001
    assert text.count("<details") == 1  # nothing heavy per row
    assert len(text) / len(page) < 800, len(text) / len(page)


def test_empty_page() -> None:
    page = bizmsg.Page.from_dict({"data": [], "total": 0, "size": 20, "current": 1, "pages": 0})
    assert page._repr_html_() == "<div>Page · page 1 of 0 · 0 of 0 items: no items</div>"


# --- single models ---------------------------------------------------------------------------


def test_a_number_card_shows_main_fields_then_the_rest_collapsed(client: bizmsg.Client) -> None:
    number = client.business_phone_numbers.list(page_size=1).data[0]
    text = number._repr_html_()
    parse(text)
    titles = re.findall(r"<th style='text-align:left' title='([^']*)'>", text)
    assert titles == NUMBER_COLUMNS + NUMBER_MORE
    assert text.index("<details>") > text.index(f">{number.verified_name}<")
    assert re.search(r"<caption[^>]*>BusinessPhoneNumber</caption>", text)
    assert number.meta is None and "request id" not in text  # the page has the call's metadata


def test_an_account_card_lists_its_numbers_expanded(client: bizmsg.Client) -> None:
    account = client.business_accounts.list(page_size=1).data[0]
    text = account._repr_html_()
    parse(text)
    assert "<details open>" in text
    for number in account.business_phone_numbers:
        assert f">{number.phone_number_id}</td>" in text


def test_unknown_fields_are_shown_in_the_card() -> None:
    number = bizmsg.BusinessPhoneNumber.from_dict(number_wire(futureField=[1, 2], weight=1.5))
    text = number._repr_html_()
    assert "2 more sent by the service" in text
    assert ">futureField</th><td style='text-align:left'>[1, 2]</td>" in text


def test_send_result_card(sandbox: Sandbox, client: bizmsg.Client, sender: Number) -> None:
    result = client.messages.send_template(
        to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
    )
    text = result._repr_html_()
    parse(text)
    assert (TINT["green"], "committed") in badges(text)
    assert (TINT["green"], "ACCEPTED") in badges(text)
    assert f">{result.sms_id}</td>" in text
    assert result.meta is not None and result.meta.idempotency_key is not None
    assert f">{result.meta.idempotency_key}</td>" in text
    assert f">{result.meta.request_id}</td>" in text
    failed = bizmsg.SendResult.from_dict(
        {"smsId": None, "status": "FAILED", "code": 1002, "msg": "no"}
    )
    assert (TINT["red"], "not committed") in badges(failed._repr_html_())
    assert (TINT["red"], "FAILED") in badges(failed._repr_html_())


# --- errors ----------------------------------------------------------------------------------


def raised(call: Any) -> bizmsg.BizmsgError:
    try:
        call()
    except bizmsg.BizmsgError as exc:
        return exc
    raise AssertionError("nothing was raised")


def test_render_traceback_of_an_api_error(sandbox: Sandbox, client: bizmsg.Client,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    sandbox.inject("business_accounts", status=429, headers={"Retry-After": "2"})
    error = raised(lambda: client.business_accounts.list(max_retries=0))
    assert isinstance(error, bizmsg.RateLimitError)
    lines = error._render_traceback_()
    assert all(isinstance(line, str) and "\n" not in line for line in lines)
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]
    assert plain[0] == f"bizmsg.RateLimitError: {error.message}"
    assert lines[0].startswith("\x1b[1;31mbizmsg.RateLimitError\x1b[0m")  # ANSI for the shell
    assert plain[1:5] == [
        "  status_code  429",
        f"  request_id   {error.request_id}",
        "  retry_after  2 s",
        "",
    ]
    # Then the usual traceback, down to this test's frame and the final line.
    assert plain[5] == "Traceback (most recent call last):"
    assert any("test_render_traceback_of_an_api_error" in line or "raised" in line
               for line in plain[6:])
    assert plain[-1] == f"bizmsg.errors.RateLimitError: {error.message}"


def test_render_traceback_shows_the_fields_that_exist(sandbox: Sandbox, client: bizmsg.Client,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    invalid = raised(lambda: client.business_accounts.list(page_size=0))
    lines = invalid._render_traceback_()
    assert not any("\x1b" in line for line in lines)  # NO_COLOR honoured
    assert lines[:3] == [f"bizmsg.ValidationError: {invalid.message}", "  field  page_size", ""]

    rejected = raised(lambda: client.messages.send_template(
        to="14155550100", from_="8613800000000", name="n", parameters="p", language="en"))
    assert isinstance(rejected, bizmsg.SendRejectedError)
    lines = rejected._render_traceback_()
    assert lines[1:4] == ["  code  1002", f"  msg   {rejected.msg}", ""]

    sandbox.inject("send", status=500)
    unknown = raised(lambda: client.messages.send_template(
        to="14155550100", from_="8613800000000", name="n", parameters="p", language="en",
        idempotency_key="key-1"))
    assert isinstance(unknown, bizmsg.SendOutcomeUnknownError)
    lines = unknown._render_traceback_()
    assert lines[1:4] == [f"  request_id       {unknown.request_id}",
                          "  idempotency_key  key-1", ""]
    text = "\n".join(lines)
    # The chained cause is part of the normal traceback.
    assert "bizmsg.errors.ServerError" in text
    assert "The above exception was the direct cause of the following exception:" in text
    assert lines[-1] == f"bizmsg.errors.SendOutcomeUnknownError: {unknown.message}"


def test_render_traceback_after_pickling(client: bizmsg.Client,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    error = raised(lambda: client.business_accounts.list(page_size=0))
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error) and clone.__dict__ == error.__dict__
    assert clone._render_traceback_() == [
        f"bizmsg.ValidationError: {error.message}", "  field  page_size", "",
        f"bizmsg.errors.ValidationError: {error.message}",
    ]
    assert "page_size" in clone._repr_html_()


def test_error_html(sandbox: Sandbox, client: bizmsg.Client) -> None:
    sandbox.inject("send", status=500, body='{"code": "500", "msg": "<b>boom</b>"}')
    error = raised(lambda: client.messages.send_template(
        to="14155550100", from_="8613800000000", name="<i>n</i>", parameters="p", language="en"))
    text = error._repr_html_()
    markup = parse(text)
    assert "<b>bizmsg.SendOutcomeUnknownError</b>" in text
    assert "<i>" not in text and "<b>boom" not in text
    assert f"<th style='text-align:left;white-space:nowrap;padding:2px 6px'>idempotency_key</th>" \
           f"<td style='text-align:left;white-space:nowrap;padding:2px 6px'>" \
           f"{getattr(error, 'idempotency_key')}</td>" in text
    assert "caused by <b>ServerError</b>" in text
    assert "<summary style='cursor:pointer;font-size:12px'>traceback</summary>" in text
    assert "Traceback (most recent call last)" in "".join(markup.text)
    # Built, never raised: no traceback block.
    assert "traceback" not in bizmsg.ConfigurationError("no token")._repr_html_()


# --- import hygiene --------------------------------------------------------------------------


def test_import_bizmsg_loads_no_display_or_pandas_module() -> None:
    code = ("import sys, bizmsg; print(sorted(m for m in ('html', 'pandas', 'IPython', "
            "'bizmsg._display', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- campaigns -------------------------------------------------------------------------------


def _campaign_items(sender: Number, other: str) -> list[Any]:
    template = bizmsg.Template(name="promo", parameters=["S"], language="en")
    good = bizmsg.Message(to="8613800000001", from_=sender.digits, template=template)
    return [
        good,
        bizmsg.Message(to="8613800000002", from_=other, template=template),
        7,
        good,
        {"to": "<script>alert(1)</script>", "from": sender.digits, "template": template},
    ]


def test_bulk_result_html_shows_counts_and_what_was_not_sent(
    client: bizmsg.Client, sender: Number, globex_sender: Number
) -> None:
    result = client.messages.send_many(_campaign_items(sender, globex_sender.digits))
    assert [o.status for o in result] == ["sent", "rejected", "failed", "skipped", "failed"]
    text = result._repr_html_()
    markup = parse(text)
    assert "<script" not in text and "&lt;script&gt;" in text
    assert badges(text)[:5] == [
        (TINT["green"], "sent&nbsp;1"), (TINT["red"], "rejected&nbsp;1"),
        (TINT["amber"], "unknown&nbsp;0"), (TINT["red"], "failed&nbsp;2"),
        (TINT["grey"], "skipped&nbsp;1"),
    ]
    assert "BulkResult · 5 messages · " in "".join(markup.text)
    assert "3 not sent" in text
    rows = re.findall(r"<tr><td[^>]*>(\d+)</td>", text)
    assert rows == ["1", "2", "4"]  # the rejected and failed messages, by input index
    assert "SendRejectedError: " in text and "ValidationError: " in text
    assert result.outcomes[1].idempotency_key in text


def test_plan_html_shows_senders_accounts_and_invalid_rows(
    client: bizmsg.Client, sender: Number
) -> None:
    items = _campaign_items(sender, "+1 415 555 0100")
    plan = client.messages.plan(items)
    assert not plan.ok
    text = plan._repr_html_()
    markup = parse(text)
    assert "<script" not in text
    flat = "".join(markup.text)
    assert (f"CampaignPlan not ok · 5 messages · {plan.to_send} to send · 2 invalid · "
            "1 duplicate · unpaced") in flat
    assert (TINT["red"], "not yours") in badges(text)  # a sender that is not this account's
    assert (TINT["green"], "CONNECTED") in badges(text)
    assert sender.digits in flat and "14155550100" in flat
    assert "2 invalid" in flat and "&lt;script&gt;" in text
    assert plan.accounts and plan.accounts[0].account_id in flat


def test_an_empty_campaign_renders() -> None:
    from datetime import timedelta

    from bizmsg._campaign import BulkResult

    result = BulkResult(outcomes=[], counts=dict.fromkeys(
        ("sent", "rejected", "unknown", "failed", "skipped"), 0),
        elapsed=timedelta(0), rate=0.0)
    text = result._repr_html_()
    parse(text)
    assert "BulkResult · 0 messages · 0.00 s · 0/s" in text and "not sent" not in text
