"""``bizmsg send --file`` when not everything goes: rows that are not sent (invalid, rejected,
unknown) with the exit status each case gives, and a campaign interrupted by Ctrl-C resumed from
its journal without sending anything twice. The file formats and the rest are in
``test_cli_bulk.py``, whose helpers these tests share.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bizmsg.testing import Fault, Sandbox
from conftest import Number, committed, free_port
from test_cli import SCRIPT, environment
from test_cli_bulk import (  # its helpers, and its autouse fixture (skips without the script)
    console_script,  # noqa: F401
    STRANGER,
    bizmsg_cli,
    start_interruptible,
    recipient,
    write_csv,
    read_results,
    by_index,
    commits,
    settle,
    summary,
    CSV_HEADER,
    csv_rows,
)


# --- rows that are not sent, and the exit statuses -----------------------------------------


def test_bad_rows_are_failed_results_and_exit_3(sandbox: Sandbox, sender: Number,
                                                tmp_path: Path) -> None:
    header = ["to", "from", "template", "language", "params", "param1"]
    good = [[recipient(i), sender.display, "t", "en", "", f"p{i}"] for i in range(50)]
    bad = [
        ["123", sender.display, "t", "en", "", "x"],                  # 50: invalid number
        ["", sender.display, "t", "en", "", "x"],                     # 51: no recipient
        [recipient(90), sender.display, "t", "en", "[1,", ""],        # 52: params not JSON
        [recipient(91), sender.display, "t", "en", '["a"]', "b"],     # 53: two ways
        [recipient(92), sender.display, "t", "en", "", "x", "extra"],  # 54: a cell too many
    ]
    messages = write_csv(tmp_path / "m.csv", header, [*good, *bad])
    results = tmp_path / "results.jsonl"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results))
    assert done.returncode == 3, done.stderr
    assert "sent 50, rejected 0, unknown 0, failed 5, skipped 0" in summary(done.stderr)
    rows = by_index(read_results(results))
    assert len(rows) == 55
    assert all(rows[i]["status"] == "sent" for i in range(50))
    failed = {i: rows[i] for i in range(50, 55)}
    assert all(row["status"] == "failed" and row["ok"] is False and row["sms_id"] is None
               for row in failed.values())
    assert failed[50]["to"] == "123"
    assert failed[50]["error"].startswith('ValidationError: invalid to: "123" is not a phone')
    assert failed[51]["to"] is None
    assert failed[51]["error"] == "ValidationError: invalid to: is missing"
    assert failed[52]["error"].startswith("ValidationError: line 54: params is not a JSON list")
    assert failed[52]["to"] == recipient(90)
    assert failed[53]["error"] == ("ValidationError: line 55: give the parameters once: params "
                                   "and param1..paramN are both given")
    assert failed[54]["error"] == ("ValidationError: line 56: the row has 7 cells but the "
                                   "header has 6 columns")
    assert failed[54]["to"] == recipient(92)
    assert sandbox.stats()["sends"] == 50  # nothing of the bad rows reached the service


def test_an_unclosed_quote_or_a_short_row_is_never_sent(sandbox: Sandbox, sender: Number,
                                                        tmp_path: Path) -> None:
    """Regression: an unclosed quote made the csv module read on into the rows
    below: with the quote in the last column, the next rows were swallowed into that
    message's parameters and **sent** with it; elsewhere, and for a row with fewer cells than
    the header, the row was reported with a misleading "invalid template.language: is
    missing". Now each line is one row: the broken one is a failed row naming its line and
    what is wrong with it, and the lines below it are rows of their own."""
    def row(i: int, *cells: str) -> str:
        return ",".join([recipient(i), sender.digits, *cells]) + "\n"

    lines = [
        "to,from,template,language,parameters\n",
        row(0, "order_update", "en", "A-0"),
        row(1, "order_update", "en", '"A-1'),             # line 3: unclosed, last column
        row(2, "order_update", "en", "A-2"),
        row(3, '"order_update', "en", "A-3"),             # line 5: unclosed, in the middle
        row(4, "order_update", "en", '"A-4"'),            # a closed quote: fine
        row(5, "order_update"),                           # line 7: two cells short
        row(6, "order_update", "en", "A-6"),
        row(7, "order_update", "en", '"A-7'),             # line 9: unclosed at the end of
    ]                                                     # the file, without a line break
    messages = tmp_path / "m.csv"
    messages.write_text("".join(lines).rstrip("\n"), encoding="utf-8")
    results = tmp_path / "r.jsonl"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results))
    assert done.returncode == 3, done.stderr
    rows = by_index(read_results(results))
    assert sorted(rows) == list(range(8))
    assert {i for i, r in rows.items() if r["status"] == "sent"} == {0, 2, 4, 6}
    unclosed = ("a quote is not closed on this line (an unclosed quote?); a CSV cell cannot "
                "span lines")
    assert rows[1]["error"] == f"ValidationError: line 3: {unclosed}"
    assert rows[3]["error"] == f"ValidationError: line 5: {unclosed}"
    assert rows[5]["error"] == ("ValidationError: line 7: the row has 3 cells, fewer than the "
                                "header's 5 columns")
    assert rows[7]["error"] == f"ValidationError: line 9: {unclosed}"
    assert [rows[i]["to"] for i in (1, 3, 5, 7)] == [recipient(i) for i in (1, 3, 5, 7)]
    # What went out is exactly the four good rows, each with its own parameters.
    assert sorted((r["body"]["to"], r["body"]["template"]["parameters"])
                  for r in committed(sandbox)) == [(recipient(i), f"A-{i}") for i in (0, 2, 4, 6)]

    # The dry run names the same lines.
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--dry-run")
    assert done.returncode == 3, done.stderr
    assert f"  #1: ValidationError: line 3: {unclosed}" in done.stdout.splitlines()
    assert ("  #5: ValidationError: line 7: the row has 3 cells, fewer than the header's 5 "
            "columns") in done.stdout.splitlines()


def test_a_rejected_send_exits_3(sandbox: Sandbox, sender: Number, tmp_path: Path) -> None:
    rows = csv_rows(sender.display, 10)
    rows[4][1] = STRANGER
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, rows)
    results = tmp_path / "r.csv"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results))
    assert done.returncode == 3, done.stderr
    assert "sent 9, rejected 1, unknown 0, failed 0" in summary(done.stderr)
    rejected = by_index(read_results(results))[4]
    assert (rejected["status"], rejected["ok"], rejected["code"]) == ("rejected", "false", "1002")
    assert rejected["msg"] == 'from "14155550100" is not a business phone number of this account'
    assert rejected["error"].startswith("SendRejectedError: ")
    assert rejected["customer_id"] == "c4" and rejected["idempotency_key"]


def test_an_unknown_outcome_exits_4_even_with_a_rejection(sandbox: Sandbox, sender: Number,
                                                           tmp_path: Path) -> None:
    rows = csv_rows(sender.display, 20)
    rows[5][1] = STRANGER
    sandbox.inject("send", cut_connection=True)  # the first send processed, then its connection cut
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, rows)
    results = tmp_path / "r.jsonl"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results),
                      "--concurrency", "1")
    assert done.returncode == 4, done.stderr
    assert "sent 18, rejected 1, unknown 1, failed 0" in summary(done.stderr)
    assert "1 message(s) may or may not have been sent" in done.stderr
    [unknown] = [row for row in read_results(results) if row["status"] == "unknown"]
    assert unknown["error"].startswith("SendOutcomeUnknownError: ")
    cut = sandbox.sent_messages()[0]  # one at a time: the first row's
    assert unknown["index"] == 0 and unknown["to"] == recipient(0)
    assert unknown["idempotency_key"] == cut["headers"]["idempotency-key"]
    assert len(committed(sandbox)) == 19  # the unknown one did go out


def test_without_results_the_messages_not_sent_are_listed_on_stderr(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    rows = csv_rows(sender.display, 30)
    for i in (3, 7):
        rows[i][0] = "12"
    rows[9][1] = STRANGER
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, rows)
    done = bizmsg_cli(sandbox, "send", "--file", str(messages))
    assert done.returncode == 3
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == summary(done.stderr)
    assert sorted(lines[1:]) == sorted([
        'bizmsg: #3 to 12: failed: ValidationError: invalid to: "12" is not a phone number: '
        "it has 2 digits, E.164 numbers have 8 to 15",
        'bizmsg: #7 to 12: failed: ValidationError: invalid to: "12" is not a phone number: '
        "it has 2 digits, E.164 numbers have 8 to 15",
        f"bizmsg: #9 to {recipient(9)}: rejected: SendRejectedError: the service rejected the "
        'message: code 1002: from "14155550100" is not a business phone number of this account',
    ])


def test_exact_repeats_are_skipped_unless_no_dedupe(sandbox: Sandbox, sender: Number,
                                                    tmp_path: Path) -> None:
    rows = csv_rows(sender.display, 10)
    rows += [list(rows[2]), list(rows[5])]
    rows[-1][-1] = "another customer"  # other columns do not make a message different
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, rows)
    results = tmp_path / "r.csv"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results))
    assert done.returncode == 0, done.stderr
    assert "sent 10, rejected 0, unknown 0, failed 0, skipped 2 (2 duplicates)" in done.stderr
    written = by_index(read_results(results))
    assert (written[10]["duplicate_of"], written[11]["duplicate_of"]) == ("2", "5")
    assert written[10]["reason"] == "duplicate of message #2"

    again = bizmsg_cli(sandbox, "send", "--file", str(messages), "--no-dedupe")
    assert again.returncode == 0, again.stderr
    assert "sent 12, rejected 0, unknown 0, failed 0, skipped 0" in again.stderr


def test_stop_on_error_stops_at_the_first_message_not_sent(sandbox: Sandbox, sender: Number,
                                                           tmp_path: Path) -> None:
    rows = csv_rows(sender.display, 30)
    rows[5][1] = STRANGER
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, rows)
    results = tmp_path / "r.csv"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results),
                      "--stop-on-error", "--concurrency", "1")
    assert done.returncode == 3, done.stderr
    written = by_index(read_results(results))
    assert len(written) == 30
    assert [written[i]["status"] for i in range(6)] == ["sent"] * 5 + ["rejected"]
    assert {written[i]["status"] for i in range(6, 30)} == {"skipped"}
    assert "sent 5, rejected 1, unknown 0, failed 0, skipped 24 (24 not sent as the campaign " \
           "stopped)" in done.stderr
    assert "bizmsg: not sent: the campaign stopped at message #5: 24 message(s) were not sent" \
        in done.stderr.splitlines()
    assert len(commits(sandbox)) == 5


def test_a_token_the_service_refuses_stops_at_once_with_one_line(sandbox: Sandbox,
                                                                 sender: Number,
                                                                 tmp_path: Path) -> None:
    """Regression: a wrong token printed 20 identical AuthenticationError lines,
    then "512 messages ... failed 64, skipped 448", and exited 3 ("some rows rejected")."""
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 512))
    for extra in ([], ["--results", str(tmp_path / "r.csv")]):
        done = bizmsg_cli(sandbox, "send", "--file", str(messages), *extra,
                          token="not-a-token-of-the-sandbox")
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith("bizmsg: AuthenticationError: "), line
        assert "returned 401" in line and "check --token or $BIZMSG_TOKEN" in line
        assert line.endswith("nothing was sent"), line
    # The results still have every row: the ones that met the 401, and the rest not sent.
    rows = read_results(tmp_path / "r.csv")
    assert len(rows) == 512
    assert {row["status"] for row in rows} == {"failed", "skipped"}
    assert sandbox.stats()["accepted"] == 0


def test_a_service_that_cannot_be_reached_stops_with_one_line_and_exits_1(
    sender: Number, tmp_path: Path
) -> None:
    # The campaign stops at the first message not sent (--stop-on-error), and that message
    # could not reach the service: the command says so in one line (the same line the lead's
    # breaker, which stops a campaign by itself, leads to: see send_file.service_unreachable).
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 50))
    dead = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [*SCRIPT, "send", "--file", str(messages), "--stop-on-error", "--concurrency", "1",
         "--results", str(tmp_path / "r.csv")],
        capture_output=True, text=True, timeout=120,
        env=environment(BIZMSG_BASE_URL=dead, BIZMSG_TOKEN="sandbox-token-acme"))
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"bizmsg: the service at {dead} could not be reached: "), line
    assert "ConnectError" in line and line.endswith("nothing was sent"), line
    assert len(read_results(tmp_path / "r.csv")) == 50


def test_the_breaker_stops_a_campaign_to_a_dead_service_by_itself(
    sender: Number, tmp_path: Path
) -> None:
    """No --stop-on-error: the campaign's breaker stops it once 3 messages in a row could not
    reach the service and nothing got through for half a second; the rest are skipped with
    the cause, the one line names the service and the breaker's reason, and it exits 1."""
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 400))
    dead = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [*SCRIPT, "send", "--file", str(messages), "--concurrency", "4",
         "--unreachable-after", "3", "--unreachable-for", "0.5",
         "--results", str(tmp_path / "r.csv")],
        capture_output=True, text=True, timeout=120,
        env=environment(BIZMSG_BASE_URL=dead, BIZMSG_TOKEN="sandbox-token-acme"))
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"bizmsg: the service at {dead} could not be reached: "), line
    assert "ConnectError" in line and "unreachable" in line, line
    results = read_results(tmp_path / "r.csv")
    assert len(results) == 400
    statuses = Counter(row["status"] for row in results)
    assert set(statuses) == {"failed", "skipped"} and statuses["skipped"] > 300, statuses
    assert all("the service is unreachable" in row["reason"]
               for row in results if row["status"] == "skipped"), results[-1]


