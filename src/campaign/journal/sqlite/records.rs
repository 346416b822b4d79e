//! What a transaction does to the messages' records: look them up (with whether a live run of
//! another process holds each), claim them (a message is won when it has no record, one never
//! sent, one `claimed` by a run that is gone, or, taken over, one in doubt whose run is gone),
//! record a claimed one `dispatched` before its request is written (only while this run holds
//! it `claimed`), and write their results, never losing a result or a doubt.

use rusqlite::{params, OptionalExtension, Transaction};

use super::liveness::Liveness;
use crate::campaign::journal::{Claim, Claimed, Identity, Row, State};

/// A message's row as recorded, with the run holding it.
fn recorded(
    transaction: &Transaction<'_>,
    identity: Identity,
) -> rusqlite::Result<Option<(Row, Option<String>)>> {
    let mut statement = transaction.prepare_cached(
        "SELECT idempotency_key, state, sms_id, code, msg, run_id
         FROM bizmsg_messages WHERE fingerprint = ?1 AND occurrence = ?2",
    )?;
    statement
        .query_row(
            params![identity.fingerprint.to_hex(), identity.occurrence],
            |row| {
                let state: String = row.get(1)?;
                Ok((
                    Row {
                        identity,
                        key: row.get(0)?,
                        // An unreadable state is taken for in doubt, the safe reading.
                        state: State::parse(&state).unwrap_or(State::Dispatched),
                        sms_id: row.get(2)?,
                        code: row.get(3)?,
                        msg: row.get(4)?,
                        clears_doubt: false,
                        held_elsewhere: false,
                        // A run lock is released only when its process ends: never settling.
                        holder_settling: false,
                        held: false,
                    },
                    row.get(5)?,
                ))
            },
        )
        .optional()
}

