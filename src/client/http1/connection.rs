//! One open HTTP/1.1 connection to the service (opened by `connector.rs`): request/response
//! exchanges on it, and whether it is still open between them.
//!
//! The exchange runs in the caller's task and speaks HTTP/1.1 itself (`codec/`): the request
//! goes out in one write, and a small answer usually comes in with one read, into a buffer the
//! connection keeps. Nothing else polls the socket, so an answer wakes no other task and no
//! other thread, and no per-request channel exists (hyper's client connection hands each
//! request to the connection through a channel and its answer back through a oneshot;
//! measured, that dispatch was a large share of a campaign's CPU time). An idle connection is
//! not polled at all; the pool checks it is still open before lending it out
//! ([`Conn::is_open`]).

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::Context;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::codec::{self, Chunked, Framing, Malformed};
use super::connector::Stream;
use crate::client::body::Abandoned;
use crate::client::reply::{Oversized, Reply};
use crate::client::request::Outgoing;
use crate::error::Error;

/// What every request on these connections carries besides its own lines: `Host`, and for a
/// proxy in forward mode (an `http://` service), the absolute form and `Proxy-Authorization`.
pub(crate) struct RequestHead {
    pub(crate) host: HeaderValue,
    /// `http://host:port`, put before the path: the request line a forward proxy expects.
    pub(crate) absolute: Option<String>,
    pub(crate) proxy_authorization: Option<HeaderValue>,
}

/// An open connection, between exchanges or in one.
pub(crate) struct Conn {
    stream: Stream,
    /// Bytes read and not used yet. Empty between exchanges: a byte the server sends unasked
    /// means the connection cannot be trusted with another request.
    input: BytesMut,
    /// The request being written (kept for its allocation).
    output: Vec<u8>,
    pub(crate) idle_since: Instant,
    /// Bytes read on the connection so far.
    received: u64,
    /// The server's `Keep-Alive: timeout=` of its last answer: it closes the connection once
    /// idle that long.
    pub(crate) keep_alive: Option<Duration>,
}

/// Why an exchange failed, and the request when it certainly never left.
pub(crate) struct Failed {
    pub(crate) error: Error,
    /// Not one byte of the request was written (the server had closed the connection): the
    /// request can go on another connection.
    pub(crate) returned: Option<Outgoing>,
    /// The request was written and the connection ended (closed or reset) before one byte of
    /// an answer, within `SILENT_WITHIN`: on a reused connection, the keep-alive race (the
    /// server closed it as the request went out, most likely without reading it).
    pub(crate) silent: bool,
}

/// How soon after its request was written a connection must end, without a byte of answer,
/// to count as closed by the server as the request went out (the keep-alive race): the
/// server's close is already on its way then, and arrives within a round trip.
const SILENT_WITHIN: Duration = Duration::from_secs(1);
/// Interim (1xx) answers accepted before the real one; a server that sends more is broken.
const MAX_INTERIM: usize = 16;
/// Room asked of the allocator for each read: an answer's head and a small body in one read.
const READ_CHUNK: usize = 16 * 1024;
/// The most room asked for at once, however long the body still to come.
const MAX_RESERVE: usize = 64 * READ_CHUNK;
/// A body up to this size is copied out of the read buffer, which then serves the next answer
/// without a new allocation; a larger one is split off it without copying.
const COPY_BELOW: usize = 4 * 1024;

impl Conn {
    /// A connection just opened (`connector.rs`) on `stream`.
    pub(super) fn new(stream: Stream) -> Self {
        Conn {
            stream,
            input: BytesMut::new(),
            output: Vec::new(),
            idle_since: Instant::now(),
            received: 0,
            keep_alive: None,
        }
    }

    /// Whether the connection ever brought an answer: one opened ahead of a paced send and
    /// never used has not, and its close says nothing of how long the server keeps an idle
    /// keep-alive connection (many close a connection that sent no request sooner).
    pub(crate) fn has_answered(&self) -> bool {
        self.received > 0
    }

