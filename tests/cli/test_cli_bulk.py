"""``bizmsg send --file``: many messages from a CSV or JSON Lines file, sent as one campaign.

Every test runs the installed console script (``bizmsg``) in a subprocess against a sandbox
in this process, and reads back the results file it wrote. The Ctrl-C tests start the command
through a small ``-c`` wrapper that installs Python's SIGINT handler first (see
conftest.DEFAULT_SIGINT): a run started with SIGINT ignored (nohup, a background job) would
otherwise hand that to the child, and the command itself never changes signal dispositions.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import DEFAULT_SIGINT, Number, committed
from test_cli import SCRIPT, environment

RESULT_COLUMNS = ["index", "to", "status", "ok", "sms_id", "code", "msg", "error",
                  "idempotency_key", "duplicate_of", "reason"]
STRANGER = "+1 415 555 0100"  # not a number of the sandbox's tenants

#: Runs bizmsg.cli.main in a child whose SIGINT raises KeyboardInterrupt, however the test
#: run itself was started.
INTERRUPTIBLE = DEFAULT_SIGINT + "import sys\nfrom bizmsg.cli import main\nsys.exit(main(sys.argv[1:]))\n"


@pytest.fixture(autouse=True)
def console_script() -> None:
    if not Path(SCRIPT[0]).exists():
        pytest.skip("no console script next to this interpreter")


def bizmsg_cli(sandbox: Sandbox, *args: str, stdin: str | None = None,
               timeout: float = 120, token: str | None = None
               ) -> subprocess.CompletedProcess[str]:
    """Runs ``bizmsg *args`` (the console script), configured for ``sandbox`` by the
    environment."""
    return subprocess.run(
        [*SCRIPT, *args], input=stdin, capture_output=True, text=True, timeout=timeout,
        env=environment(BIZMSG_BASE_URL=sandbox.base_url,
                        BIZMSG_TOKEN=token or sandbox.token),
    )


def start_interruptible(sandbox: Sandbox, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", INTERRUPTIBLE, *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token),
    )


def recipient(i: int) -> str:
    """The recipient of row ``i``: 13 digits, one per ``i``."""
    return f"86138{i:08d}"


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]],
              prefix: str = "") -> Path:
    with path.open("w", encoding="utf-8", newline="") as file:
        file.write(prefix)
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows: Iterable[object]) -> Path:
    with path.open("w", encoding="utf-8") as file:
        for row in rows:
            file.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def read_results(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        return list(csv.DictReader(io.StringIO(text)))
    return [json.loads(line) for line in text.splitlines()]


def by_index(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    indexed = {int(row["index"]): row for row in rows}
    assert len(indexed) == len(rows), "an index appears twice"
    return indexed


def commits(sandbox: Sandbox) -> Counter[str]:
    """How many messages went out to each recipient."""
    return Counter(r["body"]["to"] for r in committed(sandbox))


def settle(sandbox: Sandbox, timeout: float = 20) -> None:
    """Waits until the sandbox handled every request it received (one whose client went away
    still runs to the end, and may commit a message late)."""
    deadline = time.monotonic() + timeout
    while any(r["status"] == 0 for r in sandbox.requests()):
        assert time.monotonic() < deadline, "the sandbox kept requests in flight"
        time.sleep(0.01)


def summary(stderr: str) -> str:
    """The summary line of a run (there is exactly one)."""
    [line] = [line for line in stderr.splitlines() if " messages in " in line]
    return line


CSV_HEADER = ["to", "from", "template", "language", "param1", "param2", "customer_id"]


def csv_rows(sender: str, count: int, start: int = 0) -> list[list[object]]:
    return [[recipient(i), sender, "order_update", "en-US", f"A-{i}", "tomorrow", f"c{i}"]
            for i in range(start, start + count)]


# --- a whole file ---------------------------------------------------------------------------


def test_a_csv_file_of_thousands_of_rows(sandbox: Sandbox, sender: Number,
                                         tmp_path: Path) -> None:
    messages = write_csv(tmp_path / "messages.csv", CSV_HEADER, csv_rows(sender.display, 3000))
    done = bizmsg_cli(sandbox, "send", "--file", str(messages),
                      "--results", str(tmp_path / "results.csv"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    # No terminal, so no progress bar: the summary is all there is on stderr.
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: 3,000 messages in ")
    assert line.endswith("): sent 3,000, rejected 0, unknown 0, failed 0, skipped 0")

    results = tmp_path / "results.csv"
    assert results.read_text().splitlines()[0].split(",") == [*RESULT_COLUMNS, "customer_id"]
    rows = by_index(read_results(results))
    assert sorted(rows) == list(range(3000))
    keys = set()
    for index, row in rows.items():
        assert row["to"] == recipient(index) and row["customer_id"] == f"c{index}"
        assert (row["status"], row["ok"], row["code"], row["msg"]) == ("sent", "true", "0",
                                                                      "success")
        assert row["sms_id"].startswith("sms_") and row["error"] == row["reason"] == ""
        keys.add(row["idempotency_key"])
    assert len(keys) == 3000

    assert sandbox.stats()["accepted"] == 3000
    assert set(commits(sandbox).values()) == {1} and len(commits(sandbox)) == 3000
    sent = {r["body"]["to"]: r for r in sandbox.sent_messages()}
    request = sent[recipient(7)]
    assert request["body"] == {
        "to": recipient(7), "from": sender.digits, "type": "template",
        "template": {"name": "order_update", "parameters": '["A-7","tomorrow"]',
                     "language": "en_US"},
    }
    assert request["headers"]["idempotency-key"] == rows[7]["idempotency_key"]
    assert request["response_body"]["smsId"] == rows[7]["sms_id"]


def test_a_jsonl_file_of_thousands_of_rows(sandbox: Sandbox, sender: Number,
                                           tmp_path: Path) -> None:
    def row(i: int) -> dict[str, Any]:
        if i % 3 == 0:  # flat, the recipient a JSON number
            return {"to": int(recipient(i)), "from": sender.display, "name": "order_update",
                    "language": "en", "parameters": [f"A-{i}"], "order": {"id": i}}
        if i % 3 == 1:  # the template as an object
            return {"to": recipient(i), "from_": sender.digits,
                    "template": {"name": "order_update", "language": "en",
                                 "parameters": {"order": f"A-{i}"}}, "order": {"id": i}}
        return {"to": recipient(i), "from": sender.display, "template": "order_update",
                "language": "en", "params": [f"A-{i}", "x"], "order": {"id": i}}

    messages = write_jsonl(tmp_path / "messages.jsonl", (row(i) for i in range(2500)))
    results = tmp_path / "results.jsonl"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results))
    assert done.returncode == 0, done.stderr
    assert "sent 2,500, rejected 0" in summary(done.stderr)

    lines = read_results(results)
    assert len(lines) == 2500
    assert all(list(line)[:len(RESULT_COLUMNS)] == RESULT_COLUMNS for line in lines)
    rows = by_index(lines)
    assert sorted(rows) == list(range(2500))
    for index, line in rows.items():
        assert line["to"] == recipient(index) and line["order"] == {"id": index}
        assert line["status"] == "sent" and line["ok"] is True and line["code"] == "0"
        assert line["error"] is None and line["duplicate_of"] is None

    assert sandbox.stats()["accepted"] == 2500 and len(commits(sandbox)) == 2500
    sent = {r["body"]["to"]: r["body"]["template"]["parameters"] for r in sandbox.sent_messages()}
    assert sent[recipient(3)] == '["A-3"]'
    assert json.loads(sent[recipient(4)]) == {"order": "A-4"}
    assert sent[recipient(5)] == '["A-5","x"]'


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_stdin_in_and_results_on_stdout(sandbox: Sandbox, sender: Number, fmt: str) -> None:
    rows = csv_rows(sender.display, 20)
    if fmt == "csv":
        text = io.StringIO()
        csv.writer(text).writerows([CSV_HEADER, *rows])
        given = text.getvalue()
    else:
        given = "".join(json.dumps(dict(zip(CSV_HEADER, row))) + "\n" for row in rows)
    done = bizmsg_cli(sandbox, "send", "--file", "-", "--format", fmt, "--results", "-",
                      stdin=given)
    assert done.returncode == 0, done.stderr
    # Results on stdout take the input's format.
    if fmt == "csv":
        written = list(csv.DictReader(io.StringIO(done.stdout)))
    else:
        written = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(int(row["index"]) for row in written) == list(range(20))
    assert {row["status"] for row in written} == {"sent"}
    assert {row["customer_id"] for row in written} == {f"c{i}" for i in range(20)}
    assert sandbox.stats()["accepted"] == 20


def test_command_line_values_are_the_defaults_of_the_rows(sandbox: Sandbox, sender: Number,
                                                          tmp_path: Path) -> None:
    # Header names are matched without case or spaces; a BOM (Excel) is skipped.
    messages = write_csv(tmp_path / "m.csv", ["To", " Template ", "param1", "Language"], [
        [recipient(0), "", "", ""],           # every default
        [recipient(1), "own_template", "", "es"],
        [recipient(2), "", "own param", ""],
    ], prefix="\ufeff")
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--from", sender.display,
                      "--template", "default_template", "--language", "en",
                      "--param", "P1", "--param", "P2")
    assert done.returncode == 0, done.stderr
    bodies = {r["body"]["to"]: r["body"] for r in sandbox.sent_messages()}
    assert {to: body["from"] for to, body in bodies.items()} == dict.fromkeys(
        map(recipient, range(3)), sender.digits)
    templates = {to: body["template"] for to, body in bodies.items()}
    assert templates[recipient(0)] == {"name": "default_template", "parameters": '["P1","P2"]',
                                       "language": "en"}
    assert templates[recipient(1)] == {"name": "own_template", "parameters": '["P1","P2"]',
                                       "language": "es"}
    assert templates[recipient(2)] == {"name": "default_template", "parameters": '["own param"]',
                                       "language": "en"}


def test_the_ways_of_giving_parameters(sandbox: Sandbox, sender: Number, tmp_path: Path) -> None:
    header = ["to", "parameters", "params", "param1", "param2", "param3"]
    messages = write_csv(tmp_path / "m.csv", header, [
        [recipient(0), '{"order": "A-1"}', "", "", "", ""],   # a string, sent unchanged
        [recipient(1), "", '["a", "b"]', "", "", ""],          # a JSON list
        [recipient(2), "", "", "a", "", "c"],                  # numbered: a gap is ""
        [recipient(3), "", "", "a", "b", ""],                  # trailing empties dropped
        [recipient(4), "", "", "", "", ""],                    # none: the default
    ])
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--from", sender.display,
                      "--template", "t", "--language", "en", "--parameters", "DEFAULT")
    assert done.returncode == 0, done.stderr
    sent = {r["body"]["to"]: r["body"]["template"]["parameters"] for r in sandbox.sent_messages()}
    assert sent == {recipient(0): '{"order": "A-1"}', recipient(1): '["a","b"]',
                    recipient(2): '["a","","c"]', recipient(3): '["a","b"]',
                    recipient(4): "DEFAULT"}


# --- dry run ---------------------------------------------------------------------------------


def test_dry_run_of_a_good_file_exits_0_and_sends_nothing(sandbox: Sandbox, sender: Number,
                                                          tmp_path: Path) -> None:
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 10))
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--dry-run", "--rate", "4",
                      "--journal", str(tmp_path / "j.db"), "--results", str(tmp_path / "r.csv"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout.splitlines()
    assert out[0] == f"dry run of {messages}: nothing was sent"
    assert out[1:5] == ["  messages           10", "  invalid             0",
                        "  duplicates          0", "  to send            10"]
    assert "senders: 1, 0 with a problem" in out
    # 10 messages at 4 a second: the first at once, 9 periods of the timeline after it.
    assert "estimated duration: 2.3s at the chosen pace" in out
    assert out[-1] == "plan OK: 10 message(s) would be sent"
    assert sandbox.sent_messages() == []
    # The sending options were accepted and ignored: no journal, no results.
    assert not (tmp_path / "j.db").exists() and not (tmp_path / "r.csv").exists()


def test_dry_run_reports_what_stands_in_the_way_and_exits_3(sandbox: Sandbox, sender: Number,
                                                            tmp_path: Path) -> None:
    with sandbox.client() as client:
        number = next(n for n in client.business_phone_numbers.iter()
                      if n.phone_number_id == sender.phone_number_id)
        account = next(a for a in client.business_accounts.iter()
                       if a.biz_account_id == number.biz_account_id)
    tier = account.chat_business_manager_messaging_limit or ""
    limit = int(tier.removeprefix("TIER_").replace("K", "000"))
    rows = csv_rows(sender.display, limit + 1)      # one recipient past the tier
    rows.append(["123", sender.display, "t", "en", "", "", "bad"])
    rows.append([recipient(limit + 5), STRANGER, "t", "en", "", "", "stranger"])
    rows.append(list(rows[0]))                      # a duplicate
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, rows)
    sandbox.clear_requests()
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--dry-run")
    assert done.returncode == 3, done.stderr
    out = done.stdout
    assert f"  invalid             1\n" in out and "  duplicates          1  (--no-dedupe" in out
    assert (f"  #{limit + 1}: ValidationError: invalid to: \"123\" is not a phone number"
            in out)
    assert f"  #{limit + 3} repeats #0" in out
    assert "senders: 2, 1 with a problem" in out
    assert re.search(r"^  14155550100 +1 message  NOT A NUMBER OF THIS ACCOUNT  "
                     r"\(--pace auto: none\)$", out, re.M), out
    assert "    problem: 1415****0100 is not a business phone number of this account" in out
    assert (f"  {account.biz_account_id}  {account.name}  {tier} (limit {limit:,}): "
            f"{limit + 1:,} recipients  PAST THE TIER") in out
    assert "estimated duration: unknown" in out
    assert out.splitlines()[-1] == ("plan NOT OK: 1 invalid message(s), 1 sender(s) with a "
                                    "problem, 1 account(s) past the messaging tier")
    assert sandbox.sent_messages() == []


# --- usage, failures, progress ---------------------------------------------------------------


@pytest.mark.parametrize("args, says", [
    (["--file", "{csv}", "--to", "8613800138000"], "--file and --to cannot be used together"),
    (["--file", "{csv}", "--idempotency-key", "k"], "--file and --idempotency-key cannot"),
    (["--file", "{csv}", "-o", "json"], "--file and --output cannot be used together"),
    (["--file", "{dir}/missing.csv"], "cannot read {dir}/missing.csv: No such file"),
    (["--file", "{dir}/m.txt"], "cannot tell the format of {dir}/m.txt: give --format"),
    (["--file", "-"], "cannot tell the format of stdin: give --format csv or jsonl"),
    (["--file", "{csv}", "--results", "{dir}/r.txt"], "cannot tell the format of {dir}/r.txt"),
    (["--file", "{csv}", "--results", "{dir}/no/r.csv"], "cannot write the results to"),
    (["--file", "{no_to}"], "has no 'to' column (give one); its columns: phone, from"),
    (["--file", "{no_from}"], "has no 'from' column (give one, or --from for every row)"),
    (["--file", "{empty}"], "is empty: a CSV file starts with a header row"),
    (["--to", "8613800138000", "--journal", "j.db"], "--journal applies to --file"),
    (["--file", "{csv}", "--results", "{csv}"], "--results and --file name the same file"),
    (["--file", "{csv}", "--results", "{dir}/j.csv", "--journal", "{dir}/./j.csv"],
     "--results and --journal name the same file"),
])
def test_usage_errors_exit_2_before_anything_is_sent(sandbox: Sandbox, sender: Number,
                                                     tmp_path: Path, args: list[str],
                                                     says: str) -> None:
    files = {
        "csv": write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 3)),
        "no_to": write_csv(tmp_path / "no_to.csv", ["phone", "from"], [["1", "2"]]),
        "no_from": write_csv(tmp_path / "no_from.csv", ["to", "template", "language"], []),
        "empty": tmp_path / "empty.csv",
        "dir": tmp_path,
    }
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "m.txt").write_text("")
    given = [arg.format(**files) for arg in args]
    done = bizmsg_cli(sandbox, "send", *given, "--template", "t", "--language", "en")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: ") and says.format(**files) in line, line
    assert sandbox.requests() == []


def test_a_journal_that_cannot_be_opened_exits_1(sandbox: Sandbox, sender: Number,
                                                  tmp_path: Path) -> None:
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 5))
    done = bizmsg_cli(sandbox, "send", "--file", str(messages),
                      "--journal", str(tmp_path / "no" / "such" / "dir" / "j.db"))
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("bizmsg: 0 messages in ")
    assert lines[-1].startswith("bizmsg: CampaignError: journal ")
    assert sandbox.sent_messages() == []


def test_a_file_that_cannot_be_read_on_stops_the_campaign_and_exits_1(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    # Far enough into the file that the rows before it are read (and sent) first.
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 2000))
    with messages.open("ab") as file:
        file.write(b"\xff\xfe not UTF-8\n")
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results",
                      str(tmp_path / "r.csv"))
    assert done.returncode == 1, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"bizmsg: {messages}, line ")
    assert "cannot read on: 'utf-8' codec can't decode" in last
    # What was read before it was handled, and is in the results.
    written = read_results(tmp_path / "r.csv")
    assert 0 < len(written) <= 2000
    assert Counter(row["status"] for row in written)["sent"] == len(committed(sandbox)) > 0


def test_a_file_not_utf8_from_its_start_is_a_usage_error(sandbox: Sandbox,
                                                         tmp_path: Path) -> None:
    messages = tmp_path / "m.csv"
    messages.write_bytes("to,from\n8613800138000,caf\u00e9\n".encode("latin-1"))
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--template", "t",
                      "--language", "en")
    assert done.returncode == 2
    assert done.stderr == (f"bizmsg: {messages}: cannot read it: 'utf-8' codec can't decode "
                           "byte 0xe9 in position 25: invalid continuation byte\n")


def test_pace_auto_and_the_campaign_warnings_on_stderr(tmp_path: Path) -> None:
    data = {"tenants": {"acme": [{
        "bizAccountId": "100000000000001", "name": "Acme", "chatBusinessManagerMessagingLimit":
        "TIER_50", "businessPhoneNumbers": [{"phoneNumberId": "200000000000001",
                                             "displayPhoneNumber": "+1 415 555 0100",
                                             "throughput": "HIGH"}]}]}}
    with Sandbox(seed_data=data) as sandbox:
        messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows("+1 415 555 0100", 60))
        done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--pace", "auto",
                          "--no-enforce-tier")
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert lines[-1] == summary(done.stderr)
        warnings = lines[:-1]
        assert len(warnings) == 2 and all(w.startswith("bizmsg: warning: account Acme ")
                                          for w in warnings), warnings
        assert "80% of its messaging tier TIER_50" in warnings[0]
        assert "past its messaging tier TIER_50" in warnings[1]
        assert sandbox.stats()["accepted"] == 60  # the sandbox does not enforce it here


def on_a_terminal(sandbox: Sandbox, *args: str) -> tuple[int, str]:
    """Runs ``bizmsg *args`` with stderr on a terminal (a pty, 120 columns wide): its exit
    status, and what it showed there."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    process = subprocess.Popen(
        [*SCRIPT, *args], stdout=subprocess.PIPE, stderr=follower,
        env=environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token),
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.wait(timeout=60), shown.decode()


