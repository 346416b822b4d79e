//! An answer as both transports hand it to the attempt loop. In a file of its own, below the
//! transports and below the choice between them (`transport.rs`, which imports both): a
//! transport that named its answer from there would import what imports it.

use bytes::Bytes;

/// An answer as it came off the wire.
pub(crate) struct Reply {
    pub(crate) status: u16,
    /// `X-Request-Id`, the service's id of the request.
    pub(crate) request_id: Option<String>,
    /// `Retry-After`, unparsed.
    pub(crate) retry_after: Option<String>,
    /// The body, or its first `limit` bytes when it was larger (see `oversized`).
    pub(crate) body: Bytes,
    /// The body's size when it passed the cap: declared (`Content-Length`, nothing read) or
    /// seen so far (reading stopped there).
    pub(crate) oversized: Option<Oversized>,
    /// When the answer's head was read, for a traced attempt (`Outgoing::timed`): the end of
    /// its CLIENT span, as the HTTP conventions time it.
    pub(crate) head_read: Option<std::time::Instant>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Oversized {
    pub(crate) size: u64,
    pub(crate) declared: bool,
}
