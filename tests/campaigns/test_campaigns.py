"""Campaigns with the sync client, over real sockets against the sandbox: one outcome per input
item in input order, every input shape, lazy input, keys and options, and the result.

The other files of this folder take what stops a campaign (``test_campaign_stopping.py``),
Ctrl-C (``test_campaign_interrupts.py``), pacing, tiers and plans (``test_campaign_pacing.py``),
and the caller's callbacks (``test_campaign_callbacks.py``). What is checked is correctness,
never speed.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from campaign_support import (
    Pulls,
    commits_by_recipient,
    message,
    messages,
    recipient,
    settle,
)
from conftest import Number, committed

TEMPLATE = bizmsg.Template(name="order_update", parameters=["A-1"], language="en_US")


def wire_template(record: dict[str, Any]) -> tuple[str, str, str]:
    template = record["body"]["template"]
    return template["name"], template["parameters"], template["language"]


# --- outcomes: one per item, in input order -------------------------------------------------


def test_outcomes_are_in_input_order_one_per_item(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """Completion order differs from input order at concurrency 64; ``outcomes`` is in input
    order anyway, each outcome carries its input item (the very object) and what went out."""
    items = messages(sender.digits, 300)
    result = client.messages.send_many(items, concurrency=64)

    assert isinstance(result, bizmsg.BulkResult)
    assert len(result) == 300 and [o.index for o in result] == list(range(300))
    assert all(o.message is item for o, item in zip(result.outcomes, items))
    assert result.counts == {"sent": 300, "rejected": 0, "unknown": 0, "failed": 0, "skipped": 0}
    assert result.ok and result.stopped_by is None and result.stop_reason is None
    assert result.campaign_id is None and result.warnings == []
    by_key = {r["headers"]["idempotency-key"]: r for r in committed(sandbox)}
    assert len(by_key) == 300
    for outcome in result:
        assert type(outcome) is bizmsg.SendOutcome
        assert outcome.status == "sent" and outcome.ok and outcome.error is None
        record = by_key[outcome.idempotency_key or ""]
        assert record["body"]["to"] == outcome.message["to"]
        assert outcome.result is not None
        assert outcome.result.to_dict() == record["response_body"]
        assert outcome.result.meta is not None
        assert outcome.result.meta.idempotency_key == outcome.idempotency_key
    assert commits_by_recipient(sandbox) == Counter(item["to"] for item in items)


def test_completion_order_of_send_many_iter_covers_every_index(
    client: bizmsg.Client, sender: Number
) -> None:
    """``send_many_iter`` yields each outcome once, as it completes."""
    seen = [o.index for o in client.messages.send_many_iter(messages(sender.digits, 200))]
    assert sorted(seen) == list(range(200))


def test_every_input_shape_is_sent_as_the_same_request(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """A ``Message``, dicts with ``from`` or ``from_``, a template as a ``Template`` or a dict,
    or the template's fields flat beside ``to``: each becomes the request a single send makes."""
    template_dict = {"name": "order_update", "parameters": ["A-1"], "language": "en_US"}
    items: list[Any] = [
        bizmsg.Message(to=recipient(0), from_=sender.digits, template=TEMPLATE),
        {"to": recipient(1), "from": sender.digits, "template": TEMPLATE},
        {"to": recipient(2), "from_": sender.display, "template": template_dict},
        {"to": recipient(3), "from": sender.digits, "name": "order_update",
         "parameters": ["A-1"], "language": "en-US"},
        bizmsg.Message(to="+1 (415) 000-0004", from_=sender.display, template=TEMPLATE),
        {"to": "00" + recipient(5), "from": sender.digits, "template": TEMPLATE},
        {"to": recipient(6), "from": sender.digits,
         "template": bizmsg.Template.from_dict(bizmsg.Template(
             name="order_update", parameters={"order": "A-1"}, language="en_US").to_dict())},
        bizmsg.Message(to=recipient(7), from_=sender.digits, template=TEMPLATE,
                       idempotency_key="my-own-key-7"),
        {"to": recipient(8), "from": sender.digits, "template": TEMPLATE,
         "idempotency_key": "my-own-key-8"},
    ]
    result = client.messages.send_many(items)

    assert result.counts["sent"] == len(items), [(o.index, o.error) for o in result]
    records = {r["body"]["to"]: r for r in committed(sandbox)}
    assert sorted(records) == [recipient(i) for i in range(len(items))]
    for i in range(len(items)):
        record = records[recipient(i)]
        assert record["body"]["from"] == sender.digits
        assert record["body"]["type"] == "template"
        expected_parameters = '{"order":"A-1"}' if i == 6 else '["A-1"]'
        assert wire_template(record) == ("order_update", expected_parameters, "en_US")
        assert result.outcomes[i].idempotency_key == record["headers"]["idempotency-key"]
    assert records[recipient(7)]["headers"]["idempotency-key"] == "my-own-key-7"
    assert records[recipient(8)]["headers"]["idempotency-key"] == "my-own-key-8"