def test_a_progress_bar_on_a_terminal(sandbox: Sandbox, sender: Number, tmp_path: Path) -> None:
    pytest.importorskip("tqdm")
    messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows(sender.display, 300))
    status, text = on_a_terminal(sandbox, "send", "--file", str(messages), "--results",
                                 str(tmp_path / "r.csv"))
    assert status == 0
    assert "sending: 100%" in text and "300/300" in text
    assert text.rstrip().splitlines()[-1].startswith("bizmsg: 300 messages in ")


def test_warnings_during_a_campaign_go_through_the_progress_bar(tmp_path: Path) -> None:
    """Regression: a warning was printed where the cursor was, inside the bar
    (``…sent=942]bizmsg: warning: …``). Each goes through tqdm, which clears the bar, writes
    the line and draws the bar again: what is left of a line once the terminal has handled
    its carriage returns is the warning alone."""
    pytest.importorskip("tqdm")
    data = {"tenants": {"acme": [{
        "bizAccountId": "100000000000001", "name": "Acme", "chatBusinessManagerMessagingLimit":
        "TIER_50", "businessPhoneNumbers": [{"phoneNumberId": "200000000000001",
                                             "displayPhoneNumber": "+1 415 555 0100",
                                             "throughput": "HIGH"}]}]}}
    with Sandbox(seed_data=data) as sandbox:
        messages = write_csv(tmp_path / "m.csv", CSV_HEADER, csv_rows("+1 415 555 0100", 60))
        status, text = on_a_terminal(sandbox, "send", "--file", str(messages), "--pace",
                                     "auto", "--no-enforce-tier", "--results",
                                     str(tmp_path / "r.csv"))
    assert status == 0, text
    shown = [line.rstrip("\r").split("\r")[-1] for line in text.split("\n")]
    warnings = [line for line in text.split("\n") if "warning:" in line]
    assert len(warnings) == 2, text
    assert [line for line in shown if "warning:" in line] == [
        line for line in shown if line.startswith("bizmsg: warning: account Acme ")], text
    assert "sending: 100%" in text


