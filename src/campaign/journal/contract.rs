//! The journal contract, one test each, run against SQLite and PostgreSQL alike: what claims and
//! writes do to the messages' records, and what a take-over may and may not do to a run, whatever
//! store holds the journal. A frozen run is stood for by its heartbeat aged in the store itself
//! (what a SIGSTOP does to it); the real processes and signals are in
//! `tests/campaigns/test_journal_takeover.py`. What only one store does (SQLite's formats and its
//! WAL, PostgreSQL's plans, sessions and row locks) is tested in that store's `tests.rs`.
//!
//! This file also holds the helpers every journal test uses, the stores' own tests too: the
//! lease, a fresh folder, a client of the test's own on the server, a message's identity, claims,
//! results.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Claim, Claimed, Identity, JournalStore, PostgresJournal, Row, SqliteJournal, State};
use crate::campaign::message::Fingerprint;
use crate::test_servers::PostgresServer;

/// A run's lease in the tests: long enough that only a heartbeat the test ages makes a run
/// look dead (its own beats come every half second: `fence::heartbeat_every`).
pub(super) const LEASE: Duration = Duration::from_secs(60);

/// A new, empty folder for one test's journal.
pub(super) fn fresh_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bizmsg-journal-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A client of the test's own on the server, its connection driven in the background.
pub(super) async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = url
        .parse::<tokio_postgres::Config>()
        .unwrap()
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Message `n` (its first occurrence).
pub(super) fn identity(n: u128) -> Identity {
    Identity {
        fingerprint: Fingerprint(n),
        occurrence: 0,
    }
}

/// Claims of the messages of `range`, message `n` with the key `{prefix}{n}`.
pub(super) fn claims(range: std::ops::Range<u128>, prefix: &str, take_over: bool) -> Vec<Claim> {
    range
        .map(|n| Claim {
            identity: identity(n),
            key: format!("{prefix}{n}"),
            take_over,
        })
        .collect()
}

/// Claims messages `range` (message `n` with the key `{prefix}{n}`) and asserts this run won
/// every one.
pub(super) async fn claim_all(
    journal: &dyn JournalStore,
    range: std::ops::Range<u128>,
    prefix: &str,
) {
    let answers = journal.claim(claims(range, prefix, false)).await.unwrap();
    assert!(answers.iter().all(Claimed::is_won), "{answers:?}");
}

/// A claim won with `key`, its row `claimed` (to be dispatched before it is sent).
pub(super) fn won_with(key: &str) -> Claimed {
    Claimed::Won {
        key: key.to_owned(),
        dispatch: true,
    }
}

/// A claim taken over in doubt with `key`, its row `dispatched` (it may have left).
pub(super) fn won_in_doubt(key: &str) -> Claimed {
    Claimed::Won {
        key: key.to_owned(),
        dispatch: false,
    }
}

/// Records messages of `range` dispatched, as a run does before their requests are written;
/// every one must be made.
pub(super) async fn dispatch_all(journal: &dyn JournalStore, range: std::ops::Range<u128>) {
    for n in range {
        assert!(journal.dispatch(identity(n)).await.unwrap(), "{n}");
    }
}

/// The record of message `n` (key `k{n}`) in `state`, written by the run that claimed it and
/// knows whether it left (it clears a doubt).
pub(super) fn result(n: u128, state: State) -> Row {
    let mut row = Row::new(identity(n), state, Some(format!("k{n}")));
    row.clears_doubt = true;
    row
}

/// A store to run the contract on: an SQLite file in a folder of its own, or a PostgreSQL server
/// of the test's own.
enum Store {
    Sqlite(PathBuf),
    Postgres(PostgresServer),
}

impl Store {
    /// Both stores, PostgreSQL when a server can be started here (required under
    /// `BIZMSG_REQUIRE_SERVICES=1`, as every real-server test).
    fn all() -> Vec<Store> {
        let mut stores = vec![Store::Sqlite(fresh_dir().join("journal.db"))];
        stores.extend(PostgresServer::start().map(Store::Postgres));
        stores
    }