pub(super) fn lookup(
    transaction: &Transaction<'_>,
    identities: &[Identity],
    liveness: &mut Liveness<'_>,
) -> rusqlite::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for identity in identities {
        if let Some((mut row, holder)) = recorded(transaction, *identity)? {
            row.held_elsewhere = held_elsewhere(transaction, &row, holder.as_deref(), liveness)?;
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Whether `row` is claimed, without a result, by a live run other than this one.
fn held_elsewhere(
    transaction: &Transaction<'_>,
    row: &Row,
    holder: Option<&str>,
    liveness: &mut Liveness<'_>,
) -> rusqlite::Result<bool> {
    match (row.state, holder) {
        (State::Claimed | State::Dispatched | State::Unknown, Some(holder))
            if holder != liveness.run.id =>
        {
            liveness.alive(transaction, holder)
        }
        _ => Ok(false),
    }
}

pub(super) fn claim(
    transaction: &Transaction<'_>,
    claims: &[Claim],
    liveness: &mut Liveness<'_>,
    now: f64,
) -> rusqlite::Result<Vec<Claimed>> {
    let me = liveness.run.id.clone();
    let mut answers = Vec::with_capacity(claims.len());
    for claim in claims {
        let Some((mut row, holder)) = recorded(transaction, claim.identity)? else {
            transaction.execute(
                "INSERT INTO bizmsg_messages
                     (fingerprint, occurrence, idempotency_key, state, run_id, inherited_doubt,
                      updated_at)
                 VALUES (?1, ?2, ?3, 'claimed', ?4, 0, ?5)",
                params![
                    claim.identity.fingerprint.to_hex(),
                    claim.identity.occurrence,
                    claim.key,
                    me,
                    now
                ],
            )?;
            answers.push(Claimed::Won {
                key: claim.key.clone(),
                dispatch: true,
            });
            continue;
        };
        let mine = holder.as_deref() == Some(me.as_str());
        // A message that may have left keeps the key it may have left with, whoever claims it.
        let may_have_left = matches!(row.state, State::Dispatched | State::Unknown);
        let won = match row.state {
            State::Sent | State::Rejected => false,
            State::Failed | State::Skipped => true,
            State::Claimed | State::Dispatched | State::Unknown if mine => true,
            // Claimed by a run that is gone: its request was never written (its dispatch
            // would have made the row `dispatched` first), so it is claimed as new.
            State::Claimed => {
                row.held_elsewhere =
                    held_elsewhere(transaction, &row, holder.as_deref(), liveness)?;
                !row.held_elsewhere
            }
            State::Dispatched | State::Unknown => {
                row.held_elsewhere =
                    held_elsewhere(transaction, &row, holder.as_deref(), liveness)?;
                !row.held_elsewhere && claim.take_over
            }
        };
        if !won {
            answers.push(Claimed::Lost(row));
            continue;
        }
        // A message taken over from a run that left it in doubt keeps its key, and its doubt.
        let inherited = may_have_left && !mine;
        // The recorded key for a message that may have left, and for one claimed and never
        // sent (the key it would have gone out with).
        let key = match (&row.key, may_have_left || row.state == State::Claimed) {
            (Some(recorded), true) => recorded.clone(),
            _ => claim.key.clone(),
        };
        let state = if may_have_left {
            State::Dispatched
        } else {
            State::Claimed
        };
        transaction.execute(
            "UPDATE bizmsg_messages
             SET state = ?8, run_id = ?3, idempotency_key = ?4,
                 inherited_doubt = ?5 OR (inherited_doubt AND ?7),
                 sms_id = NULL, code = NULL, msg = NULL, updated_at = ?6
             WHERE fingerprint = ?1 AND occurrence = ?2",
            params![
                claim.identity.fingerprint.to_hex(),
                claim.identity.occurrence,
                me,
                key,
                inherited,
                now,
                mine && may_have_left,
                state.as_str()
            ],
        )?;
        answers.push(Claimed::Won {
            key,
            dispatch: state == State::Claimed,
        });
    }
    Ok(answers)
}

/// Records a message this run claimed `dispatched`, only if this run still holds its row
/// `claimed` (the condition is the statement's own, under SQLite's write lock: a run that
/// took the row over first leaves it unchanged). Returns whether it was made, and whether the
/// row is held by another run (this run was taken over).
pub(super) fn dispatch(
    transaction: &Transaction<'_>,
    me: &str,
    identity: Identity,
    now: f64,
) -> rusqlite::Result<(bool, bool)> {
    let mut statement = transaction.prepare_cached(
        "UPDATE bizmsg_messages SET state = 'dispatched', updated_at = ?4
         WHERE fingerprint = ?1 AND occurrence = ?2 AND run_id = ?3 AND state = 'claimed'",
    )?;
    let changed = statement.execute(params![
        identity.fingerprint.to_hex(),
        identity.occurrence,
        me,
        now
    ])?;
    if changed > 0 {
        return Ok((true, false));
    }
    // Not made: a row of another run means this one was taken over; its own row with a
    // result (or already dispatched), or no row at all, only that there is nothing to make.
    let taken = match recorded(transaction, identity)? {
        Some((_, holder)) => holder.as_deref() != Some(me),
        None => false,
    };
    Ok((false, taken))
}

/// Writes the records of messages this run holds; returns how many of those it claimed
/// (`Row::claimed`) another run holds now (this run was taken over).
pub(super) fn write(
    transaction: &Transaction<'_>,
    me: &str,
    rows: &[Row],
    now: f64,
) -> rusqlite::Result<usize> {
    let mut statement = transaction.prepare_cached(
        "UPDATE bizmsg_messages
         SET state = ?3, idempotency_key = coalesce(?4, idempotency_key),
             sms_id = ?5, code = ?6, msg = ?7, updated_at = ?8
         -- Only this run's claims; a record never loses what it says about a message that may
         -- have left: a result stays, and doubt is cleared only by a result or by the run that
         -- claimed the message and knows it never left (?9), never for a message this run
         -- took over in doubt.
         WHERE fingerprint = ?1 AND occurrence = ?2 AND run_id = ?10
           AND state NOT IN ('sent', 'rejected')
           AND NOT (state IN ('dispatched', 'unknown') AND ?3 IN ('failed', 'skipped')
                    AND (inherited_doubt OR NOT ?9))",
    )?;
    let mut lost = 0;
    for row in rows {
        let changed = statement.execute(params![
            row.identity.fingerprint.to_hex(),
            row.identity.occurrence,
            row.state.as_str(),
            row.key,
            row.sms_id,
            row.code,
            row.msg,
            now,
            row.clears_doubt,
            me
        ])?;
        // Unchanged is usual (a result already there, a doubt kept); held by another run is
        // not, for a message this run claimed.
        if changed == 0 && row.held {
            if let Some((_, holder)) = recorded(transaction, row.identity)? {
                if holder.as_deref() != Some(me) {
                    lost += 1;
                }
            }
        }
    }
    Ok(lost)
}