@pytest.mark.parametrize(
    ("item", "field", "says"),
    [
        (42, "message", "is not a message"),
        ("14150000000", "message", "got str"),
        (None, "message", "got NoneType"),
        ({"from": "SENDER", "template": TEMPLATE}, "to", "is missing"),
        ({"to": "14150000000", "template": TEMPLATE}, "from_", "is missing"),
        ({"to": "14150000000", "from": "SENDER"}, "template.name", "is missing"),
        ({"to": "14150000000", "from": "SENDER", "template": {"name": "n", "parameters": "p"}},
         "template.language", "is missing"),
        ({"to": "12", "from": "SENDER", "template": TEMPLATE}, "to", "2 digits"),
        ({"to": "+0 415 555 0100", "from": "SENDER", "template": TEMPLATE}, "to",
         "never starts with 0"),
        ({"to": "14150000000", "from": "SENDER", "name": "n", "parameters": ["a", 2],
          "language": "en"}, "template.parameters", "parameters[1] is a number (2)"),
        ({"to": "14150000000", "from": "SENDER", "template": TEMPLATE,
          "idempotency_key": "has space"}, "idempotency_key", ""),
    ],
    ids=["int", "str", "None", "no-to", "no-from", "no-template", "no-language",
         "short-number", "country-code-0", "number-parameter", "bad-key"],
)
def test_a_bad_item_is_a_failed_outcome_and_the_rest_is_sent(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, item: Any, field: str, says: str
) -> None:
    """One bad row never stops a campaign: it is a ``failed`` outcome with the
    ``ValidationError`` a single send would raise (naming the field), nothing is requested for
    it, and the messages around it are sent."""
    if isinstance(item, dict):
        item = {k: (sender.digits if v == "SENDER" else v) for k, v in item.items()}
    items = [message(sender.digits, 1), item, message(sender.digits, 2)]
    result = client.messages.send_many(items)

    assert [o.status for o in result] == ["sent", "failed", "sent"]
    bad = result.outcomes[1]
    assert bad.message is item and bad.ok is False and bad.result is None
    assert type(bad.error) is bizmsg.ValidationError
    assert bad.error.field == field
    assert says in str(bad.error)
    assert result.failed() == [bad] and not result.ok
    assert sorted(r["body"]["to"] for r in sandbox.sent_messages()) == [recipient(1), recipient(2)]


