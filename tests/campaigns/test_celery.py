"""Sharded campaigns on Celery (``bizmsg.celery``): a real ``redis-server`` as broker, result
backend and shared limits (three databases of one server), PostgreSQL as the shared journal, a
real worker (``celery worker --pool=prefork --concurrency=4``, ``celery_campaign_app.py``) and
the standalone sandbox with ``--enforce-limits``.

Judged by the sandbox's counts (messages per recipient, throughput refusals, the busiest second
per number) and the shards' summaries; nothing here measures a duration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bizmsg
import bizmsg.celery
from bizmsg.celery import shards
from services.availability import require_module
from services.celery_worker import CeleryWorker
from services.postgres_server import PostgresServer
from services.redis_server import RedisServer
from services.reports import write_report
from services.sandbox_server import SandboxProcess
from shared_support import (
    ROOT,
    SENDERS,
    STANDARD_CEILING,
    block_starting,
    child_env,
    of_sender,
    rows,
    traffic,
    wait_for,
    write_seed_data,
)

#: This file's folder, where the worker's app (``celery_campaign_app.py``) is.
HERE = Path(__file__).resolve().parent

#: Messages of the Celery campaign: 600 from each of four STANDARD numbers.
PER_SENDER = 600
SHARDS = 8


def campaign_rows() -> list[dict[str, Any]]:
    return [row for i, sender in enumerate(SENDERS) for row in rows(sender, PER_SENDER, group=i)]


# -- shards() alone ----------------------------------------------------------------------------


def test_shards_place_a_message_by_its_identity_however_it_is_written() -> None:
    """The same message written three ways (a ``Message``, a flat dict, a dict with a template
    mapping and other spellings of the numbers and language) lands in one shard; the cut is
    the same on every call (a stable hash, not Python's ``hash``); every row is a plain dict."""
    template = bizmsg.Template(name="promo", parameters=["a"], language="en-us")
    same = [
        bizmsg.Message(to="+86 138 0013 8000", from_="8613900000000", template=template),
        {"to": "8613800138000", "from": "8613900000000", "name": "promo", "parameters": ["a"],
         "language": "en_US"},
        {"to": "0086 138-0013-8000", "from_": "+86 139 0000 0000",
         "template": {"name": "promo", "parameters": ("a",), "language": "EN_us"}},
    ]
    others = campaign_rows()[:500]
    for count in (1, 3, 8):
        cut = shards([*same, *others], count)
        assert sum(len(s) for s in cut) == 503 and cut == shards([*same, *others], count)
        holding = [n for n, s in enumerate(cut) for row in s if row["name"] == "promo"
                   and "a" in row["parameters"]]
        assert len(set(holding)) == 1 and len(holding) == 3, (count, holding)
    cut = shards(others, 8)
    assert all(len(s) > 20 for s in cut), [len(s) for s in cut]  # spread, roughly evenly
    first = shards(same, 1)[0][0]
    assert first == {"to": "+86 138 0013 8000", "from": "8613900000000", "name": "promo",
                     "parameters": ["a"], "language": "en-us"}
    with pytest.raises(bizmsg.ValidationError, match="shards"):
        shards(others, 0)


def test_send_campaign_refuses_what_a_shard_cannot_take() -> None:
    """Options that are not the shards' (the journal and the client are the worker's
    settings: passwords are not put in broker messages), a campaign without an id: refused in
    the caller, before anything is queued."""
    require_module("celery", pip="celery[redis]")
    with pytest.raises(bizmsg.ValidationError, match="journal") as caught:
        bizmsg.celery.send_campaign(object(), [], campaign_id="c",
                                    journal="postgresql://u:pw@h/db")
    assert caught.value.field == "journal" and "pw" not in str(caught.value)
    with pytest.raises(bizmsg.ValidationError, match="campaign_id"):
        bizmsg.celery.send_campaign(object(), [], campaign_id=" ")


def test_importing_bizmsg_does_not_import_the_celery_helper() -> None:
    import subprocess

    code = ("import sys, bizmsg; assert 'bizmsg.celery' not in sys.modules; "
            "import bizmsg.celery; assert 'celery' not in sys.modules, 'celery imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_shard_task_run_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """The task ``register`` makes, run here (``task.apply``, Celery's eager call): one client
    per process, made on the first shard; the summary of each shard; a second run of the
    campaign skips everything; the app's safe settings; a worker without a journal refuses
    with a ``ConfigurationError``; pacing without shared limits is warned about."""
    celery = require_module("celery", pip="celery[redis]")
    from bizmsg.testing import Sandbox
    from shared_support import seed_data

    monkeypatch.delenv("BIZMSG_SHARED_LIMITS", raising=False)
    monkeypatch.delenv("BIZMSG_JOURNAL", raising=False)
    app = celery.Celery("bizmsg_local", broker="memory://", backend="cache+memory://")
    app.conf.broker_transport_options = {"visibility_timeout": 60, "priority_steps": [0, 5]}
    with Sandbox(seed_data=seed_data()) as sandbox:
        made: list[int] = []

        def client() -> bizmsg.Client:
            made.append(os.getpid())
            return sandbox.client()

        task = bizmsg.celery.register(app, journal=str(tmp_path / "j.db"), client=client,
                                      visibility_timeout=7200)
        cut = shards(rows(SENDERS[0], 100), 2)

        def run(name_task: Any, n: int, **options: Any) -> Any:
            return name_task.apply(kwargs={"rows": cut[n], "campaign_id": "local", "shard": n,
                                           "shards": 2, "options": options}).get()

        first = [run(task, n, concurrency=8) for n in range(2)]
        again = [run(task, n) for n in range(2)]
        assert made == [os.getpid()]
        assert [s["shard"] for s in first] == [0, 1]
        assert sum(s["counts"]["sent"] for s in first) == 100
        assert all(s["unknown"] == [] and s["redelivered"] is False and s["stop_reason"] is None
                   and s["campaign_id"] == "local" and s["shards"] == 2 for s in first)
        assert sum(s["counts"]["skipped"] for s in again) == 100
        # What an earlier run settled is counted as such: each copy accounts for its shard.
        assert [s["settled_before"] for s in first] == [{"sent": 0, "rejected": 0}] * 2
        assert sum(s["settled_before"]["sent"] for s in again) == 100
        assert all(s["settled_before"]["rejected"] == 0 for s in again)
        assert len(sandbox.sent_messages()) == 100

        orphan = bizmsg.celery.register(app, name="bizmsg.orphan", client=client)
        with pytest.raises(bizmsg.ConfigurationError, match="BIZMSG_JOURNAL"):
            run(orphan, 0)
        monkeypatch.setenv("BIZMSG_TOKEN", sandbox.token)
        monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
        alone = bizmsg.celery.register(app, name="bizmsg.alone", journal=str(tmp_path / "k.db"))
        with caplog.at_level("WARNING", logger="bizmsg"):
            assert run(alone, 0, pace="auto")["counts"]["sent"] == len(cut[0])
        assert "without shared limits" in caplog.text
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is True
    assert app.conf.broker_transport_options == {"visibility_timeout": 7200.0,
                                                 "priority_steps": [0, 5]}
    assert task.acks_late is True and task.reject_on_worker_lost is True


# -- a campaign on a real worker, one of its pool processes killed -------------------------------


def test_a_sharded_campaign_survives_a_killed_pool_process(
        redis_server: RedisServer, postgres_server: PostgresServer,
        start_sandbox_process: Callable[..., SandboxProcess],
        start_celery_worker: Callable[..., CeleryWorker], tmp_path: Path) -> None:
    """2,400 messages from four STANDARD numbers, cut into 8 shard tasks, on one worker with
    a prefork pool of 4, every shard pacing through one Redis and claiming through one
    PostgreSQL journal. Once 400 messages went out, the pool process running a shard is
    killed with SIGKILL. Celery puts the shard back on the queue (``reject_on_worker_lost``)
    and runs it again in another pool process, which skips what the journal knows as sent and
    re-sends the killed run's claims in doubt with their keys (``resend_unknown=True``; the
    sandbox honours keys, answering those that had gone out with their first result). At the
    end: every recipient has exactly one message, no number was refused for throughput or went
    over 80 in a second, and every shard reports done."""
    celery = require_module("celery", pip="celery[redis]")
    sandbox = start_sandbox_process(["--enforce-limits", "--seed-data",
                                     str(write_seed_data(tmp_path)),
                                     "--max-logged-requests", "0"])
    running = tmp_path / "running"
    running.mkdir()
    base = redis_server.url[:-2]
    worker = start_celery_worker("celery_campaign_app", pythonpath=[str(HERE)], env={
        "BIZMSG_TOKEN": sandbox.token, "BIZMSG_BASE_URL": sandbox.base_url,
        "BIZMSG_SHARED_LIMITS": f"{base}/2", "BIZMSG_JOURNAL": postgres_server.url,
        "BIZMSG_TEST_RUNNING": str(running)})
    pool = set(worker.pool_pids())
    assert len(pool) == 4
    producer = celery.Celery("bizmsg_campaign_producer", broker=worker.broker_url,
                             backend=worker.result_backend)
    total = PER_SENDER * len(SENDERS)
    try:
        result = bizmsg.celery.send_campaign(
            producer, campaign_rows(), campaign_id="celery-kill", shards=SHARDS, pace="auto",
            resend_unknown=True, concurrency=16)

        wait_for(lambda: traffic(sandbox.base_url)["accepted"] >= 400, "400 messages sent")
        marks = sorted(running.iterdir())
        assert marks, "no shard marked as running"
        shard, pid = (int(part) for part in marks[0].name.split("."))
        assert pid in pool
        os.kill(pid, signal.SIGKILL)
        summaries: list[bizmsg.celery.ShardSummary] = result.get(timeout=100)
    finally:
        producer.close()

    report = traffic(sandbox.base_url)
    lines = [of_sender(report, sender) for sender in SENDERS]
    counts = {k: sum(s["counts"][k] for s in summaries) for k in summaries[0]["counts"]}
    log = worker.log.read_text(errors="replace")
    # The journal: every message sent; those the killed run had claimed without a result were
    # taken over by the redelivered shard (inherited_doubt) and sent again with their keys.
    states = dict(line.split("|") for line in postgres_server.psql(
        "SELECT m.state, count(*) FROM bizmsg.messages m JOIN bizmsg.campaigns c "
        "ON c.id = m.campaign WHERE c.name = 'celery-kill' GROUP BY m.state").splitlines())
    taken_over = int(postgres_server.psql(
        "SELECT count(*) FROM bizmsg.messages m JOIN bizmsg.campaigns c ON c.id = m.campaign "
        "WHERE c.name = 'celery-kill' AND m.inherited_doubt"))
    figures = {
        "killed_shard": shard, "killed_pid": pid, "accepted": report["accepted"],
        "replayed": report["replayed"], "sends": report["sends"],
        "repeated_recipients": report["repeated_recipients"],
        "most_to_one_recipient": report["most_to_one_recipient"],
        "throttled": sum(line["throttled"] for line in lines),
        "busiest_second": max(line["busiest_second"] for line in lines),
        "counts": counts, "redelivered": [s["shard"] for s in summaries if s["redelivered"]],
        "killed_shard_counts": summaries[shard]["counts"], "journal": states,
        "in_doubt_taken_over": taken_over,
    }
    write_report("celery_killed_pool_process", figures,
                 summary=(f"Celery, {total} messages in {SHARDS} shards, pool process of shard "
                          f"{shard} SIGKILLed: {report['accepted']} delivered, "
                          f"{report['repeated_recipients']} recipients twice, "
                          f"{taken_over} in doubt re-sent with their keys ({report['replayed']} of "
                          f"which had gone out: answered with their first result), "
                          f"{figures['throttled']} throughput refusals, busiest second "
                          f"{figures['busiest_second']}; shard {shard} again: "
                          f"{summaries[shard]['counts']}"),
                 fallback_dir=tmp_path)

    assert "WorkerLostError" in log or "exited prematurely" in log, log[-3000:]
    assert [s["shard"] for s in summaries] == list(range(SHARDS))
    assert summaries[shard]["redelivered"], figures
    assert counts["unknown"] == counts["failed"] == counts["rejected"] == 0, figures
    assert counts["sent"] + counts["skipped"] == total, figures
    assert report["accepted"] == total and report["repeated_recipients"] == 0, figures
    assert report["most_to_one_recipient"] == 1, figures
    assert figures["throttled"] == 0 and figures["busiest_second"] <= STANDARD_CEILING, figures
    assert all(line["accepted"] == PER_SENDER for line in lines), lines
    assert states == {"sent": str(total)}, figures


# -- the recipe of the docs, as written ------------------------------------------------------------


def test_the_celery_recipe_of_the_docs_runs_as_written(
        redis_server: RedisServer, postgres_server: PostgresServer,
        start_sandbox_process: Callable[..., SandboxProcess],
        start_celery_worker: Callable[..., CeleryWorker], tmp_path: Path) -> None:
    """``tasks.py`` and ``send_campaign.py`` exactly as docs/campaigns.md shows them: a worker
    started with ``celery -A tasks`` in their folder, the environment the page exports (``BIZMSG_TOKEN``,
    ``BIZMSG_BASE_URL``, ``BIZMSG_SHARED_LIMITS``, ``BIZMSG_JOURNAL``), and Celery's own
    ``CELERY_BROKER_URL`` / ``CELERY_RESULT_BACKEND``, which take precedence over the URLs
    written in ``tasks.py``, pointing at this test's Redis. The campaign's 300 messages are
    delivered once each, under the number's ceiling, and the script prints 8 summaries."""
    require_module("celery", pip="celery[redis]")
    docs = ROOT / "docs" / "campaigns.md"
    tasks = block_starting(docs, "# tasks.py")
    producer = block_starting(docs, "# send_campaign.py")
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "tasks.py").write_text(tasks)
    (app_dir / "send_campaign.py").write_text(producer)
    sandbox = start_sandbox_process(["--enforce-limits", "--max-logged-requests", "0",
                                     "--seed-data",
                                     str(write_seed_data(tmp_path, ["8613900000000"]))])
    worker = start_celery_worker("tasks", cwd=app_dir, pythonpath=[str(app_dir)], env={
        "BIZMSG_TOKEN": sandbox.token, "BIZMSG_BASE_URL": sandbox.base_url,
        "BIZMSG_SHARED_LIMITS": redis_server.url[:-2] + "/2",
        "BIZMSG_JOURNAL": postgres_server.url})
    env = {**child_env(), **worker.app_env()}
    done = subprocess.run([sys.executable, "send_campaign.py"], cwd=app_dir, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [int(line.split()[0]) for line in lines] == list(range(8)), done.stdout
    report = traffic(sandbox.base_url)
    line = of_sender(report, "8613900000000")
    assert line["accepted"] == report["sends"] == 300 and report["repeated_recipients"] == 0
    assert line["throttled"] == 0 and line["busiest_second"] <= STANDARD_CEILING, line