    /// Whether an idle connection can take a request: the server has not closed it, and sent
    /// nothing unasked since its last answer. Nothing to read is the only good answer: a close
    /// or an error ends the connection, and so do bytes (an answer nobody asked for would be
    /// taken for the next request's; over TLS most likely the server's close_notify, since a
    /// session ticket comes with the first answer and is read with it).
    ///
    /// Asked at the socket on every reuse (a peek that does not wait: one system call, well
    /// under a microsecond), never only through tokio's readiness: tokio learns of bytes or a
    /// close only when its reactor runs, and a sync call's reactor does not run between calls,
    /// so a connection used moments ago could look quiet while an unsolicited answer sits in
    /// its socket.
    pub(crate) fn is_open(&mut self) -> bool {
        if !self.input.is_empty() {
            return false;
        }
        let tcp = match &self.stream {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref().0,
            Stream::Nested(tls) => tls.get_ref().0.get_ref().0,
        };
        let mut probe = [MaybeUninit::<u8>::uninit(); 1];
        let quiet = matches!(
            socket2::SockRef::from(tcp).peek(&mut probe),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock
        );
        if !quiet {
            return false;
        }
        // Over TLS, rustls may also hold decrypted bytes, or a close_notify, that the peek
        // cannot see. (Read after the peek: a read first could take part of a record into
        // rustls, where the peek would miss it.)
        if let Stream::Tls(_) | Stream::Nested(_) = self.stream {
            let mut context = Context::from_waker(std::task::Waker::noop());
            let mut probe = [0u8; 1];
            let mut probe = ReadBuf::new(&mut probe);
            return Pin::new(&mut self.stream)
                .poll_read(&mut context, &mut probe)
                .is_pending();
        }
        true
    }

    /// Sends `request` and reads the whole answer, body included (at most `limit` bytes of
    /// it). `Ok(reusable)` tells whether the connection may take another request.
    pub(crate) async fn exchange(
        &mut self,
        request: Outgoing,
        head: &RequestHead,
        limit: u64,
    ) -> std::result::Result<(Reply, bool), Failed> {
        let broken = |error: String| Failed {
            error: Error::ConnectionBroken(error),
            returned: None,
            silent: false,
        };
        let method = request.method.clone();
        let timed = request.timed;
        self.output.clear();
        let Ok(data) = request.body.claim() else {
            return Err(broken(Abandoned.to_string()));
        };
        let absolute;
        let target = match &head.absolute {
            Some(origin) => {
                absolute = format!("{origin}{}", request.target());
                absolute.as_str()
            }
            None => request.target(),
        };
        codec::encode_request(
            &mut self.output,
            &method,
            target,
            &request.headers,
            &head.host,
            head.proxy_authorization.as_ref(),
            data.len(),
        );
        self.output.extend_from_slice(data);
        if let Err((nothing_written, error)) = write_all(&mut self.stream, &self.output).await {
            let plain = matches!(self.stream, Stream::Plain(_));
            return Err(Failed {
                error: Error::ConnectionBroken(format!(
                    "the request could not be written: {error}"
                )),
                // Over TLS, a failed write may still have sent part of a record.
                returned: (nothing_written && plain).then_some(request),
                silent: false,
            });
        }
        drop(request);
        let before = self.received;
        let written = Instant::now();
        self.read_answer(&method, limit, timed)
            .await
            .map_err(|error| Failed {
                // Ended soon after the request went out: a server that read it and worked on
                // it before dying (a worker killed after 30 s) is not the keep-alive race.
                silent: self.received == before && written.elapsed() < SILENT_WITHIN,
                ..broken(error)
            })
    }

