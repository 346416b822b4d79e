//! Getting a request to the service and its answer back: the interface both transports
//! implement, and the choice between them.
//!
//! Two transports, chosen when the client is made:
//! - **direct** (`direct/`, the usual case): HTTP/1.1 spoken by bizmsg itself on connections it
//!   opens and pools.
//!   Through a proxy too, `http://` or `https://` (`proxy=`, or `HTTPS_PROXY`/`HTTP_PROXY`/
//!   `ALL_PROXY` and `NO_PROXY`, or the system's settings): forward requests, or a `CONNECT`
//!   tunnel for `https://` (`direct/proxy.rs`).
//! - **proxied** (`proxied/`): reqwest speaking HTTP/2 only, when `BIZMSG_TRANSPORT=proxied`
//!   forces it: it never reads an HTTP/1.1 answer. SOCKS is refused (`direct/proxy.rs`):
//!   reqwest is built without it.
//!
//! Both use the same TLS policy (`tls.rs`), the same size cap on answers, and report failures
//! in the same terms ([`Reply`], or an [`Error`] the attempt loop judges), so the attempt loop
//! (`execute.rs`) cannot tell them apart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::config::{ClientConfig, Verify};
use super::direct::{proxy_for, DirectTransport, ProxyChoice};
use super::proxied::ProxiedTransport;
use super::request::Outgoing;
use super::tls;
use crate::error::{Error, Result};

/// Which transport a client uses; `BIZMSG_TRANSPORT=direct|proxied` forces one (for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Direct,
    Proxied,
}

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

pub(crate) struct Transport {
    route: Route,
    closed: AtomicBool,
}

// Direct unboxed: it is the usual case, made once per client and never moved after.
#[allow(clippy::large_enum_variant)]
enum Route {
    Direct(DirectTransport),
    // Boxed: a rustls configuration is large, and most clients are direct.
    Proxied(Box<ProxiedTransport>),
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
            (Some(TransportKind::Proxied), ProxyChoice::Http(via)) if !https => {
                return Err(Error::Configuration(format!(
                    "BIZMSG_TRANSPORT=proxied speaks HTTP/2 only, which cannot reach the plain \
                     http:// service {} through the proxy {}: an HTTP proxy forwards \
                     HTTP/1.1 (unset BIZMSG_TRANSPORT, or use https://)",
                    crate::limits::redact_url(base.as_str()),
                    via.shown()
                )))
            }
            (Some(TransportKind::Proxied), _) => None,
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
                Route::Direct(DirectTransport::new(
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
                Route::Proxied(Box::new(ProxiedTransport::new(
                    connect_timeout,
                    config.proxy.clone(),
                    tls,
                    local_plain_http,
                )?))
            }
        };
        if let Verify::CaBundle(path) = &config.verify {
            let https_proxy = matches!(&route, Route::Direct(direct) if direct.proxy_is_https());
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
            Route::Direct(_) => TransportKind::Direct,
            Route::Proxied(_) => TransportKind::Proxied,
        }
    }

    /// Sends `request` (with an absolute URI) and reads its answer, at most `limit` bytes of
    /// body.
    pub(crate) async fn send(&self, request: Outgoing, limit: u64) -> Result<Reply> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        match &self.route {
            Route::Direct(direct) => direct.send(request, limit).await,
            Route::Proxied(proxied) => {
                // Boxed: reqwest's future is large, and would make every direct send's
                // future (which embeds this one) as large, copied at each move. (Bound first:
                // a temporary in the statement of an `.await` takes room across it.)
                let sending = Box::pin(proxied.send(request, limit));
                sending.await
            }
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        match &self.route {
            Route::Direct(direct) => direct.close(),
            Route::Proxied(proxied) => proxied.close(),
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
