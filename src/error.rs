//! The one error type of the core. Each variant maps to exactly one Python exception class
//! (see `python/bizmsg/errors.py`), so the variants are named after what happened, not after
//! the layer that noticed it.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::meta::Meta;
use crate::wire::{DecodeError, SendResult};

pub type Result<T> = std::result::Result<T, Error>;

/// A non-2xx answer of the service.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status_code: u16,
    pub method: String,
    pub url: String,
    /// The decoded JSON body when the body is JSON, else the text.
    pub body: ApiBody,
    pub request_id: Option<String>,
    /// From `Retry-After` (seconds or HTTP date), when present and parseable.
    pub retry_after: Option<Duration>,
    /// A one-line explanation taken from the body (`msg`, `message`, `error.message`, ...).
    pub message: String,
}

#[derive(Debug, Clone)]
pub enum ApiBody {
    Json(Value),
    Text(String),
}

/// A send the service answered with a failed commit, and how that call went.
#[derive(Debug, Clone)]
pub struct Rejected {
    pub result: SendResult,
    pub meta: Meta,
}

/// An error raised by the caller's own code (a token callable), kept opaque so that a binding
/// can hand the original back (the core knows nothing of Python).
#[derive(Clone)]
pub struct Foreign(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl fmt::Debug for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Foreign(..)")
    }
}

/// Everything needed to reconcile a send whose outcome is unknown.
#[derive(Debug, Clone)]
pub struct UnknownOutcome {
    pub idempotency_key: String,
    pub to: String,
    pub template_name: String,
    /// The service's `X-Request-Id`, when an answer arrived.
    pub request_id: Option<String>,
    /// What made the outcome unknown (a read timeout, a connection closed mid-request, ...).
    pub cause: Box<Error>,
}

#[derive(Debug, Clone)]
pub enum Error {
    /// The client was configured wrongly (missing token, bad base URL, bad header value, ...).
    Configuration(String),
    /// The token provider failed; `cause` is what it raised.
    TokenProvider { message: String, cause: Foreign },
    /// An argument was refused before any request was made.
    Validation { field: String, message: String },
    /// The connection could not be established: the request provably never reached the service.
    Connect(String),
    /// A timeout (connect, read or the overall deadline) elapsed.
    Timeout(String),
    /// The connection was reset or closed while the request or response was in flight.
    ConnectionBroken(String),
    /// A reused connection ended (closed or reset) after the request was written and before
    /// one byte of an answer: the keep-alive race, where the server closed an idle connection
    /// as the request went out (most likely unread, but it cannot be known). Raised in
    /// Python as `ConnectionBrokenError`.
    StaleConnection(String),
    /// A send may or may not have been processed; it was not retried.
    SendOutcomeUnknown(Box<UnknownOutcome>),
    /// The service answered with a non-2xx status.
    Api(Box<ApiError>),
    /// A 2xx body that is not the JSON the operation expects.
    Decode { message: String, snippet: String },
    /// An answer's body passed `max_response_bytes`: refused from its `Content-Length`
    /// (`declared`), or cut off while reading once `size` bytes had arrived.
    ResponseTooLarge {
        limit: u64,
        size: u64,
        declared: bool,
        /// The answer's `X-Request-Id`: an answer did arrive, only its body was refused.
        request_id: Option<String>,
    },
    /// The service's paging went wrong: it answered another page than the one asked for, or
    /// the same items again, which would otherwise make a listing loop forever.
    Pagination(String),
    /// The send result reports a failed commit.
    SendRejected(Box<Rejected>),
    /// A campaign could not go on safely: its journal is unusable or belongs to another
    /// campaign, or its options are contradictory.
    Campaign(String),
    /// The store shared by every process (`shared_limits=`, a shared journal) could not be
    /// reached or refused what was asked; the message names the store, never its password.
    /// Nothing was sent unpaced or unrecorded because of it.
    SharedState(String),
    /// The client was closed before the call.
    Closed,
    /// A bug in bizmsg (a caught panic, an impossible state). Never a panic across the FFI.
    Internal(String),
}

impl Error {
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        Error::Validation {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// The HTTP status of the answer, when there was one.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Api(api) => Some(api.status_code),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Configuration(message) => write!(f, "{message}"),
            Error::TokenProvider { message, .. } => {
                write!(f, "the token provider failed: {message}")
            }
            Error::Validation { field, message } => write!(f, "invalid {field}: {message}"),
            Error::Connect(message) => write!(f, "could not connect: {message}"),
            Error::Timeout(message) => write!(f, "timed out: {message}"),
            Error::ConnectionBroken(message) => write!(f, "connection broken: {message}"),
            Error::StaleConnection(message) => write!(
                f,
                "connection broken: a reused connection ended before any answer (the server \
                 closed it as the request went out): {message}"
            ),
            Error::SendOutcomeUnknown(unknown) => write!(
                f,
                "the message to {} (template {:?}) may or may not have been sent: {}; it was not \
                 retried. It went out with Idempotency-Key {:?}: check whether it arrived before \
                 sending again (re-sending with idempotency_key= that key is safe only where the \
                 service honours the header, as the sandbox does)",
                crate::masking::mask_phone(&unknown.to),
                unknown.template_name,
                unknown.cause,
                unknown.idempotency_key
            ),
            Error::Api(api) => {
                write!(f, "{} {} returned {}", api.method, api.url, api.status_code)?;
                if !api.message.is_empty() {
                    write!(f, ": {}", api.message)?;
                }
                if let Some(id) = &api.request_id {
                    write!(f, " (request id {id})")?;
                }
                if api.status_code == 404 && api.url.contains("/v1/v1/") {
                    // The most common cause of a 404 from a working service.
                    write!(
                        f,
                        "; bizmsg adds /v1 to base_url itself: give base_url without it"
                    )?;
                }
                Ok(())
            }
            Error::Decode { message, snippet } => {
                crate::wire::decode_error::describe(f, message, snippet)
            }
            Error::ResponseTooLarge {
                limit,
                size,
                declared,
                ..
            } => {
                if *declared {
                    write!(
                        f,
                        "the answer declares a body of {size} bytes, over max_response_bytes \
                         ({limit} bytes); it was not read"
                    )
                } else {
                    write!(
                        f,
                        "the answer's body passed max_response_bytes ({limit} bytes): reading \
                         stopped after {size} bytes"
                    )
                }
            }
            Error::SendRejected(rejected) => write!(
                f,
                "the service rejected the message: code {}{}",
                rejected
                    .result
                    .code_string()
                    .unwrap_or_else(|| "<none>".to_owned()),
                rejected
                    .result
                    .msg
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
            Error::Pagination(message) => write!(f, "pagination stopped: {message}"),
            Error::Campaign(message) => write!(f, "{message}"),
            Error::SharedState(message) => write!(f, "shared state: {message}"),
            Error::Closed => write!(f, "the client has been closed"),
            Error::Internal(message) => write!(f, "internal error in bizmsg: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// A decoder's error as the crate's (`?` on a decoder's result does it).
impl From<DecodeError> for Error {
    fn from(error: DecodeError) -> Self {
        Error::Decode {
            message: error.message,
            snippet: error.snippet,
        }
    }
}
