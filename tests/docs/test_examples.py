"""Every script in examples/ runs to completion against the embedded sandbox, and the job-queue
worker (examples/worker.py) never sends a retried job twice.

The FastAPI example is tested through its app in tests/observability/test_fastapi_example.py,
the notebook in tests/notebooks/test_notebook.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox

EXAMPLES_DIR = Path(__file__).parents[2] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))

#: Modules a script needs beyond bizmsg; the script is skipped when one is missing.
NEEDS = {"fastapi_app.py": ("fastapi", "httpx")}


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 5
    assert (EXAMPLES_DIR / "quickstart.ipynb").exists()


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(script: Path) -> None:
    missing = [m for m in NEEDS.get(script.name, ()) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{script.name} needs {', '.join(missing)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "Traceback" not in done.stderr


# --- examples/worker.py ----------------------------------------------------------------------


def load_example(path: Path) -> ModuleType:
    name = f"bizmsg_example_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def worker() -> ModuleType:
    return load_example(EXAMPLES_DIR / "worker.py")


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def messaging(sandbox: Sandbox) -> Iterator[bizmsg.Client]:
    with sandbox.client() as client:
        yield client


@pytest.fixture
def sender(sandbox: Sandbox, messaging: bizmsg.Client) -> str:
    number = next(n for n in messaging.business_phone_numbers.iter() if n.status == "CONNECTED")
    assert number.display_phone_number is not None
    return number.display_phone_number


def accepted(sandbox: Sandbox) -> list[dict[str, Any]]:
    """Send requests that made a message go out (accepted, not an idempotent replay)."""
    return [m for m in sandbox.sent_messages() if not m["idempotent_replay"]
            and (m["response_body"] or {}).get("status") == "ACCEPTED"]


def test_a_jobs_key_is_stable_and_its_own(worker: ModuleType) -> None:
    assert worker.idempotency_key("42") == worker.idempotency_key("42")
    assert worker.idempotency_key("42") != worker.idempotency_key("43")


def test_a_job_retried_after_an_unknown_outcome_sends_once(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client, sender: str,
) -> None:
    job = ("42", "8613800138000", sender, "otp", ["482913"], "en")
    sandbox.inject("send", cut_connection=True)  # processed, then the connection drops
    with pytest.raises(bizmsg.SendOutcomeUnknownError) as raised:
        worker.send_notification(*job, messaging=messaging)
    assert isinstance(raised.value, worker.RETRYABLE)  # the queue retries it
    assert raised.value.idempotency_key == worker.idempotency_key("42")

    result = worker.send_notification(*job, messaging=messaging)  # the queue's retry

    first, retry = sandbox.sent_messages()
    assert first["headers"]["idempotency-key"] == retry["headers"]["idempotency-key"] \
        == worker.idempotency_key("42")
    assert (first["idempotent_replay"], retry["idempotent_replay"]) == (False, True)
    assert result.sms_id == first["response_body"]["smsId"]
    assert len(accepted(sandbox)) == 1
    assert sandbox.stats()["accepted"] == 1 and sandbox.stats()["replayed"] == 1


def test_a_job_run_twice_sends_once_and_two_jobs_twice(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client, sender: str,
) -> None:
    job = ("8613800138000", sender, "otp", ["482913"], "en")
    first = worker.send_notification("7", *job, messaging=messaging)
    again = worker.send_notification("7", *job, messaging=messaging)  # e.g. a lost ack
    other = worker.send_notification("8", *job, messaging=messaging)
    assert first.sms_id == again.sms_id != other.sms_id
    assert len(accepted(sandbox)) == 2


def test_a_rejected_job_is_not_for_retrying(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client,
) -> None:
    with pytest.raises(bizmsg.SendRejectedError) as raised:
        worker.send_notification("9", "8613800138000", "15550000000", "otp", ["1"], "en",
                                 messaging=messaging)
    assert not isinstance(raised.value, worker.RETRYABLE)
    with pytest.raises(bizmsg.ValidationError) as invalid:
        worker.send_notification("10", "12", "15550000000", "otp", ["1"], "en",
                                 messaging=messaging)
    assert not isinstance(invalid.value, worker.RETRYABLE)
    assert accepted(sandbox) == []


def test_the_worker_makes_its_client_from_the_environment(
    worker: ModuleType, sandbox: Sandbox, sender: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BIZMSG_TOKEN", sandbox.token)
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    monkeypatch.setattr(worker, "_client", None)
    try:
        worker.send_notification("11", "8613800138000", sender, "otp", ["1"], "en")
        assert worker.client() is worker.client()
    finally:
        worker.client().close()
    assert len(accepted(sandbox)) == 1


def shard(sender: str, count: int = 40) -> list[dict[str, Any]]:
    return [{"to": f"86137{i:08d}", "from": sender, "name": "promo",
             "parameters": {"code": "SPRING"}, "language": "en"} for i in range(count)]


def test_a_rerun_shard_resends_with_the_same_keys(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client, sender: str,
) -> None:
    rows = shard(sender)
    sandbox.inject("send", cut_connection=True)
    with pytest.raises(worker.ShardIncomplete) as raised:
        worker.send_campaign_shard("spring-sale", rows, messaging=messaging)
    first_run = raised.value.result
    assert first_run.counts["unknown"] == 1 and first_run.counts["sent"] == len(rows) - 1
    first_keys = [o.idempotency_key for o in first_run]
    first_requests = len(sandbox.sent_messages())

    result = worker.send_campaign_shard("spring-sale", rows, messaging=messaging)  # the retry

    assert result.counts["sent"] == len(rows) and result.ok
    assert [o.idempotency_key for o in result] == first_keys
    rerun = sandbox.sent_messages()[first_requests:]
    assert len(rerun) == len(rows) and all(m["idempotent_replay"] for m in rerun)
    # Every message went out exactly once, the one in doubt included.
    assert len(accepted(sandbox)) == len(rows)
    assert len({m["body"]["to"] for m in accepted(sandbox)}) == len(rows)


def test_a_shard_of_another_campaign_gets_other_keys(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client, sender: str,
) -> None:
    rows = shard(sender, 5)
    spring = worker.send_campaign_shard("spring-sale", rows, messaging=messaging)
    summer = worker.send_campaign_shard("summer-sale", rows, messaging=messaging)
    assert not {o.idempotency_key for o in spring} & {o.idempotency_key for o in summer}
    assert len(accepted(sandbox)) == 10


def test_rejected_and_invalid_rows_do_not_hold_the_shard(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client, sender: str,
) -> None:
    rows = shard(sender, 5)
    rows[1] = {**rows[1], "from": "15550000000"}  # not our number: rejected by the service
    rows[3] = {**rows[3], "to": "12"}  # refused before sending
    result = worker.send_campaign_shard("spring-sale", rows, messaging=messaging)
    assert result.counts == {"sent": 3, "rejected": 1, "unknown": 0, "failed": 1, "skipped": 0}
    assert len(accepted(sandbox)) == 3


def test_a_shard_the_service_cannot_take_is_retried(
    worker: ModuleType, sandbox: Sandbox, messaging: bizmsg.Client, sender: str,
) -> None:
    rows = shard(sender, 3)
    sandbox.inject("send", status=503, headers={"Retry-After": "0"}, times=None)
    with pytest.raises(worker.ShardIncomplete) as raised:
        worker.send_campaign_shard("spring-sale", rows, messaging=messaging.with_options(
            max_retries=0))
    assert raised.value.result.counts["sent"] == 0
    sandbox.clear_faults()
    assert worker.send_campaign_shard("spring-sale", rows, messaging=messaging).ok
    assert len(accepted(sandbox)) == 3