@pytest.mark.parametrize("option, value", [("--unreachable-after", "-1"),
                                           ("--unreachable-for", "0")])
def test_bad_breaker_options_are_usage_errors(sandbox: Sandbox, option: str, value: str,
                                              tmp_path: Path) -> None:
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, [])
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), option, value)
    assert done.returncode == 2 and option in done.stderr, done.stderr


def test_a_campaign_id_sends_again_with_the_same_keys(sandbox: Sandbox, sender: Number,
                                                      tmp_path: Path) -> None:
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 40))
    keys = []
    for run in ("first", "second"):
        results = tmp_path / f"{run}.csv"
        done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results),
                          "--campaign-id", "spring-sale")
        assert done.returncode == 0, done.stderr
        keys.append({row["index"]: row["idempotency_key"] for row in read_results(results)})
    assert keys[0] == keys[1]
    # The service answered the second run from its Idempotency-Key cache: nothing went out twice.
    assert sandbox.stats()["accepted"] == 40 and sandbox.stats()["replayed"] == 40


# --- resuming with a journal after Ctrl-C ----------------------------------------------------


def wait_for_rows(path: Path, condition: Any, process: subprocess.Popen[str],
                  timeout: float = 30) -> None:
    """Waits until the complete lines of the results file at ``path`` satisfy ``condition``."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text() if path.exists() else ""
        lines = text[:text.rfind("\n") + 1].splitlines()[1:]  # no header, no partial line
        if condition(lines):
            return
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"the results never matched: {lines}"
        time.sleep(0.02)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_then_the_same_command_with_the_journal_sends_the_rest(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    sandbox.inject("send", Fault(delay=0.5, times=None))  # every send takes half a second
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 40))
    journal, first = tmp_path / "campaign.db", tmp_path / "first.csv"
    args = ["send", "--file", str(messages), "--journal", str(journal), "--concurrency", "4"]

    process = start_interruptible(sandbox, *args, "--results", str(first))
    try:
        wait_for_rows(first, lambda lines: len(lines) >= 4, process)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert lines[0].startswith("bizmsg: interrupted after 40 messages in "), stderr
    assert lines[-1] == (f"bizmsg: run the same command again to send the rest: the journal "
                         f"{journal} knows what was sent")
    # The messages in flight finished and were written; the others were not sent.
    done_first = by_index(read_results(first))
    assert len(done_first) == 40
    sent_first = {i for i, row in done_first.items() if row["status"] == "sent"}
    assert 4 <= len(sent_first) < 40
    assert all(row["status"] == "skipped" and row["reason"] == "not sent: the campaign was "
               "interrupted" for i, row in done_first.items() if i not in sent_first)
    settle(sandbox)
    assert set(commits(sandbox)) == {recipient(i) for i in sent_first}

    sandbox.clear_faults()
    second = tmp_path / "second.csv"
    done = bizmsg_cli(sandbox, *args, "--results", str(second), "--resend-unknown")
    assert done.returncode == 0, done.stderr
    done_second = by_index(read_results(second))
    assert len(done_second) == 40
    for i, row in done_second.items():
        if i in sent_first:  # skipped, with what the first run recorded
            assert row["status"] == "skipped"
            assert row["reason"] == "already sent by an earlier run (journal)"
            assert row["sms_id"] == done_first[i]["sms_id"]
            assert row["idempotency_key"] == done_first[i]["idempotency_key"]
        else:
            assert row["status"] == "sent"
    assert f"({len(sent_first)} done by an earlier run)" in summary(done.stderr)
    # Every row went out exactly once over both runs.
    assert commits(sandbox) == Counter({recipient(i): 1 for i in range(40)})
    assert sandbox.stats()["accepted"] == 40


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_leaves_unknowns_that_resend_unknown_sends_once(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    sandbox.inject("send", Fault(delay=1.0, times=None))
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 24))
    journal, first = tmp_path / "campaign.db", tmp_path / "first.csv"
    args = ["send", "--file", str(messages), "--journal", str(journal), "--concurrency", "4"]

    process = start_interruptible(sandbox, *args, "--results", str(first))
    try:
        wait_for_rows(first, lambda lines: len(lines) >= 4, process)
        process.send_signal(signal.SIGINT)
        # Once the first Ctrl-C stopped the campaign (the messages it will not send are
        # written as skipped), a second one abandons the four in flight.
        wait_for_rows(first, lambda lines: any(",skipped," in line for line in lines), process)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    statuses = Counter(row["status"] for row in read_results(first))
    assert statuses == {"sent": 4, "unknown": 4, "skipped": 16}, stderr
    unknown = {int(row["index"]): row["idempotency_key"] for row in read_results(first)
               if row["status"] == "unknown"}
    assert "4 message(s) may or may not have been sent" in stderr
    settle(sandbox)  # the abandoned sends were processed all the same
    assert len(commits(sandbox)) == 8
    sandbox.clear_faults()

    # Without --resend-unknown, a re-run sends what was never sent and reports the rest.
    second = tmp_path / "second.csv"
    done = bizmsg_cli(sandbox, *args, "--results", str(second))
    assert done.returncode == 4, done.stderr
    rows = by_index(read_results(second))
    assert {i for i, row in rows.items() if row["status"] == "unknown"} == set(unknown)
    assert rows[min(unknown)]["reason"].startswith("in doubt since an earlier run")
    assert Counter(row["status"] for row in rows.values()) == {"sent": 16, "unknown": 4,
                                                                "skipped": 4}
    assert sandbox.stats()["replayed"] == 0

    # With it, those are sent again with their keys: the sandbox answers from its cache.
    third = tmp_path / "third.csv"
    done = bizmsg_cli(sandbox, *args, "--results", str(third), "--resend-unknown")
    assert done.returncode == 0, done.stderr
    rows = by_index(read_results(third))
    assert {i: rows[i]["idempotency_key"] for i in unknown} == unknown
    assert all(rows[i]["status"] == "sent" for i in unknown)
    replays = [r for r in sandbox.sent_messages() if r["idempotent_replay"]]
    assert sorted(r["headers"]["idempotency-key"] for r in replays) == sorted(unknown.values())
    assert sandbox.stats()["replayed"] == 4
    assert commits(sandbox) == Counter({recipient(i): 1 for i in range(24)})


def journal_rows(journal: Path) -> dict[str, str]:
    """The state of every message a journal recorded, by its Idempotency-Key."""
    with sqlite3.connect(journal) as db:
        return dict(db.execute("SELECT idempotency_key, state FROM bizmsg_messages"))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_stops_gracefully_like_ctrl_c_and_a_rerun_has_no_false_unknowns(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    """Regression: ``kill -TERM`` (systemd, Docker, Kubernetes, ``timeout``) ended
    the command at once with no summary; its results lacked rows the journal recorded as
    sent, and the re-run listed messages ``unknown`` that had never left. It now does what
    the first Ctrl-C does, and exits 143."""
    sandbox.inject("send", Fault(delay=0.5, times=None))  # every send takes half a second
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 600))
    journal, first = tmp_path / "campaign.db", tmp_path / "first.csv"
    args = ["send", "--file", str(messages), "--journal", str(journal), "--concurrency", "8"]
    process = subprocess.Popen(
        [*SCRIPT, *args, "--results", str(first)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        # SIGTERM as a service manager would find it, whatever this test run inherited.
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
        env=environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token),
    )
    try:
        wait_for_rows(first, lambda lines: len(lines) >= 8, process)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert lines[0].startswith("bizmsg: stopped by SIGTERM after "), stderr
    assert "not sent as the campaign stopped" in lines[0]
    assert lines[-1] == (f"bizmsg: run the same command again to send the rest: the journal "
                         f"{journal} knows what was sent")
    # Every message the journal recorded has its row in the results, with the same state.
    written = {row["idempotency_key"]: row for row in read_results(first)}
    recorded = journal_rows(journal)
    assert recorded and all(state in ("sent", "skipped") for state in recorded.values()), \
        Counter(recorded.values())
    sent = {key for key, state in recorded.items() if state == "sent"}
    assert sent <= set(written) and all(written[key]["status"] == "sent" for key in sent)
    assert {key for key, row in written.items() if row["status"] == "sent"} == sent
    settle(sandbox)
    assert len(committed(sandbox)) == len(sent)

    # The re-run sends the rest, and finds nothing in doubt.
    sandbox.clear_faults()
    second = tmp_path / "second.csv"
    done = bizmsg_cli(sandbox, *args, "--results", str(second))
    assert done.returncode == 0, done.stderr
    assert "unknown 0" in summary(done.stderr)
    assert f"({len(sent)} done by an earlier run)" in summary(done.stderr)
    assert commits(sandbox) == Counter({recipient(i): 1 for i in range(600)})