    fn name(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgresql",
        }
    }

    async fn open(&self, campaign: &str, lease: Duration) -> Arc<dyn JournalStore> {
        match self {
            Store::Sqlite(path) => {
                let path = path.clone();
                let campaign = campaign.to_owned();
                let journal = tokio::task::spawn_blocking(move || {
                    SqliteJournal::open(&path, Some(&campaign), lease)
                })
                .await
                .unwrap()
                .unwrap();
                Arc::new(journal)
            }
            Store::Postgres(server) => Arc::new(
                PostgresJournal::open(&server.url, campaign, lease)
                    .await
                    .unwrap(),
            ),
        }
    }

    /// Makes every run recorded running look silent for `seconds`, as a frozen process is.
    /// The run's writer is not really frozen: it beats every half second
    /// (`fence::heartbeat_every`), and a beat landing between the aging and the test's next
    /// step made it alive again (4 runs in 14, then once in CI with the trigger made after the
    /// aging). So a trigger made first keeps every later beat from moving the heartbeat
    /// forward, and the aging, which moves it back, goes through.
    async fn age_heartbeats(&self, seconds: f64) {
        match self {
            Store::Sqlite(path) => {
                let connection = rusqlite::Connection::open(path).unwrap();
                let ids: Vec<String> = connection
                    .prepare("SELECT id FROM bizmsg_runs WHERE state = 'running'")
                    .unwrap()
                    .query_map([], |row| row.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
                let listed = ids
                    .iter()
                    .map(|id| format!("'{id}'"))
                    .collect::<Vec<_>>()
                    .join(", ");
                connection
                    .execute_batch(&format!(
                        "CREATE TRIGGER IF NOT EXISTS frozen_{n} AFTER UPDATE OF heartbeat_at \
                         ON bizmsg_runs WHEN NEW.id IN ({listed}) \
                         AND NEW.heartbeat_at > OLD.heartbeat_at BEGIN \
                         UPDATE bizmsg_runs SET heartbeat_at = OLD.heartbeat_at \
                         WHERE id = NEW.id; END;",
                        n = ids.len(),
                    ))
                    .unwrap();
                connection
                    .execute(
                        "UPDATE bizmsg_runs SET heartbeat_at = heartbeat_at - ?1 \
                         WHERE state = 'running'",
                        [seconds],
                    )
                    .unwrap();
            }
            Store::Postgres(server) => {
                let client = connect(&server.url).await;
                let ids: Vec<uuid::Uuid> = client
                    .query("SELECT id FROM bizmsg.runs WHERE state = 'running'", &[])
                    .await
                    .unwrap()
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                let listed = ids
                    .iter()
                    .map(|id| format!("'{id}'::uuid"))
                    .collect::<Vec<_>>()
                    .join(", ");
                client
                    .batch_execute(&format!(
                        "CREATE OR REPLACE FUNCTION bizmsg.test_frozen() RETURNS trigger \
                         LANGUAGE plpgsql AS $$ BEGIN \
                         NEW.heartbeat_at := OLD.heartbeat_at; RETURN NEW; END $$; \
                         DROP TRIGGER IF EXISTS frozen ON bizmsg.runs; \
                         CREATE TRIGGER frozen BEFORE UPDATE OF heartbeat_at ON bizmsg.runs \
                         FOR EACH ROW WHEN (OLD.id IN ({listed}) \
                         AND NEW.heartbeat_at > OLD.heartbeat_at) \
                         EXECUTE FUNCTION bizmsg.test_frozen();"
                    ))
                    .await
                    .unwrap();
                client
                    .execute(
                        "UPDATE bizmsg.runs SET heartbeat_at = heartbeat_at \
                         - make_interval(secs => $1) WHERE state = 'running'",
                        &[&seconds],
                    )
                    .await
                    .unwrap();
            }
        }
    }

    /// The states of the runs recorded, sorted.
    async fn run_states(&self) -> Vec<String> {
        let mut states: Vec<String> = match self {
            Store::Sqlite(path) => {
                let connection = rusqlite::Connection::open(path).unwrap();
                let mut statement = connection.prepare("SELECT state FROM bizmsg_runs").unwrap();
                let states = statement
                    .query_map([], |row| row.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
                states
            }
            Store::Postgres(server) => connect(&server.url)
                .await
                .query("SELECT state FROM bizmsg.runs", &[])
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect(),
        };
        states.sort();
        states
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Store::Sqlite(path) = self {
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_never_loses_a_result_or_a_doubt_to_an_outcome_of_not_sending() {
    for store in Store::all() {
        let name = store.name();
        let journal = store.open("c", LEASE).await;
        let won = journal.claim(claims(0..8, "k", false)).await.unwrap();
        assert!(won.iter().all(Claimed::is_won), "{name}");
        // Messages 6 and 7 stay `claimed` (never dispatched): never sent.
        dispatch_all(&*journal, 0..6).await;
        journal
            .write_durably(vec![
                result(0, State::Sent),
                result(1, State::Rejected),
                result(2, State::Unknown),
                result(5, State::Failed),
            ])
            .await
            .unwrap();
        let mut later = vec![
            result(0, State::Skipped),
            result(1, State::Failed),
            result(2, State::Skipped),
            result(3, State::Failed),
            result(4, State::Skipped),
            result(5, State::Skipped),
            result(6, State::Failed),
            result(7, State::Skipped),
        ];
        for row in &mut later {
            // Rows 2, 3, 6 and 7 as a write that does not know the message never left: a
            // `claimed` row was never written, whatever the write knows.
            row.clears_doubt = !matches!(row.identity.fingerprint.0, 2 | 3 | 6 | 7);
        }
        journal.write_durably(later).await.unwrap();
        let mut rows = journal
            .lookup((0..9).map(identity).collect())
            .await
            .unwrap();
        rows.sort_by_key(|row| row.identity.fingerprint.0);
        let states: Vec<State> = rows.into_iter().map(|row| row.state).collect();
        assert_eq!(
            states,
            [
                State::Sent,
                State::Rejected,
                State::Unknown,
                State::Dispatched,
                State::Skipped,
                State::Skipped,
                State::Failed,
                State::Skipped
            ],
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_never_both_win_a_message_and_a_gone_run_leaves_its_claims_in_doubt_at_once() {
    for store in Store::all() {
        let name = store.name();
        let first = store.open("spring", LEASE).await;
        let second = store.open("spring", LEASE).await;
        let won = first.claim(claims(0..4, "k", false)).await.unwrap();
        assert!(won.iter().all(Claimed::is_won), "{name}");
        let contested = second.claim(claims(2..6, "k", false)).await.unwrap();
        assert!(
            matches!(&contested[0], Claimed::Lost(row) if row.held_elsewhere),
            "{name}"
        );
        assert!(
            matches!(&contested[1], Claimed::Lost(row) if row.held_elsewhere),
            "{name}"
        );
        assert_eq!(contested[2..], [won_with("k4"), won_with("k5")], "{name}");
        // Message 1's request is being written as the run dies; message 2 was only claimed.
        dispatch_all(&*first, 1..2).await;
        first
            .write_durably(vec![result(0, State::Sent), result(3, State::Skipped)])
            .await
            .unwrap();
        // A write of a message another run holds changes nothing.
        second
            .write_durably(vec![result(1, State::Sent)])
            .await
            .unwrap();
        drop(first);
        // Its connection closes with it: its lock goes, its claims are taken at once (what it
        // finished is done, what it dispatched is in doubt, what it only claimed is free).
        let deadline = Instant::now() + Duration::from_secs(10);
        let rows = loop {
            let rows = second
                .lookup(vec![identity(0), identity(1), identity(2), identity(3)])
                .await
                .unwrap();
            if rows.iter().all(|row| !row.held_elsewhere) {
                break rows;
            }
            assert!(Instant::now() < deadline, "{name}: {rows:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let states: HashMap<u128, State> = rows
            .iter()
            .map(|row| (row.identity.fingerprint.0, row.state))
            .collect();
        assert_eq!(states[&0], State::Sent, "{name}");
        assert_eq!(states[&1], State::Dispatched, "{name}");
        assert_eq!(states[&2], State::Claimed, "{name}");
        assert_eq!(states[&3], State::Skipped, "{name}");
        // Taken over in doubt: keeps its key; a message never sent is claimed anew, one only
        // claimed by the gone run too (without `take_over`), keeping its recorded key.
        let mut again = claims(1..2, "k", true);
        again[0].key = "other".into();
        again.extend(claims(3..4, "k", false));
        again.extend(claims(2..3, "x", false));
        // The run taking a message over is told the key its record holds, the one it may
        // have gone out with, not its own.
        assert_eq!(
            second.claim(again).await.unwrap(),
            [won_in_doubt("k1"), won_with("k3"), won_with("k2")],
            "{name}"
        );
        let kept = second.lookup(vec![identity(1)]).await.unwrap();
        assert_eq!(
            kept[0].key.as_deref(),
            Some("k1"),
            "{name}: a taken-over message keeps its key"
        );
        // A message taken over in doubt stays in doubt if this run does not send it.
        second
            .write_durably(vec![result(1, State::Skipped)])
            .await
            .unwrap();
        let still = second.lookup(vec![identity(1)]).await.unwrap();
        assert_eq!(still[0].state, State::Dispatched, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_over_overlapping_messages_claim_each_exactly_once() {
    for store in Store::all() {
        let mut runs = Vec::new();
        for _ in 0..4 {
            runs.push(store.open("load", LEASE).await);
        }
        let mut tasks = Vec::new();
        for (number, run) in runs.iter().enumerate() {
            let run = Arc::clone(run);
            tasks.push(tokio::spawn(async move {
                // Each run walks the same 2,000 messages from another start, in batches.
                let mut order: Vec<u128> = (0..2000).collect();
                order.rotate_left(number * 500);
                let mut won = Vec::new();
                for batch in order.chunks(64) {
                    let claims: Vec<Claim> = batch
                        .iter()
                        .map(|n| Claim {
                            identity: identity(*n),
                            key: format!("k{n}"),
                            take_over: false,
                        })
                        .collect();
                    let answers = run.claim(claims).await.unwrap();
                    for (n, answer) in batch.iter().zip(answers) {
                        if answer.is_won() {
                            won.push(*n);
                        }
                    }
                }
                won
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..2000).collect::<Vec<u128>>(), "{}", store.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_write_their_messages_and_claim_each_others_never_deadlock() {
    // Each run writes the messages it holds and at once claims the other's. Were the write
    // and the claim one transaction, or the write's locks taken in its plan's order, the
    // two would lock the same rows in opposite orders and the server roll one back as a
    // deadlock (a second later), which the run would fail with. (SQLite runs one transaction
    // at a time: there, neither may fail either.)
    for store in Store::all() {
        let first = store.open("crossing", LEASE).await;
        let second = store.open("crossing", LEASE).await;
        for round in 0..40u128 {
            let (mine, theirs) = (
                round * 400..round * 400 + 200,
                round * 400 + 200..round * 400 + 400,
            );
            assert!(first
                .claim(claims(mine.clone(), "k", false))
                .await
                .unwrap()
                .iter()
                .all(|c| c.is_won()));
            assert!(second
                .claim(claims(theirs.clone(), "k", false))
                .await
                .unwrap()
                .iter()
                .all(|c| c.is_won()));
            let cross = |run: Arc<dyn JournalStore>,
                         held: std::ops::Range<u128>,
                         wanted: std::ops::Range<u128>| {
                tokio::spawn(async move {
                    run.write(held.map(|n| result(n, State::Failed)).collect())?;
                    run.claim(claims(wanted, "k", false)).await
                })
            };
            let a = cross(Arc::clone(&first), mine.clone(), theirs.clone());
            let b = cross(Arc::clone(&second), theirs, mine);
            a.await.unwrap().unwrap();
            b.await.unwrap().unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_learns_it_and_its_writes_are_never_silently_lost() {
    for store in Store::all() {
        let name = store.name();
        let first = store.open("contract", LEASE).await;
        claim_all(&*first, 0..3, "a").await;
        assert_eq!(first.fence().check(), Ok(()), "{name}");
        // Message 0's request was written (dispatched); message 1 only claimed.
        dispatch_all(&*first, 0..1).await;
        // Frozen past its own lease and the margin.
        store.age_heartbeats(LEASE.as_secs_f64() * 1.3).await;
        let second = store.open("contract", LEASE).await;
        let taken = second.claim(claims(0..2, "b", true)).await.unwrap();
        assert_eq!(
            taken,
            [won_in_doubt("a0"), won_with("a1")],
            "{name}: a take-over is told the recorded keys"
        );
        // The run taken over writes a result of a message it no longer holds: an error it
        // acts on, never silence; and it may send nothing more.
        let mut sent = super::Row::new(identity(0), State::Sent, Some("a0".into()));
        sent.held = true;
        let written = first.write_durably(vec![sent]).await;
        assert!(
            written.is_err(),
            "{name}: a taken-over run's write was accepted"
        );
        assert!(
            first.fence().is_lost(),
            "{name}: the fence of a taken-over run still holds"
        );
        let kept = second.lookup(vec![identity(0)]).await.unwrap();
        assert_eq!(kept[0].state, State::Dispatched, "{name}");
        assert_eq!(kept[0].key.as_deref(), Some("a0"), "{name}");
        // Nor may it dispatch (and so send) what it had only claimed.
        assert!(
            !matches!(first.dispatch(identity(1)).await, Ok(true)),
            "{name}: a taken-over run dispatched a message another run holds"
        );
        // It still writes the result of a message it holds (it went out: nobody may send it
        // again), and claims nothing more.
        let mut result = super::Row::new(identity(2), State::Sent, Some("a2".into()));
        result.held = true;
        first.write(vec![result]).unwrap();
        assert!(
            first.flush().await.is_err(),
            "{name}: a taken-over run's flush succeeded"
        );
        let held = second.lookup(vec![identity(2)]).await.unwrap();
        assert_eq!(held[0].state, State::Sent, "{name}: its result was lost");
        assert!(
            first.claim(claims(5..6, "a", false)).await.is_err(),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_judged_by_its_own_lease_not_by_the_readers() {
    for store in Store::all() {
        let name = store.name();
        let slow = store.open("leases", LEASE).await;
        claim_all(&*slow, 0..2, "a").await;
        // Silent for 20 s: well within its own lease of 60 s, far past the reader's of 3 s.
        store.age_heartbeats(20.0).await;
        let hasty = store.open("leases", Duration::from_secs(3)).await;
        let answers = hasty.claim(claims(0..2, "b", true)).await.unwrap();
        assert!(
            answers
                .iter()
                .all(|answer| matches!(answer, Claimed::Lost(row) if row.held_elsewhere)),
            "{name}: a live run's claims were taken: {answers:?}"
        );
        assert_eq!(slow.fence().check(), Ok(()), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_stopped_being_confirmed_stops_sending_until_confirmed_again() {
    for store in Store::all() {
        let name = store.name();
        let lease = Duration::from_millis(400);
        let run = store.open("confirmed", lease).await;
        run.claim(claims(0..1, "a", false)).await.unwrap();
        assert_eq!(run.fence().check(), Ok(()), "{name}");
        // Its heartbeat every tenth of a second keeps it confirmed with nothing to write.
        tokio::time::sleep(lease * 2).await;
        assert_eq!(
            run.fence().check(),
            Ok(()),
            "{name}: an idle run lost its confirmation"
        );
        run.flush().await.unwrap();
        assert_eq!(run.fence().check(), Ok(()), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ended_is_recorded_ended_and_holds_nothing_before_end_returns() {
    for store in Store::all() {
        let name = store.name();
        let first = store.open("ending", LEASE).await;
        claim_all(&*first, 0..2, "a").await;
        let mut sent = super::Row::new(identity(0), State::Sent, Some("a0".into()));
        sent.held = true;
        first.write(vec![sent]).unwrap();
        first.flush().await.unwrap();
        first.end().await;
        // Once `end` returns (the caller hears the campaign is done), the run is recorded
        // ended and its lock is gone: what it left in doubt is nobody's.
        assert_eq!(store.run_states().await, ["ended"], "{name}");
        let next = store.open("ending", LEASE).await;
        let rows = next.lookup(vec![identity(0), identity(1)]).await.unwrap();
        assert_eq!(rows[0].state, State::Sent, "{name}");
        assert_eq!(rows[1].state, State::Claimed, "{name}");
        assert!(
            !rows[1].held_elsewhere,
            "{name}: an ended run still holds its claims"
        );
        assert_eq!(
            next.claim(claims(1..2, "b", false)).await.unwrap(),
            [won_with("a1")],
            "{name}: an ended run's claim of a message never sent is not claimed anew"
        );
        assert!(
            first.claim(claims(5..6, "a", false)).await.is_err(),
            "{name}: an ended run claimed"
        );
        // Ending twice is harmless.
        first.end().await;
        next.end().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runs_claimed_messages_are_won_by_the_next_run_without_doubt_with_their_keys() {
    for store in Store::all() {
        let name = store.name();
        let killed = store.open("killed", LEASE).await;
        claim_all(&*killed, 0..4, "a").await;
        // Message 0's request was being written; 1 to 3 were waiting for their pace.
        dispatch_all(&*killed, 0..1).await;
        drop(killed);
        let next = store.open("killed", LEASE).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        let rows = loop {
            let rows = next.lookup((0..4).map(identity).collect()).await.unwrap();
            if rows.iter().all(|row| !row.held_elsewhere) {
                break rows;
            }
            assert!(Instant::now() < deadline, "{name}: {rows:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let states: HashMap<u128, State> = rows
            .iter()
            .map(|row| (row.identity.fingerprint.0, row.state))
            .collect();
        assert_eq!(states[&0], State::Dispatched, "{name}");
        assert_eq!(states[&1], State::Claimed, "{name}");
        // Without `take_over`: the message in doubt is not won, the claimed ones are, as new,
        // with the keys recorded (not the next run's own).
        let answers = next.claim(claims(0..4, "b", false)).await.unwrap();
        assert!(
            matches!(&answers[0], Claimed::Lost(row) if row.state == State::Dispatched
                && !row.held_elsewhere && row.key.as_deref() == Some("a0")),
            "{name}: {answers:?}"
        );
        assert_eq!(
            answers[1..],
            [won_with("a1"), won_with("a2"), won_with("a3")],
            "{name}"
        );
        dispatch_all(&*next, 1..4).await;
        let rows = next.lookup((1..4).map(identity).collect()).await.unwrap();
        assert!(
            rows.iter()
                .all(|row| row.state == State::Dispatched && !row.held_elsewhere),
            "{name}: {rows:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_cannot_dispatch_and_a_dispatch_made_first_leaves_the_message_in_doubt() {
    for store in Store::all() {
        let name = store.name();
        let frozen = store.open("dispatch", LEASE).await;
        claim_all(&*frozen, 0..3, "a").await;
        // Its dispatch of message 0 committed before it froze.
        dispatch_all(&*frozen, 0..1).await;
        store.age_heartbeats(LEASE.as_secs_f64() * 1.3).await;
        let taker = store.open("dispatch", LEASE).await;
        let answers = taker.claim(claims(0..2, "b", false)).await.unwrap();
        assert!(
            matches!(&answers[0], Claimed::Lost(row) if row.state == State::Dispatched
                && !row.held_elsewhere),
            "{name}: a dispatched message was taken as never sent: {answers:?}"
        );
        assert_eq!(answers[1], won_with("a1"), "{name}");
        // The frozen run resumes: its dispatch of the message taken over fails, and so does
        // the one of a message nobody took (it was taken over: it sends nothing more).
        assert!(
            !matches!(frozen.dispatch(identity(1)).await, Ok(true)),
            "{name}: the frozen run dispatched a message another run took over"
        );
        assert!(frozen.fence().is_lost(), "{name}");
        assert!(
            !matches!(frozen.dispatch(identity(2)).await, Ok(true)),
            "{name}: a run taken over dispatched"
        );
        let rows = taker.lookup(vec![identity(1), identity(2)]).await.unwrap();
        assert!(
            rows.iter().all(|row| row.state == State::Claimed),
            "{name}: {rows:?}"
        );
        dispatch_all(&*taker, 1..2).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_is_made_only_of_a_row_this_run_holds_claimed() {
    for store in Store::all() {
        let name = store.name();
        let run = store.open("once", LEASE).await;
        claim_all(&*run, 0..4, "a").await;
        let mut skipped = result(1, State::Skipped);
        skipped.clears_doubt = false;
        run.write_durably(vec![
            result(0, State::Sent),
            skipped,
            result(2, State::Failed),
        ])
        .await
        .unwrap();
        // After a result, or a second time, or of a message never claimed: not made.
        for n in [0, 1, 2] {
            assert!(!run.dispatch(identity(n)).await.unwrap(), "{name}: {n}");
        }
        assert!(run.dispatch(identity(3)).await.unwrap(), "{name}");
        assert!(!run.dispatch(identity(3)).await.unwrap(), "{name}");
        assert!(!run.dispatch(identity(9)).await.unwrap(), "{name}");
        // None of that is a take-over: the run goes on.
        assert_eq!(run.fence().check(), Ok(()), "{name}");
        let mut rows = run.lookup((0..4).map(identity).collect()).await.unwrap();
        rows.sort_by_key(|row| row.identity.fingerprint.0);
        let states: Vec<State> = rows.into_iter().map(|row| row.state).collect();
        assert_eq!(
            states,
            [
                State::Sent,
                State::Skipped,
                State::Failed,
                State::Dispatched
            ],
            "{name}"
        );
    }
}
