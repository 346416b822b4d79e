//! The Python face of campaigns (`crate::campaign`): the arguments of `send_many` and `plan`
//! read into the engine's options (`options`), a running campaign the Python driver feeds and
//! polls (`run`), input items converted to messages (`input`), outcomes as `SendOutcome`
//! objects (`outcome`), and the preflight (`planner`).

mod input;
pub(crate) mod options;
mod outcome;
mod planner;
mod run;

pub(crate) use outcome::{restore_send_outcome, SendOutcome};
pub(crate) use planner::CampaignPlanner;
pub(crate) use run::CampaignRun;
