//! How a campaign message's sending ended: what `send_one` turns into the message's outcome.

use crate::campaign::journal::Unfenced;
use crate::client::Response;
use crate::error::{Error, Result};
use crate::wire::SendResult;

/// How a message's sending ended.
pub(super) struct Attempted {
    pub(super) result: Result<Response<SendResult>>,
    /// The key it went out with (or would have).
    pub(super) key: String,
    /// Why the campaign must stop, when the platform's answer asks it to.
    pub(super) stop: Option<String>,
    /// The shared store failed: the campaign stops as it does for a journal failure.
    pub(super) failure: Option<Error>,
    /// The campaign stopped before the message was sent: it is skipped.
    pub(super) stopped_before_sending: bool,
    /// Not sent: this run no longer holds its claims.
    pub(super) claims_lost: Option<Unfenced>,
}

impl Attempted {
    pub(super) fn done(
        result: Result<Response<SendResult>>,
        key: String,
        stop: Option<String>,
    ) -> Self {
        Attempted {
            result,
            key,
            stop,
            failure: None,
            stopped_before_sending: false,
            claims_lost: None,
        }
    }

    pub(super) fn stopped_before_sending(key: String) -> Self {
        Attempted {
            result: Err(Error::Campaign("not sent: the campaign stopped".to_owned())),
            key,
            stop: None,
            failure: None,
            stopped_before_sending: true,
            claims_lost: None,
        }
    }

    /// Never sent: why (the store failed, or the campaign stopped while it waited).
    pub(super) fn not_sent(error: Error, key: String) -> Self {
        let failure = matches!(error, Error::SharedState(_)).then(|| error.clone());
        Attempted {
            result: Err(error),
            key,
            stop: None,
            failure,
            stopped_before_sending: false,
            claims_lost: None,
        }
    }

    /// Never sent: this run no longer holds its claim on the message.
    pub(super) fn lost(lost: Unfenced, key: String) -> Self {
        Attempted {
            result: Err(Error::SharedState(lost.to_string())),
            key,
            stop: None,
            failure: None,
            stopped_before_sending: false,
            claims_lost: Some(lost),
        }
    }

    /// Sent (or, for a retry the store could not pace, perhaps sent), with `result`, but the
    /// store failed as the platform's answer was acted on.
    pub(super) fn failed(
        result: Result<Response<SendResult>>,
        key: String,
        failure: Error,
    ) -> Self {
        Attempted {
            result,
            key,
            stop: None,
            failure: Some(failure),
            stopped_before_sending: false,
            claims_lost: None,
        }
    }
}
