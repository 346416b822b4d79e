//! Whether another run is alive, as a transaction sees it: recorded running, its lock file held
//! (`run_lock.rs`: the lock dies with its process) and its heartbeat within its own lease and
//! the fence's margin (a frozen process keeps its lock). Asked once per run within a
//! transaction; a run found gone is recorded so.

use std::collections::HashMap;

use rusqlite::{OptionalExtension, Transaction};

use super::{now, Run};
use crate::campaign::journal::fence::TAKE_OVER_AFTER;
use crate::campaign::journal::run_lock::is_alive;

/// Which runs are alive, asked once per run within a transaction.
pub(super) struct Liveness<'a> {
    pub(super) run: &'a Run,
    known: HashMap<String, bool>,
}

impl<'a> Liveness<'a> {
    pub(super) fn new(run: &'a Run) -> Self {
        Liveness {
            run,
            known: HashMap::new(),
        }
    }

    /// Whether the run `id` (not this one) is alive: recorded running, with its lock held and
    /// a heartbeat within the lease. A run found gone is recorded so.
    pub(super) fn alive(
        &mut self,
        transaction: &Transaction<'_>,
        id: &str,
    ) -> rusqlite::Result<bool> {
        if let Some(alive) = self.known.get(id) {
            return Ok(*alive);
        }
        let recorded: Option<(String, f64, f64)> = transaction
            .query_row(
                "SELECT state, heartbeat_at, lease FROM bizmsg_runs WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let alive = match recorded {
            // Judged by its own lease, with the margin its fence leaves (`fence.rs`).
            Some((state, heartbeat, lease)) if state == "running" => {
                let fresh = now() - heartbeat < lease * TAKE_OVER_AFTER;
                fresh && is_alive(&self.run.locks, id)
            }
            _ => false,
        };
        if !alive {
            transaction.execute(
                "UPDATE bizmsg_runs SET state = 'gone' WHERE id = ?1 AND state = 'running'",
                [id],
            )?;
        }
        self.known.insert(id.to_owned(), alive);
        Ok(alive)
    }
}