def test_a_shared_template_changed_in_place_is_read_again(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """Messages sharing one ``Template`` reuse its validation, but never a stale one: a
    parameters list (or dict) changed in place between two messages is sent as it is then,
    and a template made invalid fails only the messages made after."""
    params: list[Any] = ["a"]
    mapping: dict[str, Any] = {"k": "1"}
    listed = bizmsg.Template(name="n", parameters=params, language="en")
    keyed = bizmsg.Template(name="n", parameters=mapping, language="en")

    def items() -> Iterator[bizmsg.Message]:
        for i in range(3):
            yield bizmsg.Message(to=recipient(i), from_=sender.digits, template=listed)
            params[0] = f"b{i}"
        params[0] = 5  # not a string any more
        yield bizmsg.Message(to=recipient(3), from_=sender.digits, template=listed)
        params[0] = "ok"
        yield bizmsg.Message(to=recipient(4), from_=sender.digits, template=listed)
        for i in (5, 6):
            yield bizmsg.Message(to=recipient(i), from_=sender.digits, template=keyed)
            mapping["k"] = "2"

    result = client.messages.send_many(items(), concurrency=1)
    assert [o.status for o in result] == ["sent", "sent", "sent", "failed", "sent", "sent", "sent"]
    assert "parameters[0]" in str(result.outcomes[3].error)
    sent = {r["body"]["to"]: r["body"]["template"]["parameters"] for r in sandbox.sent_messages()}
    assert [sent[recipient(i)] for i in (0, 1, 2, 4, 5, 6)] == [
        '["a"]', '["b0"]', '["b1"]', '["ok"]', '{"k":"1"}', '{"k":"2"}']


def test_a_bad_shared_template_fails_each_message_after_its_own_numbers(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """A template refused once is refused for every message sharing it, and a message whose
    number is wrong too reports the number, as a single send would."""
    bad = {"name": "", "parameters": "p", "language": "en"}
    items = [{"to": recipient(1), "from": sender.digits, "template": bad},
             {"to": "12", "from": sender.digits, "template": bad},
             {"to": recipient(2), "from": sender.digits, "template": bad}]
    result = client.messages.send_many(items)
    assert [o.status for o in result] == ["failed"] * 3
    assert [o.error.field for o in result] == ["template.name", "to", "template.name"]
    assert sandbox.sent_messages() == []


def test_a_campaign_of_only_bad_items_sends_nothing(
    sandbox: Sandbox, client: bizmsg.Client
) -> None:
    items: list[Any] = [1, 2.5, object()]
    result = client.messages.send_many(items)
    assert result.counts["failed"] == 3
    assert sandbox.requests() == []


def test_exact_repeats_are_skipped_as_duplicates(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """The same content, however written (a Message, a dict, a formatted number, a template
    dict), is sent once; later repeats are ``skipped`` with ``duplicate_of``. Another parameter
    is another message."""
    items: list[Any] = [
        bizmsg.Message(to=recipient(0), from_=sender.digits, template=TEMPLATE),
        {"to": "+1 415 000 0000", "from": sender.display, "template": {
            "name": "order_update", "parameters": ["A-1"], "language": "en-US"}},
        {"to": recipient(0), "from": sender.digits, "name": "order_update",
         "parameters": '["A-1"]', "language": "en_US"},
        {"to": recipient(0), "from": sender.digits, "name": "order_update",
         "parameters": ["A-2"], "language": "en_US"},
        bizmsg.Message(to=recipient(0), from_=sender.digits, template=TEMPLATE),
    ]
    result = client.messages.send_many(items)

    assert [o.status for o in result] == ["sent", "skipped", "skipped", "sent", "skipped"]
    assert [o.duplicate_of for o in result] == [None, 0, 0, None, 0]
    for skipped in result.skipped():
        assert skipped.reason == "duplicate of message #0"
        assert skipped.result is None and skipped.error is None
    assert result.ok  # skipped duplicates are not errors
    assert commits_by_recipient(sandbox) == {recipient(0): 2}


def test_dedupe_false_sends_every_repeat(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """With ``dedupe=False`` repeats are separate messages, each with its own key."""
    items = [message(sender.digits, 0)] * 3
    result = client.messages.send_many(items, dedupe=False)
    assert [o.status for o in result] == ["sent"] * 3
    keys = {o.idempotency_key for o in result}
    assert len(keys) == 3
    assert {r["headers"]["idempotency-key"] for r in committed(sandbox)} == keys


# --- lazy input ---------------------------------------------------------------------------------


def test_send_many_iter_reads_its_input_lazily_and_stops_when_left(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """Leaving the loop after 10 outcomes of a 100,000-message generator: far fewer items were
    pulled (the engine asks in chunks of 512), the campaign stops (no commit afterwards), and
    nothing went out twice."""
    source = Pulls(sender.digits, 100_000)
    outcomes = []
    for outcome in client.messages.send_many_iter(source):
        outcomes.append(outcome)
        if len(outcomes) == 10:
            break
    assert source.pulled <= 8 * 512, f"{source.pulled} items pulled for 10 outcomes"
    settle(sandbox)
    sent_after_break = sandbox.stats()["accepted"]
    time.sleep(0.1)
    assert sandbox.stats()["accepted"] == sent_after_break
    assert sent_after_break <= source.pulled
    assert max(commits_by_recipient(sandbox).values()) == 1


def test_send_many_reads_a_chunk_at_a_time(
    client: bizmsg.Client, sender: Number
) -> None:
    """When the first outcomes are handed to ``on_result``, the input has not been read to its
    end: it is read as the queue needs, not materialized."""
    source = Pulls(sender.digits, 5000)
    pulled_at_first_batch: list[int] = []

    def on_result(batch: list[bizmsg.SendOutcome]) -> None:
        if not pulled_at_first_batch:
            pulled_at_first_batch.append(source.pulled)

    result = client.messages.send_many(source, on_result=on_result)
    assert result.counts["sent"] == 5000
    assert pulled_at_first_batch[0] < 5000


# --- keys, closed client, options ------------------------------------------------------------


def test_campaign_id_gives_the_same_keys_in_every_run(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """Keys are derived from (campaign id, position, content): a second run with the same
    ``campaign_id`` sends the same keys, so the sandbox answers with the original results
    instead of sending again; a changed message gets a new key."""
    items = messages(sender.digits, 20)
    first = client.messages.send_many(items, campaign_id="spring-sale")
    second = client.messages.send_many(items, campaign_id="spring-sale")
    changed = list(items)
    changed[5] = message(sender.digits, 5, parameters=["changed"])
    third = client.messages.send_many(changed, campaign_id="spring-sale")

    keys = [o.idempotency_key for o in first]
    assert first.campaign_id == second.campaign_id == "spring-sale"
    assert all(uuid.UUID(k or "").version == 5 for k in keys)
    assert [o.idempotency_key for o in second] == keys
    assert [o.result.sms_id for o in second if o.result] == [o.result.sms_id for o in first
                                                              if o.result]
    third_keys = [o.idempotency_key for o in third]
    assert third_keys[:5] == keys[:5] and third_keys[6:] == keys[6:] and third_keys[5] != keys[5]
    stats = sandbox.stats()
    assert stats["accepted"] == 21 and stats["replayed"] == 39
    assert commits_by_recipient(sandbox)[recipient(5)] == 2


def test_without_a_campaign_id_keys_are_random(client: bizmsg.Client, sender: Number) -> None:
    items = messages(sender.digits, 3)
    one = [o.idempotency_key for o in client.messages.send_many(items)]
    two = [o.idempotency_key for o in client.messages.send_many(items)]
    assert set(one).isdisjoint(two)
    assert all(uuid.UUID(k or "").version == 4 for k in one)


def test_send_many_on_a_closed_client_raises(sandbox: Sandbox, sender: Number) -> None:
    client = sandbox.client()
    client.close()
    items = messages(sender.digits, 3)
    with pytest.raises(bizmsg.ClientClosedError):
        client.messages.send_many(items)
    with pytest.raises(bizmsg.ClientClosedError):
        client.messages.send_many_iter(items)
    with pytest.raises(bizmsg.ClientClosedError):
        client.messages.send_many(items, dry_run=True)
    with pytest.raises(bizmsg.ClientClosedError):
        client.messages.plan(items)
    assert sandbox.requests() == []


@pytest.mark.parametrize(
    ("options", "field"),
    [({"concurrency": 0}, "concurrency"), ({"concurrency": 10_001}, "concurrency"),
     ({"rate_limit": 0}, "rate_limit"), ({"rate_limit": float("nan")}, "rate_limit"),
     ({"campaign_id": " "}, "campaign_id"), ({"pace": "fast"}, "pace"),
     ({"max_retries": -1}, "max_retries"),
     # Regressions: a rate below one a day panicked in the rate limiter; a string, a pace or
     # a campaign id of another type, a journal that is not a path raised TypeError or
     # ValueError instead of ValidationError; -1 was reported as "got 0".
     ({"rate_limit": 1e-11}, "rate_limit"), ({"rate_limit": "5"}, "rate_limit"),
     ({"rate_limit": True}, "rate_limit"), ({"pace": 1}, "pace"),
     ({"campaign_id": 5}, "campaign_id"), ({"journal": 5}, "journal"),
     ({"concurrency": -1}, "concurrency")],
)
def test_bad_options_are_refused_before_anything_is_read_or_sent(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, options: dict[str, Any], field: str
) -> None:
    source = Pulls(sender.digits, 10)
    with pytest.raises(bizmsg.ValidationError) as caught:
        client.messages.send_many(source, **options)
    assert caught.value.field == field
    assert source.pulled == 0 and sandbox.requests() == []


def test_an_empty_campaign(client: bizmsg.Client) -> None:
    result = client.messages.send_many([])
    assert len(result) == 0 and result.ok and result.counts["sent"] == 0
    assert list(client.messages.send_many_iter(iter([]))) == []


def test_timeout_and_max_retries_apply_to_each_message(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number
) -> None:
    """``max_retries=0``: a 503 is not retried (a ``failed`` outcome); ``timeout``: a send
    answered too late is ``unknown`` (it may have gone out)."""
    sandbox.inject("send", status=503, headers={"Retry-After": "0"})
    sandbox.inject("send", delay=2.0)
    result = client.messages.send_many(messages(sender.digits, 2), concurrency=1, max_retries=0,
                                       timeout=bizmsg.Timeout(read=0.5))
    first, second = result.outcomes
    assert first.status == "failed" and isinstance(first.error, bizmsg.ServerError)
    assert second.status == "unknown"
    assert isinstance(second.error, bizmsg.SendOutcomeUnknownError)
    assert isinstance(second.error.__cause__, bizmsg.TimeoutError)


# --- the result -----------------------------------------------------------------------------------


def test_bulk_result_records_and_frame(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, globex_sender: Number
) -> None:
    """``to_records()`` gives one flat dict per message in input order; ``to_pandas()`` the
    same as a DataFrame; counts always name all five statuses."""
    items: list[Any] = [message(sender.digits, 0), message(globex_sender.digits, 1), 7,
                        message(sender.digits, 0)]
    result = client.messages.send_many(items)
    assert result.counts == {"sent": 1, "rejected": 1, "unknown": 0, "failed": 1, "skipped": 1}
    assert [len(result.sent()), len(result.rejected()), len(result.failed()),
            len(result.skipped()), len(result.unknown())] == [1, 1, 1, 1, 0]
    records = result.to_records()
    assert [list(r) for r in records] == [["index", "to", "from", "template", "parameters",
                                           "language", "status", "ok", "idempotency_key",
                                           "sms_id", "code", "msg", "error", "duplicate_of",
                                           "reason"]] * 4
    sent, rejected, failed, skipped = records
    assert sent["status"] == "sent" and sent["ok"] is True and sent["code"] == "0"
    assert sent["sms_id"] == committed(sandbox)[0]["response_body"]["smsId"]
    assert rejected["code"] == "1002" and rejected["error"].startswith("SendRejectedError: ")
    assert failed["error"].startswith("ValidationError: ") and failed["sms_id"] is None
    assert skipped["duplicate_of"] == 0 and skipped["reason"] == "duplicate of message #0"
    assert result.elapsed.total_seconds() > 0 and result.rate > 0
    assert re.match(r"BulkResult\(4 messages: sent=1, rejected=1, unknown=0, failed=1, "
                    r"skipped=1; ", repr(result))
    assert "status=\"rejected\"" in repr(result.outcomes[1])

    pd = pytest.importorskip("pandas")
    frame = result.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(records[0])
    assert list(frame["index"]) == [0, 1, 2, 3]
    assert list(frame["status"]) == ["sent", "rejected", "failed", "skipped"]


def test_a_bulk_result_pickles_with_every_outcome(
    sandbox: Sandbox, client: bizmsg.Client, sender: Number, globex_sender: Number
) -> None:
    """Regression: SendOutcome could not be pickled, so neither could a BulkResult nor a
    CampaignError carrying one (errors are documented to cross process pools)."""
    import pickle

    sandbox.inject("send", status=502, times=1)
    items: list[Any] = [message(sender.digits, 0), message(globex_sender.digits, 1), 7,
                        message(sender.digits, 0), message(sender.digits, 4)]
    result = client.messages.send_many(items, concurrency=1)
    assert [o.status for o in result] == ["unknown", "rejected", "failed", "skipped", "sent"]
    copy = pickle.loads(pickle.dumps(result))
    assert type(copy) is bizmsg.BulkResult and copy.counts == result.counts
    assert copy.to_records() == result.to_records()
    assert [repr(o) for o in copy] == [repr(o) for o in result]
    for before, after in zip(result, copy):
        assert type(after) is bizmsg.SendOutcome
        assert (after.index, after.status, after.ok, after.idempotency_key, after.duplicate_of,
                after.reason, after.message) == (
            before.index, before.status, before.ok, before.idempotency_key, before.duplicate_of,
            before.reason, before.message)
        assert after.result == before.result
        assert type(after.error) is type(before.error)
        assert str(after.error) == str(before.error)
    unknown = copy.outcomes[0].error
    assert isinstance(unknown, bizmsg.SendOutcomeUnknownError)
    assert unknown.idempotency_key == result.outcomes[0].idempotency_key
    assert copy.outcomes[1].result.code == "1002"

    error = bizmsg.CampaignError("journal unusable")
    error.bulk_result = result  # type: ignore[attr-defined]  # as the campaign driver sets it
    assert pickle.loads(pickle.dumps(error)).bulk_result.counts == result.counts
