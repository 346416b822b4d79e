//! The proxied transport: requests go through reqwest, which implements HTTP(S) proxies (from
//! `proxy=`, the environment, or the system's settings, honouring `NO_PROXY`) and may speak
//! HTTP/2. reqwest's own retries and redirects are off: every retry is the attempt loop's.

use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::Body;

use super::direct::IDLE_TIMEOUT;
use super::per_runtime::PerRuntime;
use super::request::Outgoing;
use super::transport::{Oversized, Reply};
use crate::error::{Error, Result};

pub(crate) struct ProxiedTransport {
    settings: ProxiedSettings,
    /// One reqwest client per runtime (its connections belong to that runtime's reactor).
    clients: PerRuntime<reqwest::Client>,
}

struct ProxiedSettings {
    connect_timeout: Duration,
    proxy: Option<String>,
    tls: Option<rustls::ClientConfig>,
    /// `http://` to loopback: environment proxies are not used, or the token would travel in
    /// clear text to the proxy.
    local_plain_http: bool,
}

impl ProxiedTransport {
    pub(crate) fn new(
        connect_timeout: Duration,
        proxy: Option<String>,
        tls: Option<rustls::ClientConfig>,
        local_plain_http: bool,
    ) -> Result<Self> {
        let settings = ProxiedSettings {
            connect_timeout,
            proxy,
            tls,
            local_plain_http,
        };
        // Built once now, so a bad proxy URL is refused when the client is made.
        settings.build()?;
        Ok(ProxiedTransport {
            settings,
            clients: PerRuntime::new(),
        })
    }

    pub(crate) async fn send(&self, request: Outgoing, limit: u64) -> Result<Reply> {
        // A sync call's runtime does not run between calls: the idle connections' tasks have
        // not seen what arrived on their sockets meanwhile, and would take an answer nobody
        // asked for (or the server's close) for this request's. Letting the runtime turn once
        // first polls its I/O driver, so each idle connection reads what is there, and one
        // that received anything is closed (hyper refuses bytes on an idle connection) before
        // the pool lends it. On a shared runtime, the same turn lets a connection whose close
        // arrived just now be seen closed, where its task is this worker's.
        tokio::task::yield_now().await;
        let mut request = request;
        let mut refused = 0;
        loop {
            let client = match self.clients.with(|list| list.first().cloned()) {
                Some(client) => client,
                None => {
                    let client = self.settings.build()?;
                    self.clients.with(|list| list.push(client.clone()));
                    client
                }
            };
            let spare = request.again();
            match send_proxied(&client, request, limit).await {
                // Provably not processed (RFC 9113 8.7): at once, on a new stream or
                // connection, outside the retry budget (a server closing a connection every 50
                // streams, as nginx does, would otherwise spend it).
                Err(Untrusted::Refused(_)) if refused < MAX_REFUSED => {
                    refused += 1;
                    request = spare;
                }
                other => return self.judged(other),
            }
        }
    }

    /// What a proxied call's answer (or failure) means for the caller and for the pool.
    fn judged(&self, sent: std::result::Result<(Reply, bool), Untrusted>) -> Result<Reply> {
        match sent {
            Err(Untrusted::Refused(error)) => Err(error),
            Err(Untrusted::Connection(error)) => {
                // Its connection is out of step or may be: hyper would keep it in the pool,
                // so the pool goes (the next call makes a new one). Rare: hostile answers only.
                self.clients.with(Vec::clear);
                Err(error)
            }
            Err(Untrusted::Call(error)) => Err(error),
            Ok((reply, reusable)) => {
                if !reusable {
                    self.clients.with(Vec::clear);
                }
                Ok(reply)
            }
        }
    }

    pub(crate) fn close(&self) {
        self.clients.close();
    }
}

/// HTTP/2 refusals sent again at once within one call (see `ProxiedTransport::send`).
const MAX_REFUSED: usize = 4;

/// Why a proxied call failed, and whether its connection can no longer be trusted.
enum Untrusted {
    Call(Error),
    /// Refused by HTTP/2 before processing (a graceful GOAWAY, REFUSED_STREAM): a
    /// `ConnectError`, never processed.
    Refused(Error),
    /// The answer could not be trusted, nor the connection it came on.
    Connection(Error),
}

impl From<Error> for Untrusted {
    fn from(error: Error) -> Self {
        Untrusted::Call(error)
    }
}

/// The answer, and whether its connection may be reused.
async fn send_proxied(
    client: &reqwest::Client,
    request: Outgoing,
    limit: u64,
) -> std::result::Result<(Reply, bool), Untrusted> {
    let request = reqwest::Request::try_from(request.into_http()?.map(reqwest::Body::wrap))
        .map_err(|e| Error::Internal(format!("cannot build the request: {e}")))?;
    let response = client.execute(request).await.map_err(|error| {
        if refused_by_http2(&error) {
            Untrusted::Refused(Error::Connect(chain(&error)))
        } else {
            Untrusted::Call(reqwest_error(error))
        }
    })?;
    let response = http::Response::<reqwest::Body>::from(response);
    let (parts, mut body) = response.into_parts();
    // Judged as the direct transport judges them (`direct/codec.rs`): a status that is no
    // HTTP status, or a 101 no request asked for, is no answer; an HTTP/1.1 answer framed
    // by both Content-Length and Transfer-Encoding leaves its connection out of step.
    let status = parts.status.as_u16();
    if !(100..=599).contains(&status) || status == 101 {
        return Err(Untrusted::Connection(Error::ConnectionBroken(format!(
            "the answer's status {status} is not one to read (no request asked to switch \
             protocols; HTTP statuses are 100 to 599)"
        ))));
    }
    let both_framings = parts.headers.contains_key(http::header::CONTENT_LENGTH)
        && parts.headers.contains_key(http::header::TRANSFER_ENCODING);
    let declared = http_body::Body::size_hint(&body).exact();
    let (body, oversized) = read_limited(&mut body, declared, limit).await?;

    let text = |name| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let reply = Reply {
        status: parts.status.as_u16(),
        request_id: text(http::HeaderName::from_static("x-request-id")),
        retry_after: text(http::header::RETRY_AFTER),
        body,
        oversized,
    };
    // The answer stands (Transfer-Encoding wins, RFC 9112 6.3); only its connection is not
    // reused, as a direct one would not be.
    Ok((reply, !both_framings))
}

impl ProxiedSettings {
    fn build(&self) -> Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(IDLE_TIMEOUT)
            // Redirects would re-send a POST somewhere the caller did not name.
            .redirect(reqwest::redirect::Policy::none())
            // Every retry goes through our loop, so it is counted, logged and judged for send
            // safety in one place (HTTP/2 refusals included, see reqwest_error).
            .retry(reqwest::retry::never());
        if let Some(tls) = &self.tls {
            builder = builder.tls_backend_preconfigured(tls.clone());
        }
        if let Some(proxy) = &self.proxy {
            let proxy = reqwest::Proxy::all(proxy.as_str())
                .map_err(|e| {
                    // Never with its password.
                    let shown = crate::limits::redact_url(proxy);
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
