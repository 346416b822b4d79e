//! What a run's transactions do to the messages' records: look them up (with whether a live run
//! of another process holds each), claim them (judging the runs that hold them first), record
//! claimed ones `dispatched` before their requests are written (only while this run holds them
//! `claimed`), and write their results, never losing a result or a doubt. Each statement finds its messages
//! by the primary key's first columns (`statements.rs`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio_postgres::types::ToSql;
use tokio_postgres::Transaction;
use uuid::Uuid;

use super::statements::Statements;
use crate::campaign::journal::{Claim, Claimed, Identity, Row, State};
use crate::campaign::message::Fingerprint;

fn uuid_of(fingerprint: Fingerprint) -> Uuid {
    Uuid::from_u128(fingerprint.0)
}

fn occurrence_of(identity: Identity) -> i32 {
    i32::try_from(identity.occurrence).unwrap_or(i32::MAX)
}

/// The records of `identities`, with whether a live run of another process holds each.
pub(super) async fn lookup(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    identities: &[Identity],
) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
    if identities.is_empty() {
        return Ok(Vec::new());
    }
    let fingerprints: Vec<Uuid> = identities.iter().map(|i| uuid_of(i.fingerprint)).collect();
    let occurrences: Vec<i32> = identities.iter().map(|i| occurrence_of(*i)).collect();
    let found = transaction
        .query(
            &statements.lookup,
            &[&campaign, &fingerprints, &run, &occurrences],
        )
        .await?;
    Ok(found.iter().map(row_from).collect())
}

fn row_from(found: &tokio_postgres::Row) -> Row {
    let fingerprint: Uuid = found.get(0);
    let occurrence: i32 = found.get(1);
    let state: String = found.get(3);
    Row {
        identity: Identity {
            fingerprint: Fingerprint(fingerprint.as_u128()),
            occurrence: u32::try_from(occurrence).unwrap_or_default(),
        },
        key: found.get(2),
        // An unreadable state is taken for in doubt, the safe reading.
        state: State::parse(&state).unwrap_or(State::Dispatched),
        sms_id: found.get(4),
        code: found.get(5),
        msg: found.get(6),
        clears_doubt: false,
        held_elsewhere: found.get::<_, Option<bool>>(7).unwrap_or(false),
        holder_settling: found.get::<_, Option<bool>>(8).unwrap_or(false),
        held: false,
    }
}

/// Claims in one statement: a message is won when it has no record (inserted), a record of
/// this run without a result, one that says it was never sent, or (taken over) one in doubt
/// whose run is dead; the statement returns what it won, with each record's key. Sorted, so
/// that concurrent claims of overlapping messages lock them in one order and never deadlock.
///
/// A take-over judges the holders first, from their locked rows (`JUDGE_HOLDERS`), and records
/// the dead ones `lost` in this transaction: a run judged dead cannot confirm itself alive
/// before this commits, and afterwards learns it was taken over. (Runs rows are locked before
/// message rows, as a run's own transactions lock them: its heartbeat comes first.)
pub(super) async fn claim(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    claims: &[Claim],
    lock_wait: Duration,
) -> std::result::Result<Vec<Claimed>, tokio_postgres::Error> {
    let locked = lock_claimable(transaction, statements, campaign, run, claims, lock_wait).await?;
    claim_locked(transaction, statements, campaign, run, claims, locked).await
}

/// What a claim's first step found: the dead runs whose claims it may take over, and of each
/// recorded message, whether it is claimable and whether this transaction locked it.
pub(super) struct Locked {
    dead: Vec<Uuid>,
    recorded: HashMap<(Uuid, i32), (bool, bool)>,
}

