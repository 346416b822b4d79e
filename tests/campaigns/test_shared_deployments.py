"""What real deployments put between bizmsg and its shared state: a
connection pooler in front of the PostgreSQL journal, a Redis that evicts keys or loses them,
a host whose clock is off. Each against the real server (PgBouncer, Redis), judged by what the
sandbox received and what the store holds.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from services.pgbouncer_server import PgBouncerServer
from services.postgres_server import PostgresServer
from services.redis_server import RedisServer
from shared_support import SENDERS, rows, seed_data


def test_a_journal_behind_pgbouncer_in_transaction_mode_is_refused_before_anything_is_sent(
        postgres_server: PostgresServer,
        start_pgbouncer: Callable[..., PgBouncerServer]) -> None:
    """A run is one PostgreSQL session: its lock is its liveness. Through a pool in transaction
    mode a dead run would look alive and its session settings would leak to the pool's other
    clients, so the journal refuses it, naming the pooler, and nothing is sent."""
    bouncer = start_pgbouncer(postgres_server, pool_mode="transaction")
    with Sandbox(seed_data=seed_data()) as sandbox, sandbox.client() as client:
        with pytest.raises(bizmsg.SharedStateError) as caught:
            client.messages.send_many(rows(SENDERS[0], 10), journal=bouncer.url,
                                      campaign_id="pooled")
        assert "pooler in transaction or statement mode" in str(caught.value)
        assert "session mode" in str(caught.value)
        assert sandbox.stats()["sends"] == 0


def test_a_journal_behind_pgbouncer_in_session_mode_works(
        postgres_server: PostgresServer,
        start_pgbouncer: Callable[..., PgBouncerServer]) -> None:
    """The control: the same pool in session mode gives a run one session for its life."""
    bouncer = start_pgbouncer(postgres_server, pool_mode="session")
    with Sandbox(seed_data=seed_data()) as sandbox, sandbox.client() as client:
        result = client.messages.send_many(rows(SENDERS[0], 10), journal=bouncer.url,
                                           campaign_id="pooled")
        assert result.counts["sent"] == 10
        again = client.messages.send_many(rows(SENDERS[0], 10), journal=bouncer.url,
                                          campaign_id="pooled")
        assert again.counts["skipped"] == 10
        assert sandbox.stats()["accepted"] == 10


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl"])
def test_a_redis_that_evicts_keys_is_refused_where_the_tier_is_enforced_and_warned_of_elsewhere(
        start_redis: Callable[..., RedisServer], bizmsg_logs: pytest.LogCaptureFixture,
        policy: str) -> None:
    """A shared cache's Redis drops the limits' keys under memory pressure (under allkeys-lru
    an idle tier count went, and an account reached 1,100 of its 1,000). Where the tier is
    enforced the campaign refuses the store before anything is sent; elsewhere it warns, and
    runs."""
    redis = start_redis(maxmemory_policy=policy)
    with Sandbox(seed_data=seed_data()) as sandbox, \
            sandbox.client(shared_limits=redis.url) as client:
        with pytest.raises(bizmsg.SharedStateError) as caught:
            client.messages.send_many(rows(SENDERS[0], 5), pace="auto")
        assert f"maxmemory-policy {policy}" in str(caught.value)
        assert "noeviction" in str(caught.value)
        assert redis.password is None or redis.password not in str(caught.value)
        assert sandbox.stats()["sends"] == 0
        result = client.messages.send_many(rows(SENDERS[0], 5), pace="auto", enforce_tier=False)
        assert result.counts["sent"] == 5
        warnings = [r.getMessage() for r in bizmsg_logs.records if r.levelname == "WARNING"]
        assert any(f"maxmemory-policy {policy}" in message for message in warnings), warnings


def test_a_redis_that_keeps_its_keys_is_used_without_a_warning(
        redis_server: RedisServer, bizmsg_logs: pytest.LogCaptureFixture) -> None:
    """The control: the default policy (noeviction) is neither refused nor warned of."""
    with Sandbox(seed_data=seed_data()) as sandbox, \
            sandbox.client(shared_limits=redis_server.url) as client:
        result = client.messages.send_many(rows(SENDERS[0], 5), pace="auto")
        assert result.counts["sent"] == 5
    assert not [r for r in bizmsg_logs.records if "maxmemory" in r.getMessage()]


def test_single_sends_count_against_the_tier_a_campaign_then_keeps(
        redis_server: RedisServer) -> None:
    """A web worker's single sends and a campaign share an account's messaging tier: 30 single
    sends to new recipients on a TIER_50 account, then a ``pace="auto"`` campaign to 40 others.
    The campaign knows the 30 (counted in the shared store as they were sent), so the 20 past
    the tier fail up front, and the platform refuses none (before: 20 refused with code 1007,
    0 failed up front)."""
    template = bizmsg.Template(name="promo", parameters=["x"], language="en")
    with Sandbox(seed_data=seed_data(tier="TIER_50"), enforce_limits=True) as sandbox, \
            sandbox.client(shared_limits=redis_server.url) as client:
        for i in range(30):
            client.messages.send(to=f"8613900{i:06d}", from_=SENDERS[0], template=template)
        result = client.messages.send_many(rows(SENDERS[0], 40, group=7), pace="auto")
        refused = [o for o in result.outcomes
                   if o.result is not None and str(o.result.code) == "1007"]
        assert refused == []
        assert result.counts["sent"] == 20
        assert result.counts["failed"] == 20
        assert all("messaging tier" in str(o.error) for o in result.outcomes
                   if o.status == "failed")
        assert sandbox.stats()["accepted"] == 50


def test_a_journal_that_cannot_be_reached_says_why() -> None:
    """A PostgreSQL that refuses the connection is named with why (the error
    said only "error connecting to server")."""
    with Sandbox(seed_data=seed_data()) as sandbox, sandbox.client() as client:
        with pytest.raises(bizmsg.SharedStateError) as caught:
            client.messages.send_many(rows(SENDERS[0], 3),
                                      journal="postgresql://bizmsg:secret@127.0.0.1:1/bizmsg",
                                      campaign_id="nowhere")
    text = str(caught.value)
    assert "refused" in text.lower(), text
    assert "secret" not in text
