//! Copies a run's write-ahead log back into the journal's file (SQLite's checkpoint) on a
//! thread and a connection of their own, so that the writer never waits for it.
//!
//! Why: left to itself, SQLite checkpoints in the connection whose commit filled the log (past
//! 1,000 pages), and a checkpoint ends with the file's `fsync`. On a disk where that takes tens
//! of milliseconds, every command queued behind it waits, a message's `dispatched` record
//! among them, and with it the message's release: a campaign at 5,000 a second with its
//! journal on such a disk reached 76 % of its pace (98.5 % with `fsync` made free, the same as
//! on tmpfs). A `PASSIVE` checkpoint runs beside the writer's transactions (it takes none of
//! their locks) and copies what it can; the writer goes on appending meanwhile.
//!
//! The log restarts from its start only after a checkpoint that copied all of it, run while
//! the writer adds nothing: under steady load a `PASSIVE` checkpoint beside the writer never
//! quite catches up. So the writer's own automatic checkpoint stays as it is (past 1,000 pages,
//! about 4 MB): by then this thread has copied nearly all the log, and the writer's checkpoint
//! copies the rest and the log restarts, bounded as with SQLite alone. (A review measured the
//! log at 66 MB with the writer's checkpoint moved to 16,000 pages, enough to fill a small file
//! system; at 5,000 a second the pace reached was the same with 1,000, 2,000, 4,000 or 16,000.)
//! A `TRUNCATE` checkpoint here would wait for the writer, and hold it (measured: 37 ms each).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// The least time between two checkpoints: a busy run checkpoints this often, so that each
/// one (and the `fsync` that ends it) is small. Measured at 5,000 a second on a disk whose
/// `fsync` is slow, share of the pace reached: a checkpoint every 500 ms, 86 %; every 100 ms,
/// 94 %; every 25 ms, 96 %; nudged, at most every 10 ms, 96–97 % (every 2 ms: the same).
const MIN_GAP: Duration = Duration::from_millis(10);

/// The checkpointing thread of one run, nudged by the writer after each of its commits (an
/// idle run makes none); stopped, and its connection closed, when dropped.
pub(super) struct Checkpointer {
    nudges: Option<mpsc::SyncSender<()>>,
    /// Set as it is dropped: a nudge still queued then is not acted on (the writer's close
    /// checkpoints what is left).
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the journal at `path` (already in WAL mode). Fails when its
    /// connection or thread cannot be had; the writer then checkpoints as SQLite does alone.
    pub(super) fn start(path: &Path) -> std::io::Result<Self> {
        // Never creates the file: the writer made it.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(std::io::Error::other)?;
        // No waiting for locks (rusqlite sets 5 s): the first checkpoint reads the schema, and
        // a lock held by another process then would hold this thread, and the run's end that
        // joins it. Busy is only a checkpoint missed: the next nudge makes it.
        connection
            .busy_timeout(Duration::ZERO)
            .map_err(std::io::Error::other)?;
        // One nudge waiting is enough: those sent meanwhile are one checkpoint.
        let (nudges, nudged) = mpsc::sync_channel::<()>(1);
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let shown = path.display().to_string();
        let thread = std::thread::Builder::new()
            // At most 15 bytes (Linux cuts thread names there), not to be taken for the writer
            // (`bizmsg-journal`) in top or py-spy.
            .name("bizmsg-wal-ckpt".to_owned())
            .spawn(move || checkpoint_when_nudged(&connection, &nudged, &stop, &shown))?;
        Ok(Checkpointer {
            nudges: Some(nudges),
            stopping,
            thread: Some(thread),
        })
    }

    /// The writer committed: the log has grown. Never waits.
    pub(super) fn nudge(&self) {
        if let Some(nudges) = &self.nudges {
            let _ = nudges.try_send(());
        }
    }
}

fn checkpoint_when_nudged(
    connection: &Connection,
    nudged: &mpsc::Receiver<()>,
    stopping: &AtomicBool,
    path: &str,
) {
    let mut failing = false;
    // A nudge came within the last gap: the next checkpoint is due when it ends.
    let mut due = false;
    loop {
        // Ends when the writer hangs up (the checkpointer dropped), at once, even within a gap.
        if !due && nudged.recv().is_err() {
            return;
        }
        if stopping.load(Ordering::Acquire) {
            return;
        }
        match connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Ok(()) => failing = false,
            // Busy (another process checkpoints this file now) or failed: the next nudge tries
            // again, and the writer's own checkpoint bounds the log meanwhile. Told once per spell.
            Err(error) => {
                if !failing {
                    log::debug!(
                        target: "bizmsg",
                        "campaign journal {path}: a checkpoint beside the writer failed ({error}); \
                         the writer's own bounds the log"
                    );
                }
                failing = true;
            }
        }
        due = false;
        let gap_ends = Instant::now() + MIN_GAP;
        loop {
            let left = gap_ends.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match nudged.recv_timeout(left) {
                Ok(()) => due = true,
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Its connection is closed when its thread ends: before the writer's, which must be
        // the last to close (it checkpoints the log and deletes it then; `writer.rs`).
        self.stopping.store(true, Ordering::Release);
        drop(self.nudges.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
