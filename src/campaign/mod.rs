//! Campaigns: sending thousands to millions of template messages, fast, paced, resumable, and
//! never twice by accident. One file per concept:
//!
//! - `handle`: what the caller feeds, hears from and stops (options, events, summary);
//! - `engine/`: the loop that keeps `concurrency` sends in flight (and `Campaign::start`, which
//!   spawns it: `handle` must not import the engine that imports it), its intake of input and
//!   what it records of each outcome;
//! - `breaker`: when a service that stopped answering stops the campaign;
//! - `claims`: the messages ready to send and their claims in the journal (the queue);
//! - `claim_size`: how many messages a run claims in its journal at a time;
//! - `admit`: what becomes of each message before anything is sent (journal, duplicates);
//! - `waiting`: messages another run of the campaign holds, waited for;
//! - `send`: one message through the attempt loop, with the platform's codes
//!   (`crate::platform`) acted on;
//! - `message`, `outcome`: what goes in and what comes out, per message;
//! - `keys`: idempotency keys (random, or derived from a campaign id);
//! - `senders`: the senders' directory and checks for `pace="auto"` (the platform's verdicts
//!   and tiers are `crate::platform`'s, the limits are kept by `crate::limits`);
//! - `journal/`: the record a crashed campaign resumes from (its rows, and its two stores: an
//!   SQLite file, or PostgreSQL shared by many processes);
//!   `open_journal`: opening the one a campaign was given;
//! - `plan`: the preflight (`plan()` / `dry_run=True`);
//! - `report`: the start and end log lines of a run, and its counts per outcome;
//! - `tests/`: a campaign end to end against the embedded sandbox.

mod admit;
mod breaker;
mod claim_size;
mod claims;
mod engine;
mod handle;
mod in_flight;
mod journal;
mod keys;
mod message;
mod open_journal;
mod outcome;
mod plan;
mod report;
mod send;
mod senders;
#[cfg(test)]
mod tests;
mod waiting;

pub use crate::api::Directory;
pub use crate::platform::{tier_limit, verdict, Sender, Verdict};
pub use engine::CampaignScope;
pub use handle::{Campaign, Event, Options, Stop, Stopper, Summary, Warning, DEFAULT_LEASE};
pub use in_flight::messages_in_flight;
pub use journal::{
    Claim, Claimed, Identity, JournalStore, JournalTarget, PostgresJournal, Row, SqliteJournal,
    State,
};
pub use keys::KeySource;
pub use message::{not_a_message, EncodedTemplate, Fingerprint, Input, Prepared};
pub use outcome::{MessageTrace, Outcome, Status};
pub use plan::{AccountPlan, Plan, PlanOptions, Planner, SenderPlan};
