"""``bizmsg accounts list`` and ``bizmsg numbers list``: each output format parsed back, the
table's width, ``--columns``, and ``--all`` streaming a long listing in bounded memory."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.cli.output import _cell
from bizmsg.testing import Fault, Sandbox
from test_cli import MODULE, environment, on, run

NUMBER_FIELDS = ["biz_account_id", "phone_number_id", "display_phone_number", "verified_name",
                 "status", "quality_rating", "code_verification_status", "throughput",
                 "messaging_limit_tier", "create_time", "update_time"]
ACCOUNT_COLUMNS = ["biz_account_id", "name", "status", "business_verification_status",
                   "account_review_status", "chat_business_manager_messaging_limit",
                   "business_phone_numbers", "phone_number_ids", "create_time", "update_time"]


def resource(client: bizmsg.Client, listing: str) -> Any:
    return client.business_accounts if listing == "accounts" else client.business_phone_numbers


@pytest.fixture(scope="module")
def big() -> Iterator[Sandbox]:
    """300 accounts (about 900 numbers): several pages even at the largest page size."""
    with Sandbox(accounts_per_tenant=300) as sandbox:
        yield sandbox


# --- one page -------------------------------------------------------------------------------


@pytest.mark.parametrize("listing", ["accounts", "numbers"])
def test_json_is_the_page_as_received(sandbox: Sandbox, listing: str) -> None:
    done = on(sandbox, listing, "list", "--page", "2", "--page-size", "2", "--output", "json")
    assert done.returncode == 0, done.stderr
    with sandbox.client() as client:
        expected = resource(client, listing).list(page_no=2, page_size=2, raw=True)
    assert json.loads(done.stdout) == expected
    assert list(json.loads(done.stdout)) == ["data", "total", "size", "current", "pages"]


@pytest.mark.parametrize("listing", ["accounts", "numbers"])
def test_jsonl_is_one_item_per_line_as_received(sandbox: Sandbox, listing: str) -> None:
    done = on(sandbox, listing, "list", "--page-size", "5", "-o", "jsonl")
    assert done.returncode == 0, done.stderr
    with sandbox.client() as client:
        expected = [item.to_dict() for item in resource(client, listing).list(page_size=5)]
    assert [json.loads(line) for line in done.stdout.splitlines()] == expected


def test_csv_of_numbers_has_a_header_and_every_field(sandbox: Sandbox) -> None:
    done = on(sandbox, "numbers", "list", "--output", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert done.stdout.splitlines()[0].split(",") == NUMBER_FIELDS
    with sandbox.client() as client:
        numbers = client.business_phone_numbers.list(page_size=100).data
    assert len(rows) == len(numbers) > 5
    for row, number in zip(rows, numbers):
        assert row["phone_number_id"] == number.phone_number_id
        assert row["display_phone_number"] == number.display_phone_number
        assert row["status"] == number.status
        assert number.create_time is not None
        assert row["create_time"] == number.create_time.isoformat(timespec="milliseconds")


def test_csv_of_accounts_flattens_their_numbers_into_a_count_and_ids(sandbox: Sandbox) -> None:
    done = on(sandbox, "accounts", "list", "--output", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split(",") == ACCOUNT_COLUMNS
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    with sandbox.client() as client:
        accounts = client.business_accounts.list().data
    assert [row["biz_account_id"] for row in rows] == [a.biz_account_id for a in accounts]
    for row, account in zip(rows, accounts):
        numbers = account.business_phone_numbers
        assert row["business_phone_numbers"] == str(len(numbers))
        assert row["phone_number_ids"] == ";".join(n.phone_number_id for n in numbers)
        assert row["name"] == account.name


def test_accounts_list_help_documents_the_csv_flattening() -> None:
    done = run("accounts", "list", "--help")
    assert "business_phone_numbers is how many it has and phone_number_ids their" in done.stdout
    assert 'ids joined with ";"' in done.stdout


def test_table_of_numbers(sandbox: Sandbox) -> None:
    done = on(sandbox, "numbers", "list", "--page-size", "4")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["PHONE_NUMBER_ID", "DISPLAY_NUMBER", "STATUS", "QUALITY", "TIER"]
    with sandbox.client() as client:
        page = client.business_phone_numbers.list(page_size=4)
    for line, number in zip(lines[1:], page.data):
        assert line.startswith(f"{number.phone_number_id}  {number.display_phone_number} ")
        assert f" {number.status} " in line and line.endswith(f" {number.messaging_limit_tier}")
    assert lines[5:] == [f"(page 1 of {page.pages}; {page.total} in total; next: --page 2, "
                         f"or every page: --all)"]


def test_table_of_accounts(sandbox: Sandbox) -> None:
    done = on(sandbox, "accounts", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["BIZ_ACCOUNT_ID", "NAME", "STATUS", "LIMIT", "NUMBERS"]
    with sandbox.client() as client:
        accounts = client.business_accounts.list().data
    for line, account in zip(lines[1:], accounts):
        assert line.startswith(f"{account.biz_account_id}  {account.name} ")
        assert line.endswith(f"  {len(account.business_phone_numbers)}")
    assert lines[4:] == ["(page 1 of 1; 3 in total)"]


# 66: as narrow as eleven columns can go (four characters each, two between them).
@pytest.mark.parametrize("columns", [None, "80", "66"])
@pytest.mark.parametrize("listing, every_column", [("numbers", ",".join(NUMBER_FIELDS)),
                                                   ("accounts", ",".join(ACCOUNT_COLUMNS))])
@pytest.mark.parametrize("which", ["default", "every column"])
def test_a_table_fits_the_terminal_80_columns_when_piped(
    big: Sandbox, columns: str | None, listing: str, every_column: str, which: str
) -> None:
    extra = ("--columns", every_column) if which == "every column" else ()
    env = environment() if columns is None else environment(COLUMNS=columns)
    done = on(big, listing, "list", "--page-size", "1000", *extra, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) > 300
    room = 80 if columns is None else int(columns)
    assert max(len(line) for line in lines) <= room
    if which == "default" and room == 80:
        assert "…" not in done.stdout  # the default columns fit whole


def test_a_wide_terminal_shows_every_column_uncut(sandbox: Sandbox) -> None:
    done = on(sandbox, "numbers", "list", "--columns", ",".join(NUMBER_FIELDS),
              env=environment(COLUMNS="300"))
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) > 200
    with sandbox.client() as client:
        first = client.business_phone_numbers.list().data[0]
    assert first.update_time is not None
    assert done.stdout.splitlines()[1].split() == [
        first.biz_account_id, first.phone_number_id, *(first.display_phone_number or "").split(),
        *(first.verified_name or "").split(), first.status, first.quality_rating,
        first.code_verification_status, first.throughput, first.messaging_limit_tier,
        first.create_time and first.create_time.isoformat(timespec="milliseconds"),
        first.update_time.isoformat(timespec="milliseconds"),
    ]


@pytest.mark.parametrize("output", ["table", "csv"])
def test_columns_picks_the_columns_and_their_order(sandbox: Sandbox, output: str) -> None:
    done = on(sandbox, "accounts", "list", "-o", output,
              "--columns", "phone_number_ids, name,business_phone_numbers")
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    if output == "csv":
        assert header == "phone_number_ids,name,business_phone_numbers"
        with sandbox.client() as client:
            first = client.business_accounts.list().data[0]
        assert next(csv.reader(io.StringIO(done.stdout.splitlines()[1]))) == [
            ";".join(n.phone_number_id for n in first.business_phone_numbers),
            first.name, str(len(first.business_phone_numbers)),
        ]
    else:
        assert header.split() == ["PHONE_NUMBER_IDS", "NAME", "NUMBERS"]


def test_cells_are_cut_and_padded_by_terminal_width() -> None:
    def width(text: str) -> int:
        return sum(0 if unicodedata.combining(c) else
                   2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    assert _cell("abc", 5) == "abc  "
    assert _cell("abcdef", 5) == "abcd…"
    assert _cell("名字很长的公司", 6) == "名字… "  # wide characters: two columns each
    assert _cell("名字", 4) == "名字"
    assert _cell("Cafe\u0301 Ltd", 9) == "Cafe\u0301 Ltd "  # a combining accent takes none
    assert _cell("evil\x1b[2Jname\nx", 20) == "evil?[2Jname?x      "
    for text in ("名字很长的公司", "ab名字cd", "x\u0301" * 9, "混合 mixed 文字"):
        for size in range(4, 12):
            assert width(_cell(text, size)) == size, (text, size)


# --- every page -----------------------------------------------------------------------------


@pytest.mark.parametrize("listing", ["accounts", "numbers"])
@pytest.mark.parametrize("output", ["json", "jsonl", "csv", "table"])
def test_all_lists_every_item_once_in_order(big: Sandbox, listing: str, output: str) -> None:
    done = on(big, listing, "list", "--all", "--page-size", "77", "--output", output)
    assert done.returncode == 0, done.stderr
    with big.client() as client:
        expected = [item.to_dict() for item in resource(client, listing).iter(page_size=1000)]
    assert len(expected) >= (300 if listing == "accounts" else 600)
    key = "bizAccountId" if listing == "accounts" else "phoneNumberId"
    if output == "json":
        assert json.loads(done.stdout) == expected
    elif output == "jsonl":
        assert [json.loads(line) for line in done.stdout.splitlines()] == expected
    elif output == "csv":
        rows = list(csv.DictReader(io.StringIO(done.stdout)))
        column = "biz_account_id" if listing == "accounts" else "phone_number_id"
        assert [row[column] for row in rows] == [item[key] for item in expected]
    else:
        lines = done.stdout.splitlines()
        assert len(lines) == 1 + len(expected)  # a header, and no page footer
        assert [line.split()[0] for line in lines[1:]] == [item[key] for item in expected]


def test_all_as_json_of_an_empty_listing_is_an_empty_array() -> None:
    with Sandbox(accounts_per_tenant=0) as empty:
        done = on(empty, "numbers", "list", "--all", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"


def test_all_prints_the_first_items_before_the_listing_ends() -> None:
    with Sandbox(accounts_per_tenant=300, delay=0.2) as slow:
        process = subprocess.Popen(
            [*MODULE, "numbers", "list", "--all", "--page-size", "50", "-o", "jsonl"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=environment(BIZMSG_BASE_URL=slow.base_url, BIZMSG_TOKEN=slow.token),
        )
        try:
            assert process.stdout is not None
            first = json.loads(process.stdout.readline())
            # About 18 pages of 0.2 s each: most are still to come.
            assert process.poll() is None
            pages_so_far = len(slow.requests())
            rest = process.stdout.readlines()
            assert process.wait(timeout=60) == 0
        finally:
            process.kill()
        pages = len(slow.requests())
    assert pages_so_far < pages / 2
    assert first["phoneNumberId"] and len(rest) > 600


def peak_memory(*args: str, sandbox: Sandbox) -> tuple[int, int]:
    """Runs a command and reads what it prints; returns the number of lines and the largest
    resident memory (KiB) the command reached, read from /proc while it runs. (Not the
    ``ru_maxrss`` of ``wait4``: Linux counts in it the memory of this process, copied by the
    fork before the exec.)"""
    process = subprocess.Popen(
        [*MODULE, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token),
    )
    assert process.stdout is not None
    status = Path(f"/proc/{process.pid}/status")
    lines = peak = 0
    for _ in process.stdout:
        lines += 1
        if lines % 1000 == 0:  # VmHWM only grows: sampling it now and then is enough
            found = re.search(r"^VmHWM:\s+(\d+) kB", status.read_text(), re.MULTILINE)
            peak = max(peak, int(found.group(1)) if found else 0)
    assert process.wait(timeout=60) == 0
    return lines, peak


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
@pytest.mark.parametrize("output", ["json", "table"])
def test_all_over_100k_numbers_runs_in_bounded_memory(output: str) -> None:
    with Sandbox(tenants=["acme"], accounts_per_tenant=1000,
                 numbers_per_account=(100, 100)) as huge:
        _, one_page = peak_memory("numbers", "list", "--page-size", "1000", "-o", output,
                                  sandbox=huge)
        lines, every_page = peak_memory("numbers", "list", "--all", "--page-size", "1000",
                                        "-o", output, sandbox=huge)
    assert lines == 100_000 + (2 if output == "json" else 1)  # json: "[" and "]"; a header
    # Two pages are held at a time (one read ahead). Holding the 100,000 numbers would take
    # about 300 MiB.
    assert one_page > 0 and every_page - one_page < 40 * 1024, (one_page, every_page)


def test_all_into_a_reader_that_stops_early_exits_quietly(big: Sandbox) -> None:
    process = subprocess.Popen(
        [*MODULE, "numbers", "list", "--all", "--page-size", "10", "-o", "jsonl"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=environment(BIZMSG_BASE_URL=big.base_url, BIZMSG_TOKEN=big.token),
    )
    assert process.stdout is not None and process.stderr is not None
    json.loads(process.stdout.readline())
    process.stdout.close()  # `| head -1`
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert stderr == ""


def test_a_reader_gone_before_the_output_is_flushed_is_quiet_too(sandbox: Sandbox) -> None:
    # The whole output fits in stdout's buffer: the broken pipe shows at the last flush.
    process = subprocess.Popen(
        [*MODULE, "numbers", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token),
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert stderr == ""


def test_an_error_in_the_middle_of_all_ends_it_after_what_was_printed(big: Sandbox) -> None:
    with big.client() as client:
        first_page = [n.phone_number_id for n in client.business_phone_numbers.list(page_size=100)]
    big.inject("business_phone_numbers", Fault())  # the first page is answered as usual,
    big.inject("business_phone_numbers", status=500, times=3)  # the second never
    try:
        done = on(big, "numbers", "list", "--all", "--page-size", "100", "-o", "jsonl")
    finally:
        big.clear_faults()
    assert done.returncode == 1
    assert [json.loads(line)["phoneNumberId"] for line in done.stdout.splitlines()] == first_page
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: ServerError: ") and "pageNo=2&pageSize=100" in line
