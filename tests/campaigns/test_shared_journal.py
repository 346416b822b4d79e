"""The shared journal (``journal="postgresql://..."`` with ``campaign_id=``) and the SQLite
journal shared by processes of one host, across real processes: a real PostgreSQL 15, a sandbox
in this process that the children reach over HTTP (its request log tells which message went
out with which key), and each run in an OS process of its own (``shared_child.py``).

What is judged: requests and commits per recipient in the sandbox's log, and the journal's rows
(read with psql); never a duration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bizmsg
from bizmsg.celery import shards
from bizmsg.testing import Sandbox
from campaign_support import settle
from conftest import committed
from services.hosts import Host, Hosts
from services.postgres_server import PostgresServer
from services.redis_server import RedisServer
from services.reports import write_report
from services.sandbox_server import SandboxProcess
from shared_support import (
    ROOT,
    SENDERS,
    STANDARD_CEILING,
    Children,
    block_starting,
    child_env,
    of_sender,
    outcomes_by_status,
    rows,
    seed_data,
    traffic,
    wait_for,
    write_seed_data,
)

TOKEN = "sandbox-token-acme"


def spec(sandbox: Sandbox, *, client: str = "sync", barrier: bool = False,
         **options: Any) -> dict[str, Any]:
    return {"client": client, "base_url": sandbox.base_url, "token": TOKEN, "barrier": barrier,
            "options": {"concurrency": 16, **options}}


def journal_rows(server: PostgresServer, campaign: str) -> dict[str, str]:
    """The journal's messages of ``campaign``: idempotency key -> state."""
    out = server.psql(
        "SELECT m.idempotency_key, m.state FROM bizmsg.messages m JOIN bizmsg.campaigns c "
        f"ON c.id = m.campaign WHERE c.name = '{campaign}'")
    return dict(line.split("|") for line in out.splitlines() if line)


def requests_since(sandbox: Sandbox, start: int) -> list[dict[str, Any]]:
    return sandbox.sent_messages()[start:]


def key_of(request: dict[str, Any]) -> str:
    return str(request["headers"]["idempotency-key"])


# -- a worker killed, resumed by another host --------------------------------------------------


