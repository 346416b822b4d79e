//! What a decoder says of a body that is not the service's JSON: the wire's own error, so the
//! models need nothing of the crate's `Error`, which wraps it (`Error::Decode`) and carries a
//! rejected send's `SendResult` the other way.

/// A body, or a value in it, that is not what the service's JSON should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// What was wrong, and where.
    pub message: String,
    /// The body's start, cut short (never a whole body in an error).
    pub snippet: String,
}

/// A decoder's result.
pub type DecodeResult<T> = std::result::Result<T, DecodeError>;

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        describe(f, &self.message, &self.snippet)
    }
}

impl std::error::Error for DecodeError {}

/// How a decode error reads, as `DecodeError` and as the crate's `Error::Decode`.
pub(crate) fn describe(
    f: &mut std::fmt::Formatter<'_>,
    message: &str,
    snippet: &str,
) -> std::fmt::Result {
    write!(
        f,
        "unexpected response body: {message}; body starts {snippet:?}"
    )
}
