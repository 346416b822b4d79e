//! Opening the journal a campaign was given: the SQLite file, or the campaign's rows in
//! PostgreSQL, before the engine takes its first message. Apart from the engine, whose loop does
//! not care which store it writes to.

use std::sync::Arc;
use std::time::Duration;

use super::journal::{JournalStore, JournalTarget, PostgresJournal, SqliteJournal};
use crate::error::{Error, Result};

/// The journal at `target` (none: the campaign keeps no journal), for the campaign
/// `campaign_id` (none: the journal names it), its claims held for `lease`.
pub(super) async fn open_journal(
    target: Option<&JournalTarget>,
    campaign_id: Option<&str>,
    lease: Duration,
) -> Result<Option<Arc<dyn JournalStore>>> {
    Ok(match target {
        Some(JournalTarget::File(path)) => {
            let path = path.clone();
            let id = campaign_id.map(str::to_owned);
            // SQLite blocks: opened (and migrated) off the runtime's workers.
            let opened = tokio::task::spawn_blocking(move || {
                SqliteJournal::open(&path, id.as_deref(), lease)
            })
            .await
            .map_err(|e| Error::Internal(format!("the journal could not be opened: {e}")))??;
            Some(Arc::new(opened))
        }
        Some(JournalTarget::Postgres(url)) => {
            let id = campaign_id.unwrap_or_default();
            Some(Arc::new(PostgresJournal::open(url, id, lease).await?))
        }
        None => None,
    })
}
