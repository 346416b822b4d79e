//! The HTTP/2 transport (`BIZMSG_TRANSPORT=http2` forces it, or `proxied`, its former name):
//! requests go through reqwest, speaking HTTP/2 only (ALPN `h2` over TLS, prior knowledge over
//! plain `http://`), through an HTTP proxy's `CONNECT` tunnel where one applies (`proxy=`, the
//! environment, or the system's settings, honouring `NO_PROXY`).
//!
//! Never HTTP/1.1: every answer of the service in HTTP/1.1 is read by bizmsg's own codec
//! (`http1/`), with its caps on interim answers and on bytes on the wire, which hyper's
//! HTTP/1.1 client lacks (an endless run of `100 Continue`, or chunk sizes padded without end,
//! would hold it until the timeout). A server that does not speak HTTP/2 fails the call: a TLS
//! handshake refused for want of a common ALPN protocol, or a broken connection.
//! reqwest's own retries and redirects are off: every retry is the attempt loop's.
//!
//! - `idleness.rs`: how long the connection had been idle when a call went out on it, which the
//!   keep-alive race is about (as the HTTP/1.1 transport's pool, it learns the server's idle
//!   limit, `../idle_limit.rs`).

mod idleness;

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body::Body;

use super::idle_limit::IdleLimit;
use super::idle_limit::IDLE_TIMEOUT;
use super::per_runtime::PerRuntime;
use super::reply::{Oversized, Reply};
use super::request::Outgoing;
use crate::error::{Error, Result};
use idleness::{CountConnections, Idleness, InFlight};

pub(crate) struct Http2Transport {
    settings: Http2Settings,
    /// One reqwest client per runtime (its connections belong to that runtime's reactor).
    clients: PerRuntime<Pooled>,
    /// What the transport learned of the server's idle limit (`../idle_limit.rs`).
    learning: IdleLimit,
}

/// A reqwest client (its one HTTP/2 connection to the service), and how idle that is.
#[derive(Clone)]
struct Pooled {
    client: reqwest::Client,
    idleness: Arc<Idleness>,
}

impl Pooled {
    fn is(&self, other: &Pooled) -> bool {
        Arc::ptr_eq(&self.idleness, &other.idleness)
    }
}

/// A request written on a connection that woke from idleness and ended without an answer
/// within this is taken as lost to the server's idle close (the HTTP/1.1 transport's rule).
const LOST_WITHIN: Duration = Duration::from_secs(1);

struct Http2Settings {
    connect_timeout: Duration,
    proxy: Option<String>,
    tls: rustls::ClientConfig,
    /// `http://` to loopback: environment proxies are not used, or the token would travel in
    /// clear text to the proxy.
    local_plain_http: bool,
}

impl Http2Transport {
    pub(crate) fn new(
        connect_timeout: Duration,
        proxy: Option<String>,
        tls: rustls::ClientConfig,
        local_plain_http: bool,
    ) -> Result<Self> {
        let settings = Http2Settings {
            connect_timeout,
            proxy,
            tls,
            local_plain_http,
        };
        // Built once now, so a bad proxy URL is refused when the client is made.
        settings.build(None)?;
        Ok(Http2Transport {
            settings,
            clients: PerRuntime::new(),
            learning: IdleLimit::default(),
        })
    }

    pub(crate) async fn send(&self, request: Outgoing, limit: u64) -> Result<Reply> {
        // A sync call's runtime does not run between calls: an idle connection's task has not
        // seen what arrived on its socket meanwhile (a GOAWAY, the server's close), and the
        // pool would lend it for this request. Letting the runtime turn once first polls its
        // I/O driver, so the connection reads what is there and, if it is going away, is no
        // longer lent. On a shared runtime, the same turn lets a connection whose close
        // arrived just now be seen closed, where its task is this worker's.
        tokio::task::yield_now().await;
        let mut request = request;
        let mut refused = 0;
        loop {
            let pooled = self.pooled()?;
            let spare = request.again();
            let started = Instant::now();
            let mut call = pooled.idleness.begin();
            let sent = send_http2(&pooled.client, request, limit, &mut call).await;
            // Woken from idleness and failed at once: what `judged` may take for the race.
            let lost_after = call
                .woken_after()
                .filter(|_| started.elapsed() < LOST_WITHIN);
            drop(call);
            match sent {
                // Provably not processed (RFC 9113 8.7): at once, on a new stream or
                // connection, outside the retry budget (a server closing a connection every 50
                // streams, as nginx does, would otherwise spend it).
                Err(Untrusted::Refused(_)) if refused < MAX_REFUSED => {
                    refused += 1;
                    request = spare;
                }
                other => return self.judged(other, &pooled, lost_after),
            }
        }
    }