    async fn read_answer(
        &mut self,
        method: &http::Method,
        limit: u64,
        timed: bool,
    ) -> std::result::Result<(Reply, bool), String> {
        let mut received = false;
        let mut interim = 0;
        // Bytes of `input` already known to hold no blank line: a head that arrives in many
        // small reads is parsed again only once its end may be there (else a server dripping
        // bytes would make the parsing quadratic in the head's size).
        let mut scanned = 0;
        let head = loop {
            let parse = scanned == 0
                || self.input.len() >= codec::MAX_HEAD
                || codec::may_end_head(&self.input, scanned);
            let parsed = if parse {
                codec::parse_head(&self.input, method)
            } else {
                Ok(None)
            };
            match parsed {
                Ok(Some(head)) => {
                    self.input.advance(head.len);
                    scanned = 0;
                    if head.is_interim() {
                        interim += 1;
                        if interim > MAX_INTERIM {
                            return Err(format!(
                                "the server sent more than {MAX_INTERIM} interim (1xx) answers"
                            ));
                        }
                        continue;
                    }
                    break head;
                }
                Ok(None) => {
                    scanned = self.input.len();
                    if self.fill(READ_CHUNK).await? == 0 {
                        return Err(if received || !self.input.is_empty() {
                            "the connection was closed in the middle of the answer's head"
                        } else {
                            "the connection was closed before an answer arrived"
                        }
                        .to_owned());
                    }
                    received = true;
                }
                Err(Malformed(why)) => return Err(why),
            }
        };
        // The end of a traced attempt's span (the conventions time a client span to the head).
        let head_read = timed.then(Instant::now);
        let cut = || "the connection was closed in the middle of the answer's body".to_owned();
        let (body, oversized) = match head.framing {
            Framing::Empty => (Bytes::new(), None),
            Framing::Length(size) if size > limit => (
                Bytes::new(),
                Some(Oversized {
                    size,
                    declared: true,
                }),
            ),
            Framing::Length(size) => {
                let size = usize::try_from(size).map_err(|_| cut())?;
                while self.input.len() < size {
                    if self.fill(size - self.input.len()).await? == 0 {
                        return Err(cut());
                    }
                }
                (self.take(size), None)
            }
            Framing::Chunked => {
                let mut decoder = Chunked::default();
                let mut out = BytesMut::new();
                loop {
                    let done = decoder
                        .decode(&mut self.input, &mut out, limit)
                        .map_err(|Malformed(why)| why)?;
                    if done {
                        break (out.freeze(), None);
                    }
                    // The cap counts the body's bytes on the wire (padding and extensions
                    // included), not only the decoded ones.
                    if out.len() as u64 > limit {
                        break cut_at(out, limit);
                    }
                    if decoder.wire_bytes() > limit {
                        // Padding or extensions passed the cap before the body did: what was
                        // read is what the error reports.
                        let seen = decoder.wire_bytes();
                        let (body, _) = cut_at(out, limit);
                        break (
                            body,
                            Some(Oversized {
                                size: seen,
                                declared: false,
                            }),
                        );
                    }
                    if self.fill(READ_CHUNK).await? == 0 {
                        return Err(cut());
                    }
                }
            }
            Framing::UntilClose => loop {
                if self.input.len() as u64 > limit {
                    break cut_at(self.input.split(), limit);
                }
                if self.fill(READ_CHUNK).await? == 0 {
                    break (self.input.split().freeze(), None);
                }
            },
        };
        // Not reused: a body cut short (unread bytes follow), an answer the server ends by
        // closing, or bytes after the answer that nobody asked for.
        let reusable = head.keep_alive && oversized.is_none() && self.input.is_empty();
        self.keep_alive = head.keep_alive_timeout;
        Ok((
            Reply {
                status: head.status,
                request_id: head.request_id,
                retry_after: head.retry_after,
                body,
                oversized,
                head_read,
            },
            reusable,
        ))
    }

    /// Reads what is there into `input`, with room for at least `wanted` more bytes (up to
    /// [`READ_CHUNK`] at a time). `Ok(0)`: the server closed the connection.
    async fn fill(&mut self, wanted: usize) -> std::result::Result<usize, String> {
        let wanted = wanted.clamp(1, MAX_RESERVE);
        if self.input.capacity() - self.input.len() < wanted.min(READ_CHUNK) {
            self.input.reserve(wanted.max(READ_CHUNK));
        }
        let read = self
            .stream
            .read_buf(&mut self.input)
            .await
            .map_err(|e| format!("the answer could not be read: {e}"))?;
        self.received += read as u64;
        Ok(read)
    }

    /// The first `size` bytes of `input`, which holds at least that many.
    fn take(&mut self, size: usize) -> Bytes {
        if size <= COPY_BELOW {
            let body = Bytes::copy_from_slice(self.input.get(..size).unwrap_or_default());
            self.input.advance(size);
            body
        } else {
            self.input.split_to(size).freeze()
        }
    }
}

/// A body read past the cap: its first `limit` bytes, and how much was seen.
fn cut_at(mut body: BytesMut, limit: u64) -> (Bytes, Option<Oversized>) {
    let size = body.len() as u64;
    body.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    (
        body.freeze(),
        Some(Oversized {
            size,
            declared: false,
        }),
    )
}

/// Writes all of `bytes`. On failure, whether not one byte left.
async fn write_all(
    stream: &mut Stream,
    bytes: &[u8],
) -> std::result::Result<(), (bool, io::Error)> {
    let mut written = 0;
    while let Some(rest) = bytes.get(written..).filter(|rest| !rest.is_empty()) {
        match stream.write(rest).await {
            Ok(0) => return Err((written == 0, io::ErrorKind::WriteZero.into())),
            Ok(n) => written += n,
            Err(error) => return Err((written == 0, error)),
        }
    }
    stream.flush().await.map_err(|error| (false, error))
}
