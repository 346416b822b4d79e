//! The HTTP/1.1 transport (the usual case): HTTP/1.1 connections opened by bizmsg itself (TCP,
//! TLS for `https://`), kept alive in an idle list per runtime. Each exchange drives its
//! connection in the caller's own task, which is what makes a call cost no thread hop and no
//! extra task wake-up.
//!
//! - `codec/`: HTTP/1.1 as bytes (the request written, the answer's head and body framed);
//! - `connector.rs`: opening a connection (TCP, TLS, through a proxy);
//! - `connection.rs`: one open connection (an exchange, is it still open?);
//! - `pool.rs`: the idle connections and which one a request takes, under what the transport
//!   learned of the server's idle limit (`../idle_limit.rs`);
//! - `proxy.rs`: an HTTP proxy in between, `http://` or `https://` (forward requests,
//!   `CONNECT` tunnels).

mod codec;
mod connection;
mod connector;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod differential;
mod pool;
mod proxy;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;

use super::idle_limit::IdleLimit;
use super::per_runtime::PerRuntime;
use super::reply::Reply;
use super::request::Outgoing;
use crate::error::{Error, Result};
use connection::{Conn, RequestHead};
use connector::Connector;

pub(crate) use codec::check_any_answer;
pub(crate) use proxy::{proxy_for, ProxyChoice, ViaProxy};

pub(crate) struct Http1Transport {
    connector: Connector,
    /// `Host` (`host[:port]`, as HTTP/1.1 requires in every request), and what a proxy needs.
    head: RequestHead,
    idle: PerRuntime<Conn>,
    /// What the pool learned of the server's idle limit (`../idle_limit.rs`).
    learning: IdleLimit,
    /// Connections being opened ahead of paced sends (`warm`).
    warming: AtomicUsize,
}

impl Http1Transport {
    pub(crate) fn new(
        base: &reqwest::Url,
        tls: Option<Arc<rustls::ClientConfig>>,
        via: Option<ViaProxy>,
        proxy_tls: Option<Arc<rustls::ClientConfig>>,
        connect_timeout: Duration,
    ) -> Result<Self> {
        let host = host_header(base)?;
        // An `http://` service through a proxy: requests in absolute form, with credentials.
        // (Through a tunnel, for `https://`, the service sees requests as if direct.)
        let forward = via.as_ref().filter(|_| tls.is_none());
        let head = RequestHead {
            absolute: forward.and_then(|_| host.to_str().ok().map(|host| format!("http://{host}"))),
            proxy_authorization: forward.and_then(|via| via.authorization.clone()),
            host,
        };
        Ok(Http1Transport {
            connector: Connector::new(base, tls, via, proxy_tls, connect_timeout)?,
            head,
            idle: PerRuntime::new(),
            learning: IdleLimit::default(),
            warming: AtomicUsize::new(0),
        })
    }

    /// Sends `request` and reads its answer, at most `limit` bytes of body.
    pub(crate) async fn send(&self, mut request: Outgoing, limit: u64) -> Result<Reply> {
        loop {
            // A request sent again because its reused connection ended without an answer
            // takes a new one: another pooled connection may be closing just the same.
            let pooled = if request.fresh_connection {
                None
            } else {
                pool::checkout(&self.idle, &self.learning)
            };
            // What a reused connection's loss teaches of the server's idle limit: only one that
            // carried an exchange before (not one opened ahead and never used) teaches.
            let mut teaches = None;
            let (mut conn, reused) = match pooled {
                Some((conn, idle)) => {
                    teaches = conn.has_answered().then_some(idle);
                    (conn, Some(idle))
                }
                None => {
                    // Boxed: a TLS handshake's future is large, and it runs once per
                    // connection, while every exchange's future would otherwise carry (and
                    // copy) its size.
                    let connecting = Box::pin(self.connector.connect());
                    (Conn::new(connecting.await?), None)
                }
            };
            match conn.exchange(request, &self.head, limit).await {
                // A forward proxy that wants credentials answers for the service, which never
                // saw the request: a configuration to fix, as for a tunnel (`proxy.rs`).
                Ok((reply, _)) if reply.status == 407 && self.head.absolute.is_some() => {
                    return Err(Error::Configuration(
                        "the proxy asks for credentials (407 Proxy Authentication Required): \
                         put them in the proxy URL, scheme://user:password@host:port, or check \
                         them"
                            .to_owned(),
                    ));
                }
                Ok((reply, reusable)) => {
                    if reusable {
                        pool::check_in(&self.idle, conn);
                    }
                    return Ok(reply);
                }
                // A pooled connection that turned out closed before the request was written:
                // nothing left, so it is safe to try again on a new connection.
                Err(failed) if reused.is_some() && failed.returned.is_some() => {
                    log::debug!(
                        target: "bizmsg",
                        "a pooled connection was closed; sending on a new one ({})",
                        failed.error
                    );
                    if let Some(idle) = teaches {
                        self.learning.closed(idle);
                    }
                    let Some(returned) = failed.returned else {
                        return Err(failed.error);
                    };
                    request = returned;
                }
                // Written, and the connection ended without a byte of answer: a reused one
                // was most likely closed by the server as the request went out.
                Err(failed) if reused.is_some() && failed.silent => {
                    if let Some(idle) = teaches {
                        self.learning.closed(idle);
                    }
                    return Err(match failed.error {
                        Error::ConnectionBroken(why) => Error::StaleConnection(why),
                        other => other,
                    });
                }
                Err(failed) => return Err(failed.error),
            }
        }
    }

    /// Whether its connections go through an `https://` proxy (whose certificate `verify`
    /// checks).
    pub(crate) fn proxy_is_https(&self) -> bool {
        self.connector.proxy_is_https()
    }

    /// Opens a connection and keeps it idle, when this runtime has none idle: for a paced send
    /// about to wait for its slot, so that opening one (TCP, TLS: a round trip or more) does
    /// not write its request late for the slot. At most `WARM_AT_ONCE` at a time: every
    /// message of a campaign's start finds the pool empty, and each opening its own would be
    /// a connection per message in flight (thousands, at a high `concurrency`), where the pace
    /// needs its rate times the service's latency. Best effort: a connection that cannot be
    /// opened now is left for the send to meet (said at debug level).
    pub(crate) async fn warm(&self) {
        if self.idle.with(|list| !list.is_empty()) {
            return;
        }
        let Some(_warming) = Warming::start(&self.warming) else {
            return;
        };
        // Boxed, as in `send`: a TLS handshake's future is large.
        match Box::pin(self.connector.connect()).await {
            Ok(stream) => pool::check_in(&self.idle, Conn::new(stream)),
            Err(error) => log::debug!(
                target: "bizmsg",
                "a connection opened ahead of a paced send failed; the send opens its own \
                 ({error})"
            ),
        }
    }

    pub(crate) fn close(&self) {
        self.idle.close();
    }
}

/// Connections opened ahead of paced sends at once, at most (`Http1Transport::warm`).
const WARM_AT_ONCE: usize = 8;

/// One connection being opened ahead (`warm`), counted until it is opened or given up.
struct Warming<'a>(&'a AtomicUsize);

impl<'a> Warming<'a> {
    /// Counts one more, unless `WARM_AT_ONCE` already are.
    fn start(warming: &'a AtomicUsize) -> Option<Self> {
        warming
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now < WARM_AT_ONCE).then_some(now + 1)
            })
            .ok()
            .map(|_| Warming(warming))
    }
}

impl Drop for Warming<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
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