def test_a_killed_worker_is_resumed_by_another_process_from_the_postgres_journal(
        postgres_server: PostgresServer, children: Children, tmp_path: Path) -> None:
    """A campaign of 1,800 messages cut into three shards, each run by a worker process on
    the PostgreSQL journal. One worker is killed with SIGKILL mid-shard; the two others finish.
    A process in another working directory (as another host would be) runs the whole campaign
    again: nothing the journal knows as sent is requested again; the dead worker's claims
    without a result are listed ``unknown`` at once (its session, and so its run, died with
    it: no lease to wait out) with the keys it used; the rest of its shard is sent. A third
    run with ``resend_unknown=True`` re-sends exactly those, with their keys, and every
    recipient ends with exactly one message."""
    campaign = "kill-9"
    every = rows(SENDERS[0], 1800)
    cut = shards(every, 3)
    journal = postgres_server.url
    with Sandbox(seed_data=seed_data(), delay=0.005) as sandbox:
        # The victim is held to 150 messages a second so that the kill lands mid-shard
        # however fast the machine is (unpaced, a shard can finish before the poll sees it).
        workers = [children.start(f"worker{n}", spec(sandbox, journal=journal,
                                                      campaign_id=campaign,
                                                      **({"rate_limit": 150} if n == 0 else {})),
                                  shard, cwd=tmp_path / f"host-a-{n}")
                   for n, shard in enumerate(cut)]
        victim_recipients = {row["to"] for row in cut[0]}
        wait_for(lambda: sum(1 for r in committed(sandbox)
                             if r["body"]["to"] in victim_recipients) >= 150,
                 "the first worker's 150th message")
        workers[0].kill()
        finished = [w.result() for w in workers[1:]]
        settle(sandbox)
        before = sandbox.sent_messages()
        went_out = {r["body"]["to"]: key_of(r) for r in committed(sandbox)}
        journaled = journal_rows(postgres_server, campaign)

        resumed = children.start("resumer", spec(sandbox, journal=journal, campaign_id=campaign),
                                 every, cwd=tmp_path / "host-b").result()
        during_resume = requests_since(sandbox, len(before))
        resent = children.start("resender", spec(sandbox, journal=journal, campaign_id=campaign,
                                                 resend_unknown=True),
                                every, cwd=tmp_path / "host-b").result()
        after = requests_since(sandbox, len(before) + len(during_resume))
        commits = Counter(r["body"]["to"] for r in committed(sandbox))

    sent_keys = {k for k, state in journaled.items() if state == "sent"}
    in_doubt = {k for k, state in journaled.items() if state in ("dispatched", "unknown")}
    by_status = outcomes_by_status(resumed)
    unknown = {o[2]: o for o in by_status.get("unknown", [])}
    figures = {"killed_worker_committed": sum(1 for to in went_out if to in victim_recipients),
               "journal_before_resume": dict(Counter(journaled.values())),
               "resume": resumed["counts"], "resend_unknown": resent["counts"],
               "replayed_on_resend": sum(1 for r in after if r["idempotent_replay"])}
    write_report("shared_journal_kill_9", figures,
                 summary=(f"PostgreSQL journal, worker killed: journal before resume "
                          f"{figures['journal_before_resume']}; resume from another directory "
                          f"{resumed['counts']}; resend_unknown {resent['counts']}"),
                 fallback_dir=tmp_path)

    assert all(r["counts"]["sent"] == len(cut[n + 1]) for n, r in enumerate(finished)), finished
    # Nothing the journal knew as sent was requested again, by either later run.
    assert not {key_of(r) for r in during_resume + after} & sent_keys, figures
    # Every message that went out is journaled sent or in doubt; every sent row went out.
    assert set(went_out.values()) <= sent_keys | in_doubt and sent_keys <= set(went_out.values())
    # The dead worker's claims are in doubt at once, listed with the keys it claimed them with.
    assert in_doubt and set(unknown) == in_doubt, figures
    assert all("in doubt since an earlier run" in (o[3] or "") for o in unknown.values())
    assert {o[0] for o in unknown.values()} <= victim_recipients
    for to, key in went_out.items():
        if key in unknown:
            assert unknown[key][0] == to
    # The resume sent what never left (the rest of the dead worker's shard), each once.
    assert {key_of(r) for r in during_resume} == {o[2] for o in by_status["sent"]}
    assert {o[0] for o in by_status["sent"]} <= victim_recipients - set(went_out)
    assert resumed["counts"]["sent"] + len(unknown) + resumed["counts"]["skipped"] == len(every)
    # resend_unknown: exactly the ones in doubt, with their keys; then one message each.
    assert {key_of(r) for r in after} == in_doubt, figures
    assert resent["counts"]["sent"] == len(in_doubt) and resent["counts"]["unknown"] == 0
    assert commits == Counter({row["to"]: 1 for row in every}), figures


# -- two runs of one campaign at once, a service that does not deduplicate -----------------------


