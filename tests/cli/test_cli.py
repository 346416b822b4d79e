"""The ``bizmsg`` command: ``demo``, ``sandbox`` (standalone, reachable with any HTTP client),
``--version``, and what every command shares: help, configuration, exit statuses, --debug, the
token never printed, Ctrl-C. ``send`` and the listings are in test_cli_send.py and
test_cli_list.py, which use the helpers here.

Every command runs as a real process: ``python -m bizmsg`` or the installed console script.
A test that interrupts one uses the ``sigint_handler`` fixture: started with SIGINT ignored
(``nohup``, ``cmd &`` in a script), children would inherit the ignored signal, whereas a
handled one is reset to the default by exec, so the child's Python raises KeyboardInterrupt.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, free_port

MODULE = (sys.executable, "-m", "bizmsg")
SCRIPT = (str(Path(sys.executable).parent / "bizmsg"),)


def environment(**variables: str) -> dict[str, str]:
    """This process's environment without bizmsg's variables and COLUMNS, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_") and k != "COLUMNS"}
    env.update(variables)
    return env


def run(*args: str, timeout: float = 60, env: dict[str, str] | None = None,
        command: Sequence[str] = MODULE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout,
                          env=environment() if env is None else env)


def on(sandbox: Sandbox, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """Runs a command against ``sandbox``, configured by options."""
    return run(*args, "--base-url", sandbox.base_url, "--token", sandbox.token, **options)


def start(sandbox: Sandbox, *args: str) -> subprocess.Popen[str]:
    """Starts a command against ``sandbox``, configured by the environment."""
    return subprocess.Popen(
        [*MODULE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token),
    )


@pytest.fixture(params=["module", "script"])
def entry_point(request: pytest.FixtureRequest) -> Sequence[str]:
    """``python -m bizmsg`` and the installed ``bizmsg`` script."""
    if request.param == "module":
        return MODULE
    if not Path(SCRIPT[0]).exists():
        pytest.skip("no console script next to this interpreter")
    return SCRIPT


def test_demo_runs_and_prints_the_send_result() -> None:
    done = run("demo")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Business accounts: 3 in 1 page(s)" in out
    assert "sent: sms_id=sms_00000000000000000001 status=ACCEPTED code=0 ok=True" in out
    received = next(line for line in out.splitlines() if "the service received:" in line)
    body = json.loads(received.split("the service received:", 1)[1])
    assert body["type"] == "template"
    assert body["to"] == "8613800138000"
    assert body["template"]["language"] == "en_US"
    assert "SendRejectedError: code='1002'" in out
    assert ("plan:    CampaignPlan(502 messages: 500 to send, 1 invalid, 1 duplicate; 1 sender, "
            "unpaced; 0 warnings)") in out
    assert "sent:    BulkResult(502 messages: sent=500, rejected=0, unknown=0, failed=1, " \
        "skipped=1; " in out
    assert "re-run:  BulkResult(502 messages: sent=0, rejected=0, unknown=0, failed=1, " \
        "skipped=501; " in out
    assert "the service accepted 500 messages: none twice" in out
    assert out.rstrip().endswith("done.")


def test_demo_piped_into_a_reader_that_stops_early_exits_quietly() -> None:
    # Regression: `bizmsg demo | head -2` ended in a BrokenPipeError traceback.
    # Unbuffered, so the demo writes while the reader is gone (not only at exit).
    demo = subprocess.Popen([sys.executable, "-u", "-m", "bizmsg", "demo"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert demo.stdout is not None and demo.stderr is not None
    demo.stdout.readline()
    demo.stdout.close()  # the reader goes away after one line
    stderr = demo.stderr.read().decode()
    assert demo.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr


def test_demo_with_another_seed() -> None:
    done = run("demo", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "ok=True" in done.stdout


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"bizmsg {bizmsg.__version__}"


def test_unknown_command_is_a_usage_error() -> None:
    done = run("frobnicate")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "bizmsg"
    if not script.exists():
        pytest.skip("no console script next to this interpreter")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == f"bizmsg {bizmsg.__version__}"


def get(url: str, token: str | None) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_standalone_sandbox_serves_until_terminated() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(port), "--seed", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith(f"bizmsg sandbox on http://127.0.0.1:{port}"), banner
        base = f"http://127.0.0.1:{port}"
        status, body = get(f"{base}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=5",
                           "sandbox-token-acme")
        assert status == 200
        assert len(body["data"]) == 5
        assert list(body) == ["data", "total", "size", "current", "pages"]
        status, body = get(f"{base}/v1/chat/businessAccounts", None)
        assert status == 401 and body["code"] == "401"
        # The bizmsg client talks to it like to any service.
        with bizmsg.Client("sandbox-token-globex", base_url=base) as client:
            assert client.business_accounts.list().data[0].name == "Globex Support"
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=5)
        assert time.monotonic() - started < 5
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with bizmsg.Client("t", base_url=f"http://127.0.0.1:{port}", max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError):
            client.business_accounts.list()


def test_standalone_sandbox_stops_on_ctrl_c(sigint_handler: None) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bizmsg", "sandbox", "--port", str(port), "--tenant", "solo"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("bizmsg sandbox on")
        assert "tenant solo: Authorization: Bearer sandbox-token-solo" in process.stdout.readline()
        status, _ = get(f"http://127.0.0.1:{port}/v1/chat/businessAccounts", "sandbox-token-solo")
        assert status == 200
        process.send_signal(signal.SIGINT)
        process.wait(timeout=5)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_standalone_sandbox_on_a_taken_port_is_a_configuration_error() -> None:
    # Regression: it exited 1, where the documented status of a configuration
    # error is 2.
    with Sandbox() as taken:
        done = run("sandbox", "--port", str(taken.port), timeout=30)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: ConfigurationError: ") and "could not start" in line


SEED_DATA = {"tenants": {
    "shop": [
        {"bizAccountId": "100000000000001", "name": "Shop Main",
         "chatBusinessManagerMessagingLimit": "TIER_10K",
         "businessPhoneNumbers": [
             {"phoneNumberId": "200000000000001", "displayPhoneNumber": "+1 415 555 0100"},
             {"phoneNumberId": "200000000000002", "displayPhoneNumber": "+1 415 555 0101",
              "status": "DISCONNECTED"}]},
        {"bizAccountId": "100000000000002", "name": "Shop Outlet",
         "createTime": "2024-02-01T00:00:00.000+0000"},
    ],
    "cafe": [
        {"bizAccountId": "100000000000003", "businessPhoneNumbers": [
            {"phoneNumberId": "200000000000003", "displayPhoneNumber": "+44 7700 900123"}]},
    ],
}}

FAULTS = {"seed": 7, "faults": {
    "send": [{"status": 503, "headers": {"Retry-After": "0"}, "times": 1}],
    "business_accounts": {"status": 500, "times": 1},
}}


def post_send(base: str, token: str, from_: str, to: str) -> tuple[int, Any, dict[str, str]]:
    body = json.dumps({"to": to, "from": from_, "type": "template",
                       "template": {"name": "t", "parameters": "[]", "language": "en"}})
    request = urllib.request.Request(
        f"{base}/v1/chat/messages/send", data=body.encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def banner(process: subprocess.Popen[str]) -> list[str]:
    """The standalone sandbox's banner, up to its "try: curl" line."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].lstrip().startswith("try: curl"):
        line = process.stdout.readline()
        assert line, (lines, process.stderr.read() if process.stderr else "")
        lines.append(line.rstrip("\n"))
    return lines


def test_standalone_sandbox_with_seed_data_faults_and_limits(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text(json.dumps(SEED_DATA))
    (tmp_path / "faults.json").write_text(json.dumps(FAULTS))
    process = subprocess.Popen(
        [*SCRIPT, "sandbox", "--port", "0", "--seed-data", str(tmp_path / "data.json"),
         "--faults", str(tmp_path / "faults.json"), "--enforce-limits",
         "--max-logged-requests", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(),
    )
    try:
        lines = banner(process)
        assert lines[0].startswith("bizmsg sandbox on http://127.0.0.1:")
        base = lines[0].split()[3].rstrip(";")
        assert lines[1:-1] == [
            "  tenant shop: Authorization: Bearer sandbox-token-shop",
            "  tenant cafe: Authorization: Bearer sandbox-token-cafe",
            f"  seed data {tmp_path / 'data.json'}: 2 tenants: shop (2 accounts, 2 numbers), "
            "cafe (1 account, 1 number)",
            f"  faults {tmp_path / 'faults.json'}: 2 faults queued (send 1, "
            "business_accounts 1); seed 7",
            "  limits enforced: 429 past a number's throughput (STANDARD 80/s, HIGH 1000/s), "
            "failed commit 1007 past an account's messaging tier",
            "  request log: the last 100 requests kept",
        ]

        # The seeded accounts are listed, after the fault queued for the first listing.
        status, body = get(f"{base}/v1/chat/businessAccounts", "sandbox-token-shop")
        assert status == 500 and body == {"code": "500", "msg": "injected fault"}
        status, body = get(f"{base}/v1/chat/businessAccounts", "sandbox-token-shop")
        assert status == 200
        assert [(a["bizAccountId"], a["name"]) for a in body["data"]] == [
            ("100000000000001", "Shop Main"), ("100000000000002", "Shop Outlet")]
        assert body["data"][0]["businessPhoneNumbers"][1]["status"] == "DISCONNECTED"
        status, body = get(f"{base}/v1/chat/businessPhoneNumber", "sandbox-token-cafe")
        assert [n["displayPhoneNumber"] for n in body["data"]] == ["+44 7700 900123"]

        # The first send meets its fault; then a STANDARD number sends 80 a second at most.
        answers = []
        started = time.monotonic()
        for i in range(300):
            answers.append(post_send(base, "sandbox-token-shop", "14155550100",
                                     f"8613800{i:06d}"))
        elapsed = time.monotonic() - started
        assert answers[0][0] == 503
        statuses = Counter(status for status, _, _ in answers[1:])
        assert set(statuses) == {200, 429}, statuses
        assert statuses[200] <= 80 + 80 * elapsed + 2, (statuses, elapsed)
        throttled = next(answer for answer in answers if answer[0] == 429)
        assert throttled[1]["code"] == "130429" and "retry-after" in map(str.lower, throttled[2])
        # A number not CONNECTED cannot send.
        status, body, _ = post_send(base, "sandbox-token-shop", "14155550101", "8613800999999")
        assert (status, body["code"]) == (200, "1003")

        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert stdout.splitlines()[-1] == (
        f"bizmsg sandbox stopped after 304 requests: 301 sends, {statuses[200]} accepted, "
        f"1 failed commits, 0 replayed, {statuses[429]} throttled")


@pytest.mark.parametrize("content, says", [
    ('{"faults": {"sms": {"status": 500}}}', 'invalid faults: unknown sandbox route "sms"'),
    ('{"faults": {"send": {"status": 700}}}',
     "invalid faults: faults.send[0]: status 700 is not a final HTTP status (200 to 599)"),
    ('{"faults": {"send": {"delay": -1}}}', "invalid faults: faults.send[0]: delay must be 0"),
    ("not JSON", "invalid faults: fault file: expected ident at line 1 column 2"),
    (None, "cannot read it: No such file or directory"),
])
def test_standalone_sandbox_refuses_a_bad_fault_file_in_one_line(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "faults.json"
    if content is not None:
        path.write_text(content)
    done = run("sandbox", "--port", "0", "--faults", str(path), command=SCRIPT, timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"bizmsg: --faults {path}: ") and says in line, line


@pytest.mark.parametrize("args, says", [
    (["--seed-data", "{bad}"], "--seed-data {bad}: invalid seed_data: tenants.a[0]: "
                               "bizAccountId is missing"),
    (["--seed-data", "{missing}"], "--seed-data {missing}: cannot read it: No such file"),
    (["--seed-data", "{bad}", "--tenant", "x"], "--seed-data and --tenant cannot be used "
                                                "together"),
    (["--seed-data", "{bad}", "--accounts", "2"], "--seed-data and --accounts cannot"),
])
def test_standalone_sandbox_refuses_bad_seed_data_in_one_line(
    tmp_path: Path, args: list[str], says: str
) -> None:
    paths = {"bad": tmp_path / "bad.json", "missing": tmp_path / "missing.json"}
    paths["bad"].write_text('{"tenants": {"a": [{"name": "x"}]}}')
    done = run("sandbox", "--port", "0", *(arg.format(**paths) for arg in args),
               command=SCRIPT, timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: ") and says.format(**paths) in line, line


# --- what every command shares ----------------------------------------------------------------


def test_help_documents_the_exit_statuses_and_the_configuration() -> None:
    done = run("--help")
    assert done.returncode == 0
    for status, meaning in [("0", "success"), ("1", "API or transport error"),
                            ("2", "usage or configuration error"), ("3", "send rejected"),
                            ("4", "send outcome unknown"), ("130", "interrupted")]:
        assert any(line.split()[:1] == [status] and meaning in line
                   for line in done.stdout.splitlines()), (status, done.stdout)
    for name in ("BIZMSG_TOKEN", "BIZMSG_BASE_URL", "--token", "--base-url"):
        assert name in done.stdout


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[Any, dict[str, Any]]]:
    """``(action, {name: parser})`` of each set of subcommands ``parser`` has."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            typed = cast("argparse._SubParsersAction[argparse.ArgumentParser]", action)
            yield typed, dict(typed.choices)


def all_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for _, choices in subcommands(parser):
        for choice in choices.values():
            yield from all_parsers(choice)


def test_every_command_and_option_has_a_help_text() -> None:
    from bizmsg.cli.program import _parser

    parsers = list(all_parsers(_parser()))
    assert {p.prog for p in parsers} >= {"bizmsg send", "bizmsg accounts list",
                                         "bizmsg numbers list", "bizmsg demo", "bizmsg sandbox"}
    for parser in parsers:
        for action, choices in subcommands(parser):
            assert {a.dest for a in action._choices_actions if a.help} == set(choices)
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help and action.help != argparse.SUPPRESS, (parser.prog, action.dest)


@pytest.mark.parametrize("variables, missing", [
    ({}, ["a token (--token or $BIZMSG_TOKEN)", "a base URL (--base-url or $BIZMSG_BASE_URL)"]),
    ({"BIZMSG_TOKEN": "t"}, ["a base URL"]),
    ({"BIZMSG_BASE_URL": "http://127.0.0.1:9"}, ["a token"]),
])
@pytest.mark.parametrize("args", [("numbers", "list"), ("accounts", "list"),
                                  ("send", "--to", "8613800138000", "--from", "8613900000000",
                                   "--template", "t", "--language", "en")])
def test_missing_configuration_is_one_line_naming_what_is_missing(
    variables: dict[str, str], missing: list[str], args: tuple[str, ...]
) -> None:
    done = run(*args, env=environment(**variables))
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: missing ")
    for what in missing:
        assert what in line
    if len(missing) == 1:
        assert ("token" in line) != ("base URL" in line)


def test_options_are_taken_from_the_environment_too(sandbox: Sandbox) -> None:
    env = environment(BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token)
    done = run("accounts", "list", "--output", "json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 3
    # An option wins over its variable.
    done = run("accounts", "list", "--token", "sandbox-token-globex", "--output", "json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"][0]["name"] == "Globex Support"


def test_a_configuration_the_client_refuses_is_a_configuration_error() -> None:
    done = run("numbers", "list", "--base-url", "http://example.com", "--token", "t")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: ConfigurationError: ") and "http://" in line


@pytest.mark.parametrize("args", [
    ("numbers", "list", "--page", "0"),
    ("numbers", "list", "--page-size", "1001"),
    ("numbers", "list", "--page", "2", "--all"),
    ("accounts", "list", "--output", "xml"),
    ("accounts", "list", "--columns", "name,nope"),
    ("accounts",),
    ("send", "--param", "a", "--parameters", "b"),
])
def test_bad_usage_exits_2_before_any_request(sandbox: Sandbox, args: tuple[str, ...]) -> None:
    done = on(sandbox, *args)
    assert done.returncode == 2, done.stderr
    assert "usage: bizmsg" in done.stderr and "Traceback" not in done.stderr
    assert sandbox.requests() == []


def test_columns_with_a_json_output_is_a_usage_error(sandbox: Sandbox) -> None:
    done = on(sandbox, "numbers", "list", "--columns", "status", "--output", "jsonl")
    assert done.returncode == 2
    assert done.stderr == "bizmsg: --columns applies to --output table and csv; " \
                          "jsonl prints the objects as received\n"
    assert sandbox.requests() == []


#: Each way a command ends: its exit status and how its stderr starts ("" for nothing at all).
EXIT_STATUSES = {
    "ok": (0, ""),
    "api error": (1, "bizmsg: ServerError: "),
    "transport error": (1, "bizmsg: ConnectError: "),
    "usage": (2, "usage: bizmsg numbers list"),
    "configuration": (2, "bizmsg: missing a token"),
    "refused token": (2, "bizmsg: AuthenticationError: "),
    "validation": (2, "bizmsg: ValidationError: invalid to"),
    "rejected": (3, 'bizmsg: SendRejectedError: code 1002: from "14155550100" is not a '
                    "business phone number of this account\n"),
    "unknown": (4, "bizmsg: SendOutcomeUnknownError: "),
}


def prepare(case: str, sandbox: Sandbox, sender: Number) -> tuple[list[str], dict[str, str]]:
    """The arguments and environment of a command that ends as ``case`` says."""
    def send(from_: str = sender.display, to: str = "+86 138 0013 8000") -> list[str]:
        return ["send", "--to", to, "--from", from_, "--template", "t", "--language", "en"]

    args = ["numbers", "list"]
    env = {"BIZMSG_BASE_URL": sandbox.base_url, "BIZMSG_TOKEN": sandbox.token}
    if case == "api error":
        sandbox.inject("business_phone_numbers", status=500, times=5)
    elif case == "transport error":
        env["BIZMSG_BASE_URL"] = f"http://127.0.0.1:{free_port()}"
    elif case == "usage":
        args += ["--page", "x"]
    elif case == "configuration":
        del env["BIZMSG_TOKEN"]
    elif case == "refused token":
        env["BIZMSG_TOKEN"] = "not-a-token-of-the-sandbox"
    elif case == "validation":
        args = send(to="12345")
    elif case == "rejected":
        args = send(from_="+1 415 555 0100")  # not a number of this tenant
    elif case == "unknown":
        sandbox.inject("send", cut_connection=True)  # processed, then the connection is cut
        args = send()
    return args, env


@pytest.mark.parametrize("case", EXIT_STATUSES)
def test_exit_statuses(case: str, sandbox: Sandbox, sender: Number,
                       entry_point: Sequence[str]) -> None:
    args, env = prepare(case, sandbox, sender)
    done = run(*args, env=environment(**env), command=entry_point)
    status, stderr = EXIT_STATUSES[case]
    assert done.returncode == status, done.stderr
    assert done.stderr.startswith(stderr) and (stderr or done.stderr == "")
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    if case == "ok":
        assert "PHONE_NUMBER_ID" in done.stdout
    elif case == "unknown":
        key = sandbox.sent_messages()[-1]["headers"]["idempotency-key"]
        assert len(lines) == 2 and f"--idempotency-key {key} " in lines[1]
    elif case != "usage":
        assert len(lines) == 1, lines
    assert (done.stdout == "") == (case != "ok")


@pytest.mark.parametrize("args", [("numbers", "list"), ("accounts", "list", "--all"),
                                  ("send", "--to", "8613800138000", "--template", "t",
                                   "--language", "en")])
def test_a_token_the_service_refuses_is_a_configuration_error(
    sandbox: Sandbox, sender: Number, args: tuple[str, ...]
) -> None:
    """Regression: a wrong token exited 1 ("API error") here, and 3 with --file;
    the documented status of a configuration error is 2, and every command agrees."""
    if args[0] == "send":
        args = (*args, "--from", sender.display)
    done = run(*args, env=environment(BIZMSG_BASE_URL=sandbox.base_url,
                                      BIZMSG_TOKEN="not-a-token-of-the-sandbox"))
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: AuthenticationError: "), line
    assert "returned 401" in line and "check --token or $BIZMSG_TOKEN" in line
    assert done.stdout == ""


def test_an_error_body_of_many_lines_is_still_one_line(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", status=404, body="<html>\n<h1>Not\nFound</h1>\n</html>",
                   headers={"Content-Type": "text/html"})
    done = on(sandbox, "accounts", "list")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("bizmsg: NotFoundError: ")
    assert "<html> <h1>Not Found</h1> </html>" in line


@pytest.mark.parametrize("where", ["before the command", "after it"])
def test_debug_logs_the_requests_and_shows_the_traceback(sandbox: Sandbox, where: str) -> None:
    sandbox.inject("business_phone_numbers", status=500, times=5)
    args = ["numbers", "list", "--base-url", sandbox.base_url, "--token", sandbox.token]
    args = ["--debug", *args] if where == "before the command" else [*args, "--debug"]
    done = run(*args)
    assert done.returncode == 1
    assert "bizmsg DEBUG GET /v1/chat/businessPhoneNumber -> 500" in done.stderr
    assert "bizmsg WARNING GET /v1/chat/businessPhoneNumber failed" in done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("bizmsg: ServerError: ")
    assert sandbox.token not in done.stderr


def test_debug_adds_no_second_handler_to_bizmsg_log(sandbox: Sandbox) -> None:
    done = run("--debug", "accounts", "list", "--page-size", "1", env=environment(
        BIZMSG_LOG="debug", BIZMSG_BASE_URL=sandbox.base_url, BIZMSG_TOKEN=sandbox.token))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("GET /v1/chat/businessAccounts -> 200") == 1


@pytest.fixture
def secret_sandbox() -> Iterator[Sandbox]:
    """A sandbox whose token cannot appear in any output by chance."""
    with Sandbox(tenants=["zq7-secret-tenant"]) as sandbox:
        yield sandbox


def test_the_token_is_never_printed(secret_sandbox: Sandbox) -> None:
    sandbox, token = secret_sandbox, secret_sandbox.token
    sender = json.loads(on(sandbox, "numbers", "list", "-o", "jsonl").stdout.splitlines()[0])
    send = ("send", "--to", "8613800138000", "--template", "t", "--language", "en")
    runs = [
        on(sandbox, "--debug", "numbers", "list", "--all", "-o", "csv"),
        on(sandbox, "--debug", "accounts", "list", "-o", "json"),
        on(sandbox, "--debug", *send, "--from", sender["displayPhoneNumber"]),
        on(sandbox, "--debug", *send, "--from", "+1 415 555 0100"),
        run("--debug", "numbers", "list", env=environment(BIZMSG_TOKEN=token)),
        run("--debug", "numbers", "list", "--base-url", "http://example.com", "--token", token),
        run("--debug", "numbers", "list", "--base-url", sandbox.base_url, "--token", token + "x"),
        # Misplaced, so that argparse quotes it in its usage errors:
        run("--token", token, "numbers", "list"),
        run("numbers", "--tok", token, "list"),
        run("demo", f"--token={token}"),
    ]
    sandbox.inject("send", cut_connection=True)
    runs.append(on(sandbox, "--debug", *send, "--from", sender["displayPhoneNumber"]))
    sandbox.inject("business_phone_numbers", status=500, times=5)
    runs.append(on(sandbox, "--debug", "numbers", "list"))
    assert [done.returncode for done in runs] == [0, 0, 0, 3, 2, 2, 2, 2, 2, 2, 4, 1]
    for done in runs:
        assert token not in done.stdout + done.stderr, done.args
    assert "invalid choice: '<token>'" in runs[7].stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("listing", ["numbers", "accounts"])
def test_ctrl_c_during_a_listing_exits_130_with_one_line(
    sandbox: Sandbox, listing: str, sigint_handler: None
) -> None:
    sandbox.delay = 5
    process = start(sandbox, listing, "list", "--all")
    try:
        wait_for_a_request(sandbox)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 130
    assert stderr == "bizmsg: interrupted\n"
    assert stdout == ""  # the table's header waits for the first page


def wait_for_a_request(sandbox: Sandbox, timeout: float = 30) -> dict[str, Any]:
    """The first request that reached ``sandbox`` (waited for)."""
    deadline = time.monotonic() + timeout
    while not sandbox.requests():
        assert time.monotonic() < deadline, "no request arrived"
        time.sleep(0.02)
    return sandbox.requests()[0]
