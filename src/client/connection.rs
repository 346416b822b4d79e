//! One direct HTTP/1.1 connection to the service: connecting (TCP, then TLS for `https://`),
//! and request/response exchanges on it.
//!
//! The connection is driven by whoever is using it: an exchange polls hyper's connection future
//! and the request's own future together, in one task, so a response wakes no other task and no
//! other thread. An idle connection is not driven at all; the pool checks it is still open
//! before lending it out ([`Conn::is_open`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body::Body;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::body::OutgoingBody;
use crate::error::{Error, Result};

/// A TCP stream, or one wrapped in TLS.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(stream) => stream.is_write_vectored(),
            Stream::Tls(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

type Driver = http1::Connection<TokioIo<Stream>, OutgoingBody>;

/// How to reach the service directly: its address, and TLS for `https://`.
pub(crate) struct Connector {
    host: String,
    port: u16,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    connect_timeout: Duration,
}

impl Connector {
    pub(crate) fn new(
        url: &reqwest::Url,
        tls: Option<Arc<rustls::ClientConfig>>,
        connect_timeout: Duration,
    ) -> Result<Self> {
        let host = url
            .host_str()
            .ok_or_else(|| Error::Configuration(format!("base_url {url} has no host")))?;
        // An IPv6 literal is written in brackets in URLs, without them for connect().
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| Error::Configuration(format!("base_url {url} has no port")))?;
        let tls = match tls {
            Some(config) => {
                let name = ServerName::try_from(host.clone()).map_err(|e| {
                    Error::Configuration(format!("{host:?} is not a TLS server name: {e}"))
                })?;
                Some((TlsConnector::from(config), name))
            }
            None => None,
        };
        Ok(Connector {
            host,
            port,
            tls,
            connect_timeout,
        })
    }

    /// A new connection, ready for its first request. Every failure here happened before any
    /// request byte was written: it is a [`Error::Connect`].
    pub(crate) async fn connect(&self) -> Result<Conn> {
        match tokio::time::timeout(self.connect_timeout, self.establish()).await {
            Ok(connected) => connected,
            Err(_) => Err(Error::Connect(format!(
                "no connection to {}:{} within {:.3}s",
                self.host,
                self.port,
                self.connect_timeout.as_secs_f64()
            ))),
        }
    }

    async fn establish(&self) -> Result<Conn> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Error::Connect(format!("{what} {}:{}: {e}", self.host, self.port))
        };
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| failed("cannot connect to", &e))?;
        // Requests and answers are small: Nagle would only delay them.
        tcp.set_nodelay(true)
            .map_err(|e| failed("cannot configure the connection to", &e))?;
        let stream = match &self.tls {
            None => Stream::Plain(tcp),
            Some((connector, name)) => Stream::Tls(Box::new(
                connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| failed("TLS handshake failed with", &e))?,
            )),
        };
        let (send, driver) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed("HTTP handshake failed with", &e))?;
        Ok(Conn {
            send,
            driver,
            idle_since: Instant::now(),
        })
    }
}

/// An open connection: hyper's request handle and the connection future that drives it.
pub(crate) struct Conn {
    send: http1::SendRequest<OutgoingBody>,
    driver: Driver,
    pub(crate) idle_since: Instant,
}

/// An answer as it came off the wire.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
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

/// Why an exchange failed, and the request when it certainly never left.
pub(crate) struct Failed {
    pub(crate) error: Error,
    /// hyper handed the request back: it was never written (the connection was not ready).
    pub(crate) returned: Option<http::Request<OutgoingBody>>,
}

impl Conn {
    /// Whether an idle connection can take a request: the server has not closed it. Polls the
    /// connection once, which reads a close (or a stray byte, which is a broken connection
    /// too) without waiting.
    pub(crate) fn is_open(&mut self) -> bool {
        if self.send.is_closed() || !self.send.is_ready() {
            return false;
        }
        let mut context = Context::from_waker(Waker::noop());
        Pin::new(&mut self.driver).poll(&mut context).is_pending() && !self.send.is_closed()
    }