def test_help_documents_the_columns_results_and_exit_statuses() -> None:
    done = subprocess.run([*SCRIPT, "send", "--help"], capture_output=True, text=True,
                          timeout=30, env=environment())
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for needed in ("to the recipient (required in every row)", "from (or from_)",
                   "template (or name)", "params or: a JSON list of strings",
                   "param1 ... paramN or: one parameter per column",
                   "idempotency_key optional", "Columns: index", "--journal FILE makes the "
                   "campaign resumable", "--resend-unknown", "4 the outcome of some messages "
                   "is unknown (wins over 3)", "130 interrupted (Ctrl-C)"):
        assert needed in text, needed


def test_import_bizmsg_loads_no_cli_module() -> None:
    code = ("import sys, bizmsg; print(' '.join(sorted(m for m in sys.modules if "
            "m.startswith('bizmsg.') or m in ('csv', 'tqdm', 'argparse'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30, env=environment())
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert not loaded & {"bizmsg.cli", "bizmsg._cli_commands", "bizmsg._cli_output",
                         "bizmsg._cli_bulk", "csv", "tqdm"}, loaded
    assert bizmsg.__version__


def test_odd_input_lines_are_failed_rows_and_the_file_is_read_to_its_end(
    sandbox: Sandbox, sender: Number, tmp_path: Path
) -> None:
    """A lone surrogate (valid JSON, not encodable as UTF-8), a line nested too deeply to
    parse, a CSV cell longer than the csv module's default limit and a ``param5000`` column are
    each that row's problem: every row gets its result line and the rest is sent. (Regression
    tests: the first two crashed the command halfway, with messages in flight left in doubt;
    the long cell ended the file; param5000 made a 5000-item list.)"""
    good = {"to": recipient(1), "from": sender.digits, "name": "order_update",
            "language": "en", "parameters": ["A-1"]}
    lines = [json.dumps(dict(good, note="\udc80")),
             json.dumps(dict(good, to="\ud800")),
             "[" * 200_000,
             json.dumps(dict(good, to=recipient(2))),
             json.dumps(dict(good, to=recipient(3), param5000="x", parameters=None))]
    messages = write_jsonl(tmp_path / "odd.jsonl", lines)
    results = tmp_path / "r.jsonl"
    done = bizmsg_cli(sandbox, "send", "--file", str(messages), "--results", str(results))
    assert "Traceback" not in done.stderr
    assert done.returncode == 3, done.stderr
    rows = by_index(read_results(results))
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert [rows[i]["status"] for i in range(5)] == ["sent", "failed", "failed", "sent",
                                                    "failed"]
    assert "nested too deeply" in rows[2]["error"]
    assert "param5000" in rows[4]["error"]

    long_cell = write_csv(tmp_path / "long.csv", CSV_HEADER,
                          [[recipient(10), sender.digits, "order_update", "en", "A", "B",
                            "x" * 200_000], *csv_rows(sender.digits, 3, start=11)])
    done = bizmsg_cli(sandbox, "send", "--file", str(long_cell), "--results",
                      str(tmp_path / "r.csv"))
    assert done.returncode == 0, done.stderr
    previous = csv.field_size_limit(1 << 24)  # the long cell is in the results too
    try:
        assert len(read_results(tmp_path / "r.csv")) == 4
    finally:
        csv.field_size_limit(previous)