/// A claim's first step (see `claim`): judges the holders of what it would take over, and locks
/// the recorded messages it may claim. It changes no message: a caller may send it with the
/// transaction's liveness check and claim (`claim_locked`) only if the run is still alive.
pub(super) async fn lock_claimable(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    claims: &[Claim],
    lock_wait: Duration,
) -> std::result::Result<Locked, tokio_postgres::Error> {
    if claims.is_empty() {
        return Ok(Locked {
            dead: Vec::new(),
            recorded: HashMap::new(),
        });
    }
    let dead = dead_holders(transaction, statements, campaign, run, claims).await?;
    let all_fingerprints: Vec<Uuid> = claims
        .iter()
        .map(|c| uuid_of(c.identity.fingerprint))
        .collect();
    let all_occurrences: Vec<i32> = claims.iter().map(|c| occurrence_of(c.identity)).collect();
    let all_take_over: Vec<bool> = claims.iter().map(|c| c.take_over).collect();
    // A new message another run is inserting now (a run frozen inside its claim) is not waited
    // for long: the claim is then split around it (`Writer::claim_around_busy_rows`). Set with
    // the next statement, in one go (it only matters to the claim's own, which follows).
    let lock_timeout = format!("SET LOCAL lock_timeout = '{}ms'", lock_wait.as_millis());
    let asked = Asked {
        campaign,
        fingerprints: &all_fingerprints,
        occurrences: &all_occurrences,
        run,
        take_over: &all_take_over,
    };
    let ((), claimable) = futures::future::try_join(
        transaction.batch_execute(&lock_timeout),
        asked.lock(transaction, statements, &dead),
    )
    .await?;
    // Rows `claimed` by runs not judged yet (a run that died, or one alive and sending them):
    // those runs are judged, and the rows of the dead ones locked with the others, asked again.
    let unjudged: HashSet<Uuid> = claimable
        .iter()
        .filter_map(|row| row.get::<_, Option<Uuid>>(4))
        .collect();
    let (dead, claimable) = if unjudged.is_empty() {
        (dead, claimable)
    } else {
        let mut dead = dead;
        dead.extend(judge(transaction, statements, unjudged.into_iter().collect()).await?);
        let again = asked.lock(transaction, statements, &dead).await?;
        (dead, again)
    };
    // (claimable, locked) of each recorded message; the others are new.
    let recorded: HashMap<(Uuid, i32), (bool, bool)> = claimable
        .iter()
        .map(|row| ((row.get(0), row.get(1)), (row.get(2), row.get(3))))
        .collect();
    Ok(Locked { dead, recorded })
}

/// The messages a claim's first step asks to lock, as `LOCK_CLAIMABLE` takes them.
struct Asked<'a> {
    campaign: i64,
    fingerprints: &'a [Uuid],
    occurrences: &'a [i32],
    run: Uuid,
    take_over: &'a [bool],
}

impl Asked<'_> {
    /// Locks the claimable ones, taking over the claims of the runs judged `dead`: asked once,
    /// and again when the answer named runs not judged yet.
    async fn lock(
        &self,
        transaction: &Transaction<'_>,
        statements: &Statements,
        dead: &[Uuid],
    ) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        transaction
            .query(
                &statements.lock_claimable,
                &[
                    &self.campaign,
                    &self.fingerprints,
                    &self.occurrences,
                    &self.run,
                    &self.take_over,
                    &dead,
                ],
            )
            .await
    }
}

/// A claim's second step: claims the new messages and those `lock_claimable` locked; the
/// answer of each claim, in order.
pub(super) async fn claim_locked(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    claims: &[Claim],
    locked: Locked,
) -> std::result::Result<Vec<Claimed>, tokio_postgres::Error> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let Locked { dead, recorded } = locked;
    let position = |claim: &Claim| {
        (
            uuid_of(claim.identity.fingerprint),
            occurrence_of(claim.identity),
        )
    };
    // Claimable, but held by another transaction now: reported held by another run.
    let busy: HashSet<(Uuid, i32)> = recorded
        .iter()
        .filter(|(_, (claimable, locked))| *claimable && !*locked)
        .map(|(position, _)| *position)
        .collect();
    // New messages, and recorded ones this run locked: nothing else is touched.
    let free: Vec<&Claim> = claims
        .iter()
        .filter(|claim| {
            recorded
                .get(&position(claim))
                .is_none_or(|(_, locked)| *locked)
        })
        .collect();
    let fingerprints: Vec<Uuid> = free
        .iter()
        .map(|c| uuid_of(c.identity.fingerprint))
        .collect();
    let occurrences: Vec<i32> = free.iter().map(|c| occurrence_of(c.identity)).collect();
    let keys: Vec<&str> = free.iter().map(|c| c.key.as_str()).collect();
    let take_over: Vec<bool> = free.iter().map(|c| c.take_over).collect();
    let won_rows = transaction
        .query(
            &statements.claim,
            &[
                &campaign,
                &run,
                &fingerprints,
                &occurrences,
                &keys,
                &take_over,
                &dead,
            ],
        )
        .await?;
    let mut won: HashMap<(Uuid, i32), (Option<String>, bool)> = won_rows
        .iter()
        .map(|row| {
            (
                (row.get::<_, Uuid>(0), row.get::<_, i32>(1)),
                (
                    row.get::<_, Option<String>>(2),
                    row.get::<_, Option<bool>>(3).unwrap_or(false),
                ),
            )
        })
        .collect();
    let lost: Vec<Identity> = claims
        .iter()
        .map(|c| c.identity)
        .filter(|i| !won.contains_key(&(uuid_of(i.fingerprint), occurrence_of(*i))))
        .collect();
    let mut records: HashMap<Identity, Row> = lookup(transaction, statements, campaign, run, &lost)
        .await?
        .into_iter()
        .map(|row| (row.identity, row))
        .collect();
    Ok(claims
        .iter()
        .map(|claim| {
            let position = position(claim);
            match won.remove(&position) {
                // A record always has a key once claimed; the claim's own is a fallback only.
                Some((key, dispatch)) => Claimed::Won {
                    key: key.unwrap_or_else(|| claim.key.clone()),
                    dispatch,
                },
                // A record that vanished meanwhile cannot be (records are never deleted): it
                // is reported as held elsewhere, the safe reading; so is one another
                // transaction holds now.
                None => {
                    let mut row = records.remove(&claim.identity).unwrap_or_else(|| {
                        let mut row = Row::new(claim.identity, State::Dispatched, None);
                        row.held_elsewhere = true;
                        row
                    });
                    if busy.contains(&position) {
                        row.held_elsewhere = true;
                        row.holder_settling = false;
                    }
                    Claimed::Lost(row)
                }
            }
        })
        .collect())
}