@pytest.mark.parametrize("journal", ["postgresql", "sqlite", "none"])
def test_two_runs_of_one_campaign_at_once_request_each_message_once(
        journal: str, request: pytest.FixtureRequest, children: Children,
        tmp_path: Path) -> None:
    """The same campaign (1,000 messages, one run reading them in reverse) started in two
    processes at the same moment, as a job queue's redelivery while the first worker is alive,
    against a sandbox that does **not** honour ``Idempotency-Key`` (a repeated key is a new
    message). With the shared journal, or one SQLite file on one host: each message is
    requested exactly once; the run that lost a message's claim waits for the run that holds
    it and reports it ``skipped`` with that run's result ("already sent"), never as a message
    nobody accounts for. With no journal (the proof that the test can fail): sent twice."""
    every = rows(SENDERS[0], 1000)
    options: dict[str, Any] = {"campaign_id": "twice"}
    if journal == "postgresql":
        options["journal"] = request.getfixturevalue("postgres_server").url
    elif journal == "sqlite":
        options["journal"] = str(tmp_path / "shared.db")
    with Sandbox(seed_data=seed_data(), delay=0.02, honour_idempotency_keys=False) as sandbox:
        runs = [children.start("forward", spec(sandbox, barrier=True, **options), every),
                children.start("backward", spec(sandbox, client="async", barrier=True,
                                                **options), every[::-1])]
        children.start_together(runs)
        records = [run.result() for run in runs]
        requested = Counter(r["body"]["to"] for r in sandbox.sent_messages())

    sent = [r["counts"]["sent"] for r in records]
    reasons = Counter((o[3] or "").split(" (")[0] for r in records
                      for o in outcomes_by_status(r).get("skipped", []))
    print(json.dumps({"journal": journal, "sent": sent, "skipped_because": reasons,
                      "errors": [r.get("error") for r in records]}))
    if journal == "none":
        assert requested == Counter({row["to"]: 2 for row in every})
        return
    assert requested == Counter({row["to"]: 1 for row in every}), sent
    # Both runs finish: contention on the journal is the journal's to absorb.
    assert [r.get("error") for r in records] == [None, None], [r.get("error") for r in records]
    assert sum(sent) == len(every) and all(n > 0 for n in sent), sent
    assert sum(r["counts"]["skipped"] for r in records) == len(every)
    assert all(r["counts"]["unknown"] == r["counts"]["failed"] == 0 for r in records)
    # A message the other run held is waited for: its outcome is that run's result.
    assert set(reasons) == {"already sent by an earlier run"}, reasons


@pytest.mark.parametrize("journal", ["postgresql", "sqlite"])
def test_four_runs_of_one_campaign_at_once_each_finish_and_request_each_message_once(
        journal: str, request: pytest.FixtureRequest, children: Children,
        tmp_path: Path) -> None:
    """Four processes run the same campaign of 1,000 messages at once, each reading them in
    another order (forward, backward, two shuffles), 64 requests in flight each, on a journal
    none of them has opened before, against a sandbox that does not honour keys. Every message
    is requested exactly once, and every run finishes: contention on the journal (claims
    racing for the same rows, four processes creating one file) is the journal's to absorb,
    never a reason for a run to stop with the campaign half sent."""
    import random

    every = rows(SENDERS[0], 1000)
    where = (request.getfixturevalue("postgres_server").url if journal == "postgresql"
             else str(tmp_path / "shared.db"))
    orders = [every, every[::-1], random.Random(1).sample(every, len(every)),
              random.Random(2).sample(every, len(every))]
    with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
        runs = [children.start(f"run{n}", {**spec(sandbox, client="async" if n % 2 else "sync",
                                                  barrier=True),
                                           "options": {"concurrency": 64, "journal": where,
                                                       "campaign_id": "four"}}, order)
                for n, order in enumerate(orders)]
        children.start_together(runs)
        records = [run.result() for run in runs]
        requested = Counter(r["body"]["to"] for r in sandbox.sent_messages())

    errors = [r["error"] for r in records if "error" in r]
    sent = [r["counts"]["sent"] for r in records]
    assert requested == Counter({row["to"]: 1 for row in every}), sent
    assert sum(sent) == len(every), sent
    assert errors == [], errors


# -- a campaign cut one way, then another ------------------------------------------------------


