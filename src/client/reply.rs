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
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Oversized {
    pub(crate) size: u64,
    pub(crate) declared: bool,
}