/// The runs holding the messages of take-over claims that are dead, judged from their locked
/// rows and recorded `lost`.
async fn dead_holders(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    claims: &[Claim],
) -> std::result::Result<Vec<Uuid>, tokio_postgres::Error> {
    let (fingerprints, occurrences): (Vec<Uuid>, Vec<i32>) = claims
        .iter()
        .filter(|claim| claim.take_over)
        .map(|claim| {
            (
                uuid_of(claim.identity.fingerprint),
                occurrence_of(claim.identity),
            )
        })
        .unzip();
    if fingerprints.is_empty() {
        return Ok(Vec::new());
    }
    let found = transaction
        .query(
            &statements.holders,
            &[&campaign, &fingerprints, &occurrences, &run],
        )
        .await?;
    // A run whose record is gone (deleted by a person tidying the table) is gone too.
    let mut dead: Vec<Uuid> = found
        .iter()
        .filter(|row| !row.get::<_, bool>(1))
        .map(|row| row.get(0))
        .collect();
    let recorded: Vec<Uuid> = found
        .iter()
        .filter(|row| row.get::<_, bool>(1))
        .map(|row| row.get(0))
        .collect();
    if recorded.is_empty() {
        return Ok(dead);
    }
    dead.extend(judge(transaction, statements, recorded).await?);
    Ok(dead)
}

/// Which of `runs` (holding messages a claim wants) are dead, judged from their locked rows
/// (`JUDGE_HOLDERS`; a run with no record is gone), the dead recorded `lost` in this
/// transaction: a run judged dead cannot confirm itself alive before this commits, and
/// afterwards learns it was taken over.
async fn judge(
    transaction: &Transaction<'_>,
    statements: &Statements,
    runs: Vec<Uuid>,
) -> std::result::Result<Vec<Uuid>, tokio_postgres::Error> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let (judged, unrecorded) = futures::future::try_join(
        transaction.query(&statements.judge_holders, &[&runs]),
        transaction.query(&statements.unrecorded, &[&runs]),
    )
    .await?;
    let judged: Vec<Uuid> = judged
        .iter()
        .filter(|row| !row.get::<_, Option<bool>>(1).unwrap_or(false))
        .map(|row| row.get(0))
        .collect();
    if !judged.is_empty() {
        transaction
            .execute(&statements.mark_lost, &[&judged])
            .await?;
    }
    let mut dead = judged;
    dead.extend(unrecorded.iter().map(|row| row.get::<_, Uuid>(0)));
    Ok(dead)
}

/// What a transaction's writes did: how many of the messages this run claimed (`Row::claimed`,
/// or dispatched) another run holds now (this run was taken over, and the caller stops it), and
/// the messages it recorded `dispatched`.
pub(super) struct Written {
    pub(super) lost: usize,
    pub(super) dispatched: HashSet<Identity>,
}

