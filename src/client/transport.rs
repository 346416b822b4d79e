//! Getting a request to the service and its answer back: the connection pool.
//!
//! Two transports, chosen when the client is made:
//! - **direct** (the usual case): HTTP/1.1 connections opened by bizmsg itself (TCP, TLS for
//!   `https://`), kept alive in an idle list per runtime. Each exchange drives its connection in
//!   its own task, which is what makes a call cost no thread hop and no extra task wake-up.
//! - **proxied**: when a proxy applies (`proxy=`, or the `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`
//!   environment), requests go through reqwest, which implements proxies (and may use HTTP/2).
//!
//! Both use the same TLS policy (`tls.rs`), the same size cap on answers, and report failures
//! in the same terms, so the attempt loop (`execute.rs`) cannot tell them apart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderValue;

use super::config::{ClientConfig, Verify};
use super::connection::{chain, read_limited, Conn, Connector, Reply};
use super::pool::PerRuntime;
use super::request::Outgoing;
use super::tls;
use crate::error::{Error, Result};

/// Below the 60 s idle limit common to servers and load balancers, so the pool drops an idle
/// connection before the server does (reusing one the server is closing makes a send's
/// outcome unknown).
const IDLE_TIMEOUT: Duration = Duration::from_secs(50);
/// Idle connections kept per runtime; more are closed when they come back.
const MAX_IDLE: usize = 512;

/// Which transport a client uses; `BIZMSG_TRANSPORT=direct|proxied` forces one (for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Direct,
    Proxied,
}

pub(crate) struct Transport {
    route: Route,
    closed: AtomicBool,
}

enum Route {
    Direct {
        connector: Connector,
        /// `host[:port]`, as HTTP/1.1 requires in every request.
        host: HeaderValue,
        idle: PerRuntime<Conn>,
    },
    Proxied {
        // Boxed: a rustls configuration is large, and most clients are direct.
        settings: Box<ProxiedSettings>,
        clients: PerRuntime<reqwest::Client>,
    },
}

struct ProxiedSettings {
    connect_timeout: Duration,
    proxy: Option<String>,
    tls: Option<rustls::ClientConfig>,
    /// `http://` to loopback: environment proxies are not used, or the token would travel in
    /// clear text to the proxy.
    local_plain_http: bool,
}

impl Transport {
    pub(crate) fn new(config: &ClientConfig, base: &reqwest::Url) -> Result<Self> {
        let connect_timeout = config
            .timeout
            .connect
            .unwrap_or(super::Timeout::DEFAULT_CONNECT);
        let https = base.scheme() == "https";
        let local_plain_http = !https && super::config::is_loopback(base);
        let kind = match forced_kind()? {
            Some(kind) => kind,
            None if config.proxy.is_some() => TransportKind::Proxied,
            None if !local_plain_http && proxy_may_apply(https) => TransportKind::Proxied,
            None => TransportKind::Direct,
        };
        let route = match kind {
            TransportKind::Direct => {
                let tls = if https {
                    Some(Arc::new(tls::config(&config.verify, tls::ALPN_HTTP1)?))
                } else {
                    None
                };
                Route::Direct {
                    connector: Connector::new(base, tls, connect_timeout)?,
                    host: host_header(base)?,
                    idle: PerRuntime::new(),
                }
            }
            TransportKind::Proxied => {
                let settings = ProxiedSettings {
                    connect_timeout,
                    proxy: config.proxy.clone(),
                    tls: if https {
                        Some(tls::config(&config.verify, tls::ALPN_H2_HTTP1)?)
                    } else {
                        None
                    },
                    local_plain_http,
                };
                // Built once now, so a bad proxy URL is refused when the client is made.
                settings.build()?;
                Route::Proxied {
                    settings: Box::new(settings),
                    clients: PerRuntime::new(),
                }
            }
        };
        if let Verify::CaBundle(path) = &config.verify {
            if !https {
                log::debug!(
                    target: "bizmsg",
                    "verify={} has no effect on plain http://",
                    path.display()
                );
            }
        }
        Ok(Transport {
            route,
            closed: AtomicBool::new(false),
        })
    }

    pub(crate) fn kind(&self) -> TransportKind {
        match self.route {
            Route::Direct { .. } => TransportKind::Direct,
            Route::Proxied { .. } => TransportKind::Proxied,
        }
    }

