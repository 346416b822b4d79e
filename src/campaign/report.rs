//! What a campaign logs of itself: one INFO line when it starts and one when it ends, each with
//! its facts as the record's fields (`campaign_id`, `run_id`, the counts per outcome, the
//! duration, the stop reason), so a log pipeline reads a run without parsing text. The counts
//! are kept here, once per batch of outcomes, never per message on the caller's side.

use std::time::Instant;

use super::handle::Options;
use super::outcome::{Outcome, Status};

/// The outcomes of one run, by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub sent: u64,
    pub rejected: u64,
    pub unknown: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl Tally {
    pub fn count<P>(&mut self, outcomes: &[Outcome<P>]) {
        for outcome in outcomes {
            let counter = match outcome.status {
                Status::Sent => &mut self.sent,
                Status::Rejected => &mut self.rejected,
                Status::Unknown => &mut self.unknown,
                Status::Failed => &mut self.failed,
                Status::Skipped => &mut self.skipped,
            };
            *counter += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.sent + self.rejected + self.unknown + self.failed + self.skipped
    }
}

/// How a campaign is paced, in one word for its log lines and span.
pub fn pace_of(options: &Options) -> &'static str {
    match (options.pace_auto, options.rate_limit.is_some()) {
        (true, _) => "auto",
        (false, true) => "rate_limit",
        (false, false) => "unpaced",
    }
}

/// A run of a campaign, as its log lines name it: the campaign's id (none without a journal or
/// `campaign_id=`, known once the journal is open) and this run's own id, which joins its start
/// line to its end line; and the settings its start line shows.
pub struct Run {
    pub campaign_id: Option<String>,
    pub run_id: String,
    pub started: Instant,
    concurrency: usize,
    rate_limit: Option<f64>,
    pace: &'static str,
    journal: bool,
}

impl Run {
    pub fn new(options: &Options) -> Self {
        Run {
            campaign_id: options.campaign_id.clone(),
            run_id: uuid::Uuid::new_v4().to_string(),
            started: Instant::now(),
            concurrency: options.concurrency,
            rate_limit: options.rate_limit,
            pace: pace_of(options),
            journal: options.journal.is_some(),
        }
    }

    pub fn log_start(&self) {
        log::info!(
            target: "bizmsg",
            campaign_id = self.campaign_id.as_deref(),
            run_id = self.run_id.as_str(),
            concurrency = self.concurrency,
            rate_limit = self.rate_limit,
            pace = self.pace,
            journal = self.journal;
            "campaign {} started (run {}, concurrency {}, pace {})",
            self.campaign_id.as_deref().unwrap_or("-"),
            self.run_id,
            self.concurrency,
            self.pace,
        );
    }

    /// `stop_reason`: why it stopped before its input ended (none: it ran to the end);
    /// `error`: the campaign's own failure, shown as the logs show errors.
    pub fn log_end(&self, tally: &Tally, stop_reason: Option<&str>, error: Option<&str>) {
        let duration_seconds = self.started.elapsed().as_secs_f64();
        let stop_reason = stop_reason.map(crate::masking::mask_phone_numbers);
        let error = error.map(crate::masking::mask_phone_numbers);
        log::info!(
            target: "bizmsg",
            campaign_id = self.campaign_id.as_deref(),
            run_id = self.run_id.as_str(),
            total = tally.total(),
            sent = tally.sent,
            rejected = tally.rejected,
            unknown = tally.unknown,
            failed = tally.failed,
            skipped = tally.skipped,
            duration_seconds = duration_seconds,
            stop_reason = stop_reason.as_deref(),
            error = error.as_deref();
            "campaign {} ended in {duration_seconds:.3}s (run {}): {} sent, {} rejected, {} unknown, \
             {} failed, {} skipped{}",
            self.campaign_id.as_deref().unwrap_or("-"),
            self.run_id,
            tally.sent,
            tally.rejected,
            tally.unknown,
            tally.failed,
            tally.skipped,
            stop_reason.as_deref().map(|reason| format!("; stopped: {reason}")).unwrap_or_default(),
        );
    }
}
