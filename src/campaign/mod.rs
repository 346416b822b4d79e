//! Campaigns: sending thousands to millions of template messages, fast, paced, resumable, and
//! never twice by accident. One file per concept:
//!
//! - `engine`: the concurrent loop and how the caller feeds it and hears from it;
//! - `message`, `outcome`: what goes in and what comes out, per message;
//! - `keys`: idempotency keys (random, or derived from a campaign id);
//! - `pacing`: rate limiters; `senders`: sender checks, pace and tiers for `pace="auto"`;
//! - `platform`: what the platform's error codes ask a bulk sender to do;
//! - `journal`: the SQLite record a crashed campaign resumes from;
//! - `plan`: the preflight (`plan()` / `dry_run=True`).

mod engine;
mod journal;
mod keys;
mod message;
mod outcome;
mod pacing;
mod plan;
mod platform;
mod senders;

pub use engine::{Campaign, Event, Options, Stop, Stopper, Summary, Warning};
pub use keys::KeySource;
pub use message::{not_a_message, EncodedTemplate, Fingerprint, Input, Prepared};
pub use outcome::{Outcome, Status};
pub use plan::{AccountPlan, Plan, PlanOptions, Planner, SenderPlan};
pub use senders::{tier_limit, Directory};