    /// Sends `request` (with an absolute URI) and reads its answer, at most `limit` bytes of
    /// body.
    pub(crate) async fn send(&self, request: Outgoing, limit: u64) -> Result<Reply> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        match &self.route {
            Route::Direct {
                connector,
                host,
                idle,
            } => send_direct(connector, host, idle, request, limit).await,
            Route::Proxied { settings, clients } => {
                let client = match clients.with(|list| list.first().cloned()) {
                    Some(client) => client,
                    None => {
                        let client = settings.build()?;
                        clients.with(|list| list.push(client.clone()));
                        client
                    }
                };
                // Boxed: reqwest's future is large, and would make every direct send's
                // future (which embeds this one) as large, copied at each move. (Bound first:
                // a temporary in the statement of an `.await` takes room across it.)
                let sending = Box::pin(send_proxied(&client, request, limit));
                sending.await
            }
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        match &self.route {
            Route::Direct { idle, .. } => idle.close(),
            Route::Proxied { clients, .. } => clients.close(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// `BIZMSG_TRANSPORT`: `direct` or `proxied` forces the transport (the test suite runs its
/// send-safety tests on both); unset or empty lets bizmsg choose.
fn forced_kind() -> Result<Option<TransportKind>> {
    match std::env::var("BIZMSG_TRANSPORT")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        None | Some("") => Ok(None),
        Some("direct") => Ok(Some(TransportKind::Direct)),
        Some("proxied") => Ok(Some(TransportKind::Proxied)),
        Some(other) => Err(Error::Configuration(format!(
            "BIZMSG_TRANSPORT={other:?}: use \"direct\" or \"proxied\""
        ))),
    }
}

/// Whether a proxy from the environment (or, on macOS and Windows, the system settings) may
/// apply to the service. Conservative: any proxy variable that could apply selects the
/// proxied transport, which then honours `NO_PROXY` exactly as reqwest does.
fn proxy_may_apply(https: bool) -> bool {
    if cfg!(any(target_os = "macos", target_os = "windows")) {
        return true;
    }
    let names: &[&str] = if https {
        &["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
    } else {
        &["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
    };
    names
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

fn host_header(base: &reqwest::Url) -> Result<HeaderValue> {
    let host = base
        .host_str()
        .ok_or_else(|| Error::Configuration(format!("base_url {base} has no host")))?;
    let text = match base.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    HeaderValue::from_str(&text)
        .map_err(|_| Error::Configuration(format!("{text:?} is not a valid Host header")))
}

async fn send_direct(
    connector: &Connector,
    host: &HeaderValue,
    idle: &PerRuntime<Conn>,
    mut request: Outgoing,
    limit: u64,
) -> Result<Reply> {
    loop {
        let (mut conn, reused) = match checkout(idle) {
            Some(conn) => (conn, true),
            None => {
                // Boxed: a TLS handshake's future is large, and it runs once per connection,
                // while every exchange's future would otherwise carry (and copy) its size.
                let connecting = Box::pin(connector.connect());
                (connecting.await?, false)
            }
        };
        match conn.exchange(request, host, limit).await {
            Ok((reply, reusable)) => {
                if reusable {
                    conn.idle_since = Instant::now();
                    idle.with(|list| {
                        if list.len() < MAX_IDLE {
                            list.push(conn);
                        }
                    });
                }
                return Ok(reply);
            }
            // A pooled connection that turned out closed before the request was written:
            // nothing left, so it is safe to try again on a new connection.
            Err(failed) if reused && failed.returned.is_some() => {
                log::debug!(
                    target: "bizmsg",
                    "a pooled connection was closed; sending on a new one ({})",
                    failed.error
                );
                let Some(returned) = failed.returned else {
                    return Err(failed.error);
                };
                request = returned;
            }
            Err(failed) => return Err(failed.error),
        }
    }
}

/// The most recently used idle connection that is still open.
fn checkout(idle: &PerRuntime<Conn>) -> Option<Conn> {
    idle.with(|list| {
        while let Some(mut conn) = list.pop() {
            let idle_for = conn.idle_since.elapsed();
            if idle_for < IDLE_TIMEOUT && conn.is_open(idle_for) {
                return Some(conn);
            }
        }
        None
    })
}

async fn send_proxied(client: &reqwest::Client, request: Outgoing, limit: u64) -> Result<Reply> {
    let request = reqwest::Request::try_from(request.into_http()?.map(reqwest::Body::wrap))
        .map_err(|e| Error::Internal(format!("cannot build the request: {e}")))?;
    let response = client.execute(request).await.map_err(reqwest_error)?;
    let response = http::Response::<reqwest::Body>::from(response);
    let (parts, mut body) = response.into_parts();
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
    })
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
                .map_err(|e| Error::Configuration(format!("proxy {proxy:?} is not usable: {e}")))?
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
    if error.is_connect() || refused_by_http2(&error) {
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