@pytest.mark.parametrize("journal", ["postgresql", "sqlite"])
def test_a_campaign_cut_into_shards_then_recut_sends_nothing_twice(
        journal: str, request: pytest.FixtureRequest, children: Children,
        tmp_path: Path) -> None:
    """960 messages (30 of them twice, sent twice with ``dedupe=False``) cut by
    ``bizmsg.celery.shards`` into 3 shards run by 3 processes at once, one of them stopping
    half-way; then the whole campaign cut into 5 shards run by 5 processes at once, on the same
    journal (PostgreSQL, or one SQLite file). Against a sandbox that does not honour keys,
    every message is requested exactly as often as it is in the input: the second cut sends
    only what the first left, the copies of one message included."""
    where = (request.getfixturevalue("postgres_server").url if journal == "postgresql"
             else str(tmp_path / "shared.db"))
    every = rows(SENDERS[0], 900)
    every += [dict(row) for row in every[:30]]
    options: dict[str, Any] = {"journal": where, "campaign_id": "recut", "dedupe": False}
    with Sandbox(seed_data=seed_data(), honour_idempotency_keys=False) as sandbox:
        first_cut = shards(every, 3)
        first_cut[2] = first_cut[2][:len(first_cut[2]) // 2]
        first = [children.start(f"first{n}", spec(sandbox, barrier=True, **options), shard)
                 for n, shard in enumerate(first_cut)]
        children.start_together(first)
        first_records = [run.result() for run in first]
        after_first = len(sandbox.sent_messages())
        second = [children.start(f"second{n}", spec(sandbox, client="async" if n % 2 else "sync",
                                                    barrier=True, **options), shard)
                  for n, shard in enumerate(shards(every, 5))]
        children.start_together(second)
        second_records = [run.result() for run in second]
        requested = Counter(r["body"]["to"] for r in sandbox.sent_messages())
        second_requests = len(sandbox.sent_messages()) - after_first

    expected = Counter(row["to"] for row in every)
    assert requested == expected
    assert max(expected.values()) == 2
    assert sum(r["counts"]["sent"] for r in first_records) == after_first
    assert sum(r["counts"]["sent"] for r in second_records) == second_requests
    assert second_requests == len(every) - after_first > 0
    assert sum(r["counts"]["skipped"] for r in second_records) == after_first


# -- PostgreSQL killed mid-campaign ----------------------------------------------------------------


def test_postgres_killed_mid_campaign_stops_it_gracefully_and_the_journal_stays_consistent(
        postgres_server: PostgresServer, children: Children, tmp_path: Path) -> None:
    """The journal's server is killed (SIGKILL) while a campaign of 1,500 runs in a child.
    The campaign stops gracefully: its error (``CampaignError`` or ``SharedStateError``)
    carries the partial result with every message's outcome, and names the journal without
    its password. PostgreSQL restarted, the journal is consistent with what the sandbox
    received: every message journaled sent went out, every message that went out is journaled
    sent or in doubt. A re-run sends only messages that never left; a run with
    ``resend_unknown=True`` then finishes the campaign with one message per recipient."""
    campaign = "pg-killed"
    every = rows(SENDERS[0], 1500)
    journal = postgres_server.url
    with Sandbox(seed_data=seed_data(), delay=0.005) as sandbox:
        # Paced so that PostgreSQL dies mid-campaign however fast the machine is.
        run = children.start("run", spec(sandbox, journal=journal, campaign_id=campaign,
                                         rate_limit=300), every)
        wait_for(lambda: len(committed(sandbox)) >= 200, "200 messages sent")
        postgres_server.kill()
        record = run.result()
        settle(sandbox)
        postgres_server.start()
        first = sandbox.sent_messages()
        went_out = {r["body"]["to"]: key_of(r) for r in committed(sandbox)}
        journaled = journal_rows(postgres_server, campaign)
        rerun = children.start("rerun", spec(sandbox, journal=journal, campaign_id=campaign),
                               every).result()
        second = requests_since(sandbox, len(first))
        finish = children.start("finish", spec(sandbox, journal=journal, campaign_id=campaign,
                                                resend_unknown=True), every).result()
        commits = Counter(r["body"]["to"] for r in committed(sandbox))

    error = record["error"]
    counts = record["counts"]
    figures = {"error": error["type"], "message": error["message"], "counts": counts,
               "went_out": len(went_out), "journal": dict(Counter(journaled.values())),
               "rerun": rerun["counts"], "finish": finish["counts"]}
    write_report("shared_journal_postgres_killed", figures,
                 summary=(f"PostgreSQL killed mid-campaign: {error['type']}, outcomes {counts}, "
                          f"{len(went_out)} had gone out, journal {figures['journal']}; "
                          f"re-run {rerun['counts']}; resend_unknown {finish['counts']}"),
                 fallback_dir=tmp_path)
    assert error["type"] in ("CampaignError", "SharedStateError"), record
    assert postgres_server.password not in json.dumps(record)
    assert f"127.0.0.1:{postgres_server.port}" in error["message"]
    # Regression: a PostgreSQL failure (a SharedStateError too) was taken for the shared
    # limits' and the journal kept.
    assert record["stop_reason"] and "the journal failed" in record["stop_reason"], record
    # Every message it had taken from the input has its outcome (those it never read are not
    # in the result, and were never requested).
    reported = {o[0] for o in record["outcomes"]}
    assert sum(counts.values()) == len(record["outcomes"]) == len(reported) <= len(every)
    assert {r["body"]["to"] for r in first} <= reported, figures
    sent_by_run = {o[0] for o in outcomes_by_status(record).get("sent", [])}
    assert sent_by_run <= set(went_out), figures
    sent_keys = {k for k, state in journaled.items() if state == "sent"}
    in_doubt = {k for k, state in journaled.items() if state in ("dispatched", "unknown")}
    assert sent_keys <= set(went_out.values()) <= sent_keys | in_doubt, figures
    # The re-run sends only what never left: no recipient the first run reached.
    assert not {r["body"]["to"] for r in second} & {r["body"]["to"] for r in first}, figures
    assert rerun["counts"]["unknown"] == len(in_doubt), figures
    assert commits == Counter({row["to"]: 1 for row in every}), figures
    assert finish["counts"]["unknown"] == 0


# -- bad journal URLs, and passwords -----------------------------------------------------------------


@pytest.mark.parametrize("options, field, says", [
    ({"journal": "mysql://u:s3cret@127.0.0.1/db", "campaign_id": "c"}, "journal", "scheme"),
    ({"journal": "redis://:s3cret@127.0.0.1:6379/0", "campaign_id": "c"}, "journal", "scheme"),
    ({"journal": "postgresql://u:s3cret@127.0.0.1:5432/db"}, "campaign_id", "campaign_id"),
    ({"journal": "postgres://u:s3cret@127.0.0.1:5432/db"}, "campaign_id", "campaign_id"),
    ({"journal": "postgresql://u:s3cret@127.0.0.1:5432/db", "campaign_id": "c", "lease": 5},
     "lease", "deadline"),
    ({"journal": "postgresql://u:s3cret@127.0.0.1:5432/db?sslmode=maybe", "campaign_id": "c"},
     "journal", "sslmode"),
    ({"journal": "postgresql://u:s3cret@127.0.0.1:notaport/db", "campaign_id": "c"}, "journal",
     "port"),
    ({"journal": "postgresql://u:s3cret@127.0.0.1:5432/db?bogus=1", "campaign_id": "c"},
     "journal", "unknown option `bogus`"),
])
def test_a_bad_journal_is_a_validation_error_naming_the_field_without_the_password(
        options: dict[str, Any], field: str, says: str, sandbox: Sandbox,
        client: bizmsg.Client) -> None:
    with pytest.raises(bizmsg.ValidationError, match=says) as caught:
        client.messages.send_many(rows(SENDERS[0], 3), **options)
    assert caught.value.field == field
    partial = getattr(caught.value, "bulk_result", None)
    assert "s3cret" not in f"{caught.value} {caught.value!r} {caught.value.args} {partial!r}"
    assert sandbox.sent_messages() == []


def test_the_postgres_password_is_never_shown(
        bizmsg_logs: pytest.LogCaptureFixture, postgres_server: PostgresServer) -> None:
    """With every log level on: a campaign on the journal that works, one with a wrong
    password, one whose server is not there. The password (and the wrong one) is in no error,
    repr, result, outcome or log line; the errors name the journal."""
    password = postgres_server.password
    wrong = "wr0ng:p@ss"
    wrong_url = postgres_server.url.replace(password, "wr0ng%3Ap%40ss")
    nowhere = f"postgresql://bizmsg:{password}@127.0.0.1:1/bizmsg"
    seen: list[object] = []
    with Sandbox(seed_data=seed_data()) as sandbox, sandbox.client() as client:
        result = client.messages.send_many(rows(SENDERS[0], 20), journal=postgres_server.url,
                                           campaign_id="secret")
        assert result.counts["sent"] == 20
        seen += [result, *result.outcomes, *result.to_records()]
        for url in (wrong_url, nowhere):
            with pytest.raises(bizmsg.BizmsgError) as caught:
                client.messages.send_many(rows(SENDERS[0], 5), journal=url, campaign_id="secret")
            assert isinstance(caught.value, (bizmsg.SharedStateError, bizmsg.CampaignError))
            assert "127.0.0.1:" in str(caught.value)
            partial = getattr(caught.value, "bulk_result", None)
            seen += [caught.value, *caught.value.args, partial]
        assert len(sandbox.sent_messages()) == 20
    text = "\n".join(f"{thing}\n{thing!r}" for thing in seen)
    text += "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in bizmsg_logs.records)
    assert len(bizmsg_logs.records) > 0
    for secret in (password, wrong, "p%40ss"):
        assert secret not in text


# -- the README's example, as written, in several processes -----------------------------------------


def test_the_readme_example_of_the_two_urls_runs_in_several_processes_at_once(
        redis_server: RedisServer, postgres_server: PostgresServer,
        start_sandbox_process: Callable[..., SandboxProcess], tmp_path: Path) -> None:
    """The README's example of shared state (the same as docs/campaigns.md's first example of
    "Across processes and machines"), as written but for its two URLs, which point at this test's Redis and
    PostgreSQL, started in three processes at once against the standalone sandbox with
    ``--enforce-limits``: 300 messages, each delivered once, none refused for throughput, as
    the README says."""
    readme, docs = ROOT / "README.md", ROOT / "docs" / "campaigns.md"
    example = block_starting(readme, "import bizmsg", containing="shared_limits=")
    assert example == block_starting(docs, "import bizmsg", containing="shared_limits=")
    for written in ("redis://localhost:6379/0", "postgresql://bizmsg:secret@localhost:5432/bizmsg"):
        assert example.count(written) == 1
    script = tmp_path / "campaign.py"
    script.write_text(example.replace("redis://localhost:6379/0", redis_server.url)
                      .replace("postgresql://bizmsg:secret@localhost:5432/bizmsg",
                               postgres_server.url))
    sandbox = start_sandbox_process(["--enforce-limits", "--max-logged-requests", "0",
                                     "--seed-data",
                                     str(write_seed_data(tmp_path, ["8613900000000"]))])
    env = {**child_env(), "BIZMSG_TOKEN": sandbox.token, "BIZMSG_BASE_URL": sandbox.base_url}
    runs = [subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    outputs = [run.communicate(timeout=90) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err[-2000:] for _, err in outputs]
    assert all(out.startswith("BulkResult(300 messages") for out, _ in outputs), outputs
    report = traffic(sandbox.base_url)
    line = of_sender(report, "8613900000000")
    assert line["accepted"] == report["sends"] == 300 and report["repeated_recipients"] == 0
    assert line["throttled"] == 0 and line["busiest_second"] <= STANDARD_CEILING, line


# -- two hosts -------------------------------------------------------------------------------------


def test_workers_on_two_hosts_share_one_redis_and_one_postgres(
        hosts: Hosts, redis_server: RedisServer, postgres_server: PostgresServer,
        start_sandbox_process: Callable[..., SandboxProcess], children: Children,
        tmp_path: Path) -> None:
    """Two hosts (network namespaces of their own, each reaching the servers over its own
    network stack and link, not this machine's loopback), a worker on each running one shard of
    a campaign of 600 messages from one STANDARD number, through one Redis and one PostgreSQL.
    The worker on the first host is killed (SIGKILL) mid-shard; the second finishes its shard,
    then resumes the whole campaign with ``resend_unknown=True``. Every recipient gets exactly
    one message, no number is refused for throughput or goes over 80 in a second."""
    sandbox = start_sandbox_process(["--enforce-limits", "--max-logged-requests", "0",
                                     "--seed-data", str(write_seed_data(tmp_path))])
    for port in (redis_server.port, postgres_server.port, sandbox.port):
        hosts.expose(port)
    first, second = hosts.hosts
    # Another host: this machine's loopback is not its own.
    probe = ("import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', %d), 2)\n"
             "except OSError:\n    sys.exit(0)\nsys.exit(1)" % sandbox.port)
    assert subprocess.run([*first.prefix(), sys.executable, "-c", probe], timeout=30).returncode == 0

    def on(host: Host, **options: Any) -> dict[str, Any]:
        # The same URLs on both hosts (one name, resolved by each to its own route).
        return {"client": "sync", "base_url": host.url(sandbox.base_url), "token": TOKEN,
                "shared_limits": host.url(redis_server.url), "allow_insecure_http": True,
                "options": {"pace": "auto", "concurrency": 16, "campaign_id": "two-hosts",
                            "journal": host.url(postgres_server.url), **options}}

    every = rows(SENDERS[0], 600)
    cut = shards(every, 2)
    workers = [children.start(f"worker-on-{host.name}", {**on(host), "barrier": True}, shard,
                              prefix=host.prefix(), cwd=tmp_path / host.name)
               for host, shard in zip((first, second), cut)]
    children.start_together(workers)
    wait_for(lambda: traffic(sandbox.base_url)["accepted"] >= 150, "150 messages sent")
    workers[0].kill()
    finished = workers[1].result()
    resumed = children.start(f"resume-on-{second.name}", on(second, resend_unknown=True), every,
                             prefix=second.prefix(), cwd=tmp_path / second.name).result()
    report = traffic(sandbox.base_url)
    line = of_sender(report, SENDERS[0])
    runs = postgres_server.psql("SELECT count(*) FROM bizmsg.runs r JOIN bizmsg.campaigns c "
                                "ON c.id = r.campaign WHERE c.name = 'two-hosts'")
    figures = {"second_host_shard": finished["counts"], "resumed": resumed["counts"], **line,
               "replayed": report["replayed"], "repeated_recipients": report["repeated_recipients"]}
    write_report("two_hosts", figures,
                 summary=(f"Two hosts (network namespaces), one killed mid-shard: "
                          f"{line['accepted']} delivered, {report['repeated_recipients']} twice, "
                          f"{line['throttled']} refusals, busiest second {line['busiest_second']}; "
                          f"resume {resumed['counts']}"),
                 fallback_dir=tmp_path)
    assert finished["counts"]["sent"] == len(cut[1]), figures
    assert resumed["counts"]["unknown"] == resumed["counts"]["failed"] == 0, figures
    assert resumed["counts"]["sent"] + resumed["counts"]["skipped"] == len(every), figures
    assert line["accepted"] == len(every) and report["repeated_recipients"] == 0, figures
    assert line["throttled"] == 0 and line["busiest_second"] <= STANDARD_CEILING, figures
    assert runs == "3"