/// Records `dispatches` (messages this run claimed) `dispatched`, only those it still holds
/// `claimed`, then writes the records of messages this run holds (the last write of each
/// message in the batch: it supersedes the earlier ones), never losing a result or a doubt.
/// A message both dispatched and written here (abandoned as its dispatch was being made) ends
/// as written: its outcome says it never left.
pub(super) async fn write(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    rows: Vec<Row>,
    dispatches: Vec<Identity>,
) -> std::result::Result<Written, tokio_postgres::Error> {
    if rows.is_empty() && dispatches.is_empty() {
        return Ok(Written {
            lost: 0,
            dispatched: HashSet::new(),
        });
    }
    let mut last: HashMap<Identity, Row> = HashMap::with_capacity(rows.len());
    for row in rows {
        last.insert(row.identity, row);
    }
    let rows: Vec<Row> = last.into_values().collect();
    let fingerprints: Vec<Uuid> = rows
        .iter()
        .map(|r| uuid_of(r.identity.fingerprint))
        .collect();
    let occurrences: Vec<i32> = rows.iter().map(|r| occurrence_of(r.identity)).collect();
    let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    let keys: Vec<Option<&str>> = rows.iter().map(|r| r.key.as_deref()).collect();
    let sms_ids: Vec<Option<&str>> = rows.iter().map(|r| r.sms_id.as_deref()).collect();
    let codes: Vec<Option<&str>> = rows.iter().map(|r| r.code.as_deref()).collect();
    let msgs: Vec<Option<&str>> = rows.iter().map(|r| r.msg.as_deref()).collect();
    let clears: Vec<bool> = rows.iter().map(|r| r.clears_doubt).collect();
    let dispatch_fingerprints: Vec<Uuid> =
        dispatches.iter().map(|i| uuid_of(i.fingerprint)).collect();
    let dispatch_occurrences: Vec<i32> = dispatches.iter().map(|i| occurrence_of(*i)).collect();
    let all_fingerprints: Vec<Uuid> = fingerprints
        .iter()
        .chain(&dispatch_fingerprints)
        .copied()
        .collect();
    let all_occurrences: Vec<i32> = occurrences
        .iter()
        .chain(&dispatch_occurrences)
        .copied()
        .collect();
    // Locked first in one order (the claims' order), so that a claim of the same messages by
    // another run, sorted too, cannot hold one of them while waiting for another this holds.
    // The UPDATEs' joins would lock them in the order of their plans. The lock also tells who
    // holds each: a row this run claimed and another holds is never written, and not silently.
    //
    // The lock, the dispatch and the write are sent together (tokio-postgres pipelines
    // statements polled at once; the server runs them in order): neither needs anything the
    // lock answers, so the lock costs no round trip of its own, and a batch's dispatches none
    // beyond its writes'.
    let parameters: [&(dyn ToSql + Sync); 10] = [
        &campaign,
        &run,
        &fingerprints,
        &occurrences,
        &states,
        &keys,
        &sms_ids,
        &codes,
        &msgs,
        &clears,
    ];
    let dispatching = async {
        if dispatches.is_empty() {
            Ok(Vec::new())
        } else {
            transaction
                .query(
                    &statements.dispatch,
                    &[
                        &campaign,
                        &run,
                        &dispatch_fingerprints,
                        &dispatch_occurrences,
                    ],
                )
                .await
        }
    };
    let writing = async {
        if rows.is_empty() {
            Ok(0)
        } else {
            transaction
                .execute(&statements.write_rows, &parameters)
                .await
        }
    };
    let (locked, made, _) = futures::future::try_join3(
        transaction.query(
            &statements.lock_rows,
            &[&campaign, &all_fingerprints, &all_occurrences],
        ),
        dispatching,
        writing,
    )
    .await?;
    let holders: HashMap<(Uuid, i32), Option<Uuid>> = locked
        .iter()
        .map(|row| ((row.get(0), row.get(1)), row.get(2)))
        .collect();
    let held_by_another = |identity: Identity| {
        let position = (uuid_of(identity.fingerprint), occurrence_of(identity));
        holders
            .get(&position)
            .is_some_and(|holder| *holder != Some(run))
    };
    let made: HashSet<(Uuid, i32)> = made
        .iter()
        .map(|row| (row.get::<_, Uuid>(0), row.get::<_, i32>(1)))
        .collect();
    let dispatched: HashSet<Identity> = dispatches
        .iter()
        .copied()
        .filter(|i| made.contains(&(uuid_of(i.fingerprint), occurrence_of(*i))))
        .collect();
    let lost = rows
        .iter()
        .filter(|row| row.held)
        .map(|row| row.identity)
        .chain(dispatches.iter().copied())
        .filter(|identity| held_by_another(*identity))
        .count();
    Ok(Written { lost, dispatched })
}