    /// Sends `request` and reads the whole answer, body included (at most `limit` bytes of
    /// it). `Ok(reusable)` tells whether the connection may take another request.
    pub(crate) async fn exchange(
        &mut self,
        request: http::Request<OutgoingBody>,
        limit: u64,
    ) -> std::result::Result<(Reply, bool), Failed> {
        let Conn { send, driver, .. } = self;
        let mut driver_done = false;
        let response = drive(driver, &mut driver_done, send.try_send_request(request))
            .await
            .map_err(|mut failure| Failed {
                error: hyper_error(failure.error()),
                returned: failure.take_message(),
            })?;
        let (parts, mut incoming) = response.into_parts();
        let declared = http_body::Body::size_hint(&incoming).exact();
        let read = drive(
            driver,
            &mut driver_done,
            read_limited(&mut incoming, declared, limit),
        )
        .await
        .map_err(|error| Failed {
            error,
            returned: None,
        })?;
        let (body, oversized) = read;
        // A body cut short leaves unread bytes on the connection: it cannot be reused. Nor can
        // one the server is closing (`Connection: close`), which hyper reports as done.
        let reusable = oversized.is_none() && !driver_done && !send.is_closed();
        Ok((
            Reply {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
                oversized,
            },
            reusable,
        ))
    }
}

/// Polls `future` while driving the connection, so that both progress in this one task. A
/// connection that finishes (closed, or failed) is not polled again; the request's own future
/// then reports what happened to it.
async fn drive<F: Future>(driver: &mut Driver, done: &mut bool, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if !*done && Pin::new(&mut *driver).poll(cx).is_ready() {
            *done = true;
        }
        future.as_mut().poll(cx)
    })
    .await
}

/// Reads a body up to `limit` bytes. Past the limit (declared, or seen while reading a body
/// without a length), stops at once and says so; the bytes read so far are kept.
pub(crate) async fn read_limited<B>(
    body: &mut B,
    declared: Option<u64>,
    limit: u64,
) -> Result<(Bytes, Option<Oversized>)>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error,
{
    if let Some(size) = declared.filter(|size| *size > limit) {
        return Ok((
            Bytes::new(),
            Some(Oversized {
                size,
                declared: true,
            }),
        ));
    }
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut seen: u64 = 0;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            Error::ConnectionBroken(format!(
                "the answer's body could not be read: {}",
                chain(&e)
            ))
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(data.len() as u64);
        if seen > limit {
            let mut kept = joined.unwrap_or_else(|| first.map(BytesMut::from).unwrap_or_default());
            let room = usize::try_from(limit)
                .unwrap_or(usize::MAX)
                .saturating_sub(kept.len());
            kept.extend_from_slice(data.get(..room.min(data.len())).unwrap_or_default());
            return Ok((
                kept.freeze(),
                Some(Oversized {
                    size: seen,
                    declared: false,
                }),
            ));
        }
        // One frame is the common case (a small JSON answer): kept without copying.
        match (&mut first, &mut joined) {
            (None, None) => first = Some(data),
            (Some(_), None) => {
                let mut buffer = BytesMut::from(first.take().unwrap_or_default());
                buffer.extend_from_slice(&data);
                joined = Some(buffer);
            }
            (_, Some(buffer)) => buffer.extend_from_slice(&data),
        }
    }
    let body = match joined {
        Some(buffer) => buffer.freeze(),
        None => first.unwrap_or_default(),
    };
    Ok((body, None))
}

/// A hyper failure during an exchange: the connection broke, or the answer could not be read.
fn hyper_error(error: &hyper::Error) -> Error {
    if error.is_timeout() {
        Error::Timeout(chain(error))
    } else {
        Error::ConnectionBroken(chain(error))
    }
}

/// `error: cause: cause of cause`.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}
