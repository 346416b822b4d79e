//! Getting a request to the service and its answer back: the interface both transports
//! implement, and the choice between them.
//!
//! Two transports, chosen when the client is made, named by protocol as hyper names its own
//! (`proto/h1`, `proto/h2`):
//! - **HTTP/1.1** (`http1/`, the usual case): HTTP/1.1 spoken by bizmsg itself on connections it
//!   opens and pools.
//!   Through a proxy too, `http://` or `https://` (`proxy=`, or `HTTPS_PROXY`/`HTTP_PROXY`/
//!   `ALL_PROXY` and `NO_PROXY`, or the system's settings): forward requests, or a `CONNECT`
//!   tunnel for `https://` (`http1/proxy.rs`).
//! - **HTTP/2** (`http2/`): reqwest speaking HTTP/2 only, when `BIZMSG_TRANSPORT=http2` forces
//!   it: it never reads an HTTP/1.1 answer. SOCKS is refused (`http1/proxy.rs`): reqwest is
//!   built without it.
//!
//! Both use the same TLS policy (`tls.rs`), the same size cap on answers, and report failures
//! in the same terms ([`Reply`](super::reply::Reply), or an [`Error`] the attempt loop judges), so the attempt loop
//! (`execute.rs`) cannot tell them apart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::config::{ClientConfig, Verify};
use super::http1::{proxy_for, Http1Transport, ProxyChoice};
use super::http2::Http2Transport;
use super::reply::Reply;
use super::request::Outgoing;
use super::tls;
use crate::error::{Error, Result};

/// Which transport a client uses; `BIZMSG_TRANSPORT=http1|http2` forces one (for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Http1,
    Http2,
}

pub(crate) struct Transport {
    route: Route,
    closed: AtomicBool,
}

// HTTP/1.1 unboxed: it is the usual case, made once per client and never moved after.
#[allow(clippy::large_enum_variant)]
enum Route {
    Http1(Http1Transport),
    // Boxed: a rustls configuration is large, and most clients speak HTTP/1.1.
    Http2(Box<Http2Transport>),
}

impl Transport {
    pub(crate) fn new(config: &ClientConfig, base: &reqwest::Url) -> Result<Self> {
        let connect_timeout = config
            .timeout
            .connect
            .unwrap_or(super::Timeout::DEFAULT_CONNECT);
        let https = base.scheme() == "https";
        let local_plain_http = !https && super::config::is_loopback(base);
        let forced = forced_kind()?;
        // Decided whatever the transport: a proxy no transport speaks is refused, and the
        // HTTP/2 transport cannot reach a plain http:// service through one.
        let proxy = proxy_for(base, config.proxy.as_deref())?;
        let via = match (forced, proxy) {
            (Some(TransportKind::Http2), ProxyChoice::Http(via)) if !https => {
                return Err(Error::Configuration(format!(
                    "BIZMSG_TRANSPORT=http2 speaks HTTP/2 only, which cannot reach the plain \
                     http:// service {} through the proxy {}: an HTTP proxy forwards \
                     HTTP/1.1 (unset BIZMSG_TRANSPORT, or use https://)",
                    crate::masking::redact_url(base.as_str()),
                    via.shown()
                )))
            }
            (Some(TransportKind::Http2), _) => None,
            (_, ProxyChoice::Http(via)) => Some(Some(via)),
            (_, ProxyChoice::None) => Some(None),
        };
        let route = match via {
            Some(via) => {
                let tls = if https {
                    Some(Arc::new(tls::config(&config.verify, tls::ALPN_HTTP1)?))
                } else {
                    None
                };
                // An https:// proxy is checked with the client's one TLS policy (`verify`), as
                // reqwest checks a proxy of an https:// service; the tunnel is HTTP/1.1.
                let proxy_tls = match &via {
                    Some(via) if via.secure => {
                        Some(Arc::new(tls::config(&config.verify, tls::ALPN_HTTP1)?))
                    }
                    _ => None,
                };
                Route::Http1(Http1Transport::new(
                    base,
                    tls,
                    via,
                    proxy_tls,
                    connect_timeout,
                )?)
            }
            None => {
                // Plain http:// to the HTTP/2 transport goes through no proxy: no TLS at all.
                let tls = if https {
                    tls::config(&config.verify, tls::ALPN_H2)?
                } else {
                    tls::never_used()?
                };
                Route::Http2(Box::new(Http2Transport::new(
                    connect_timeout,
                    config.proxy.clone(),
                    tls,
                    local_plain_http,
                )?))
            }
        };
        if let Verify::CaBundle(path) = &config.verify {
            let https_proxy = matches!(&route, Route::Http1(http1) if http1.proxy_is_https());
            if !https && !https_proxy {
                log::debug!(
                    target: "bizmsg",
                    "verify={} has no effect on plain http:// without an https:// proxy",
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
            Route::Http1(_) => TransportKind::Http1,
            Route::Http2(_) => TransportKind::Http2,
        }
    }

    /// Sends `request` (with an absolute URI) and reads its answer, at most `limit` bytes of
    /// body.
    pub(crate) async fn send(&self, request: Outgoing, limit: u64) -> Result<Reply> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        match &self.route {
            Route::Http1(http1) => http1.send(request, limit).await,
            Route::Http2(http2) => {
                // Boxed: reqwest's future is large, and would make every HTTP/1.1 send's
                // future (which embeds this one) as large, copied at each move. (Bound first:
                // a temporary in the statement of an `.await` takes room across it.)
                let sending = Box::pin(http2.send(request, limit));
                sending.await
            }
        }
    }

    /// Opens a connection ahead of a paced send when none is idle (`Http1Transport::warm`).
    /// The HTTP/2 transport's connection is reqwest's, which opens it as a request needs it.
    pub(crate) async fn warm(&self) {
        if self.is_closed() {
            return;
        }
        if let Route::Http1(http1) = &self.route {
            http1.warm().await;
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        match &self.route {
            Route::Http1(http1) => http1.close(),
            Route::Http2(http2) => http2.close(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// `BIZMSG_TRANSPORT`: `http1` or `http2` forces the transport (the test suite runs its
/// send-safety tests on both); unset or empty lets bizmsg choose. `direct` and `proxied`, the
/// transports' former names, are kept as aliases so settings that use them keep working.
fn forced_kind() -> Result<Option<TransportKind>> {
    match std::env::var("BIZMSG_TRANSPORT")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        None | Some("") => Ok(None),
        Some("http1" | "direct") => Ok(Some(TransportKind::Http1)),
        Some("http2" | "proxied") => Ok(Some(TransportKind::Http2)),
        Some(other) => Err(Error::Configuration(format!(
            "BIZMSG_TRANSPORT={other:?}: use \"http1\" or \"http2\""
        ))),
    }
}