    /// The runtime's client, or a new one when there is none or the one there has been idle
    /// for longer than the server was seen to allow (its connection would be closing).
    fn pooled(&self) -> Result<Pooled> {
        let limit = self.learning.learned();
        let (current, retired) = self.clients.with(|list| {
            let too_idle = |pooled: &Pooled| {
                limit.is_some_and(|limit| {
                    pooled.idleness.idle_now().is_some_and(|idle| idle > limit)
                })
            };
            let retired = if list.first().is_some_and(too_idle) {
                std::mem::take(list)
            } else {
                Vec::new()
            };
            (list.first().cloned(), retired)
        });
        // Dropped outside the lock, as everything below.
        drop(retired);
        if let Some(pooled) = current {
            return Ok(pooled);
        }
        // Made outside the list's lock (`PerRuntime::with` must not block: `close()` takes it
        // holding the GIL).
        let idleness = Arc::new(Idleness::default());
        let made = Pooled {
            client: self
                .settings
                .build(Some(CountConnections(idleness.clone())))?,
            idleness,
        };
        // Another call of the burst may have made one meanwhile: the first one made is kept,
        // and the other dropped here, outside the lock.
        let kept = self.clients.with(|list| match list.first() {
            Some(first) => first.clone(),
            None => {
                list.push(made.clone());
                made.clone()
            }
        });
        drop(made);
        Ok(kept)
    }

    /// Drops `pooled` from the runtime's list, unless another took its place already.
    fn forget(&self, pooled: &Pooled) {
        let gone: Vec<Pooled> = self.clients.with(|list| {
            let (gone, kept) = std::mem::take(list)
                .into_iter()
                .partition(|other| other.is(pooled));
            *list = kept;
            gone
        });
        drop(gone);
    }

    /// What an HTTP/2 call's answer (or failure) means for the caller and for the pool.
    /// `lost_after`: the idleness its connection had been woken from, when it failed at once.
    fn judged(
        &self,
        sent: std::result::Result<Reply, Untrusted>,
        pooled: &Pooled,
        lost_after: Option<Duration>,
    ) -> Result<Reply> {
        match sent {
            Ok(reply) => Ok(reply),
            Err(Untrusted::Refused(error)) | Err(Untrusted::Call(error)) => Err(error),
            // A server that sends such an answer cannot be trusted with the next request:
            // hyper would keep its connection in the pool, so its client goes (the next call
            // makes a new one). Rare: hostile answers only.
            Err(Untrusted::Connection(error)) => {
                self.forget(pooled);
                Err(error)
            }
            // Written on a connection woken from idleness, which failed under it at once with
            // no answer's head: the server was most likely closing it for its idleness. The
            // transport learns the server's limit from it, and the send is `StaleConnection`
            // (sent once more with its key under `idempotent_sends`). Its client goes, so any
            // next attempt is made on a connection opened after this. (An interim answer,
            // which h2 skips unseen, would not be told apart: the HTTP/1.1 transport, which sees
            // it, does not call such a loss stale.)
            Err(Untrusted::Lost(error)) => {
                self.forget(pooled);
                Err(match (lost_after, error) {
                    (Some(idle), Error::ConnectionBroken(why)) => {
                        self.learning.closed(idle);
                        Error::StaleConnection(why)
                    }
                    (_, error) => error,
                })
            }
        }
    }

    pub(crate) fn close(&self) {
        self.clients.close();
    }
}

/// HTTP/2 refusals sent again at once within one call (see `Http2Transport::send`).
const MAX_REFUSED: usize = 4;

/// Why an HTTP/2 call failed, and whether its connection can no longer be trusted.
enum Untrusted {
    Call(Error),
    /// Refused by HTTP/2 before processing (a graceful GOAWAY, REFUSED_STREAM): a
    /// `ConnectError`, never processed.
    Refused(Error),
    /// The answer could not be trusted, nor the connection it came on.
    Connection(Error),
    /// The connection failed under the request (an I/O error of HTTP/2's connection: broken
    /// pipe, reset, end of stream) before any answer to it.
    Lost(Error),
}

impl From<Error> for Untrusted {
    fn from(error: Error) -> Self {
        Untrusted::Call(error)
    }
}

async fn send_http2(
    client: &reqwest::Client,
    request: Outgoing,
    limit: u64,
    call: &mut InFlight<'_>,
) -> std::result::Result<Reply, Untrusted> {
    let timed = request.timed;
    let request = reqwest::Request::try_from(request.into_http()?.map(reqwest::Body::wrap))
        .map_err(|e| Error::Internal(format!("cannot build the request: {e}")))?;
    let response = client.execute(request).await.map_err(|error| {
        if refused_by_http2(&error) {
            Untrusted::Refused(Error::Connect(chain(&error)))
        } else if lost_with_connection(&error) {
            Untrusted::Lost(reqwest_error(error))
        } else {
            Untrusted::Call(reqwest_error(error))
        }
    })?;
    call.answered();
    // The end of a traced attempt's span (the conventions time a client span to the head).
    let head_read = timed.then(std::time::Instant::now);
    let response = http::Response::<reqwest::Body>::from(response);
    let (parts, mut body) = response.into_parts();
    // Judged as the HTTP/1.1 transport judges them (`http1/codec/`): a status that is no
    // HTTP status (h2 carries any three digits), or a 101 no request asked for, is no answer.
    let status = parts.status.as_u16();
    if !(100..=599).contains(&status) || status == 101 {
        return Err(Untrusted::Connection(Error::ConnectionBroken(format!(
            "the answer's status {status} is not one to read (no request asked to switch \
             protocols; HTTP statuses are 100 to 599)"
        ))));
    }
    let declared = http_body::Body::size_hint(&body).exact();
    let (body, oversized) = read_limited(&mut body, declared, limit).await?;

    let text = |name| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    Ok(Reply {
        status: parts.status.as_u16(),
        request_id: text(http::HeaderName::from_static("x-request-id")),
        retry_after: text(http::header::RETRY_AFTER),
        body,
        oversized,
        head_read,
    })
}

impl Http2Settings {
    fn build(&self, counting: Option<CountConnections>) -> Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            // HTTP/2 only, over TLS (with ALPN `h2` alone, `tls::ALPN_H2`) and without it:
            // never hyper's HTTP/1.1 reader (see the module's comment).
            .http2_prior_knowledge()
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(IDLE_TIMEOUT)
            // Redirects would re-send a POST somewhere the caller did not name.
            .redirect(reqwest::redirect::Policy::none())
            // Every retry goes through our loop, so it is counted, logged and judged for send
            // safety in one place (HTTP/2 refusals included, see reqwest_error).
            .retry(reqwest::retry::never());
        // Always ours: reqwest's own would load the system's trust store on every build.
        builder = builder.tls_backend_preconfigured(self.tls.clone());
        if let Some(counting) = counting {
            builder = builder.connector_layer(counting);
        }
        if let Some(proxy) = &self.proxy {
            let proxy = reqwest::Proxy::all(proxy.as_str())
                .map_err(|e| {
                    // Never with its password.
                    let shown = crate::masking::redact_url(proxy);
                    Error::Configuration(format!("proxy {shown:?} is not usable: {e}"))
                })?
                .no_proxy(reqwest::NoProxy::from_env());
            builder = builder.proxy(proxy);
        } else if self.local_plain_http {
            builder = builder.no_proxy();
        }
        builder
            .build()
            .map_err(|e| Error::Configuration(format!("cannot build the HTTP client: {e}")))
    }
}

fn reqwest_error(error: reqwest::Error) -> Error {
    let detail = chain(&error);
    if error.is_connect() {
        Error::Connect(detail)
    } else if error.is_timeout() {
        Error::Timeout(detail)
    } else {
        Error::ConnectionBroken(detail)
    }
}

/// An HTTP/2 refusal that guarantees the request was not processed (RFC 9113 8.7): a graceful
/// GOAWAY, or the stream refused. Such a request never reached the service, like a failed
/// connect.
fn refused_by_http2(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            let graceful = h2.is_go_away() && h2.reason() == Some(h2::Reason::NO_ERROR);
            let refused = h2.is_reset() && h2.reason() == Some(h2::Reason::REFUSED_STREAM);
            return h2.is_remote() && (graceful || refused);
        }
        source = cause.source();
    }
    false
}

/// The HTTP/2 connection failed on its socket (the server closed or reset it) under a stream:
/// h2's I/O error, which hyper hands on as the `io::Error` it carries.
fn lost_with_connection(error: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let closed = |io: &std::io::Error| {
        matches!(
            io.kind(),
            ErrorKind::BrokenPipe
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::UnexpectedEof
        )
    };
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            return h2.get_io().is_some_and(closed);
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return closed(io);
        }
        source = cause.source();
    }
    false
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
