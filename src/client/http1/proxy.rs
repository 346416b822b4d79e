//! Reaching the service through an HTTP proxy, from the HTTP/1.1 transport: the same codec, pool
//! and keep-alive guards as a direct connection, so a client behind a corporate proxy is as
//! fast and as safe as one without.
//!
//! - An `http://` service: requests go to the proxy in absolute form
//!   (`POST http://host:port/v1/... HTTP/1.1`), with `Proxy-Authorization`; the connection to
//!   the proxy is kept alive and pooled like any other.
//! - An `https://` service: a `CONNECT host:port` tunnel through the proxy, then TLS with the
//!   service inside it (the proxy sees neither the token nor the messages); the tunnel is the
//!   pooled connection.
//! - A proxy reached over `https://`: the same, inside TLS with the proxy, whose certificate is
//!   checked with the client's one TLS policy (`verify`, `tls.rs`), so an `https://` service is
//!   TLS inside TLS.
//!
//! Which proxy applies is decided as curl and reqwest decide it (hyper-util's matcher:
//! `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, the system's settings on macOS and
//! Windows), or by `proxy=`. SOCKS is refused (neither transport is built with it).

use http::HeaderValue;
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::client::config::without_credentials;
use crate::error::{Error, Result};

/// The largest answer head to a `CONNECT` read before giving up on the proxy.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

/// An HTTP proxy between the client and the service.
#[derive(Clone)]
pub(crate) struct ViaProxy {
    pub(super) host: String,
    pub(super) port: u16,
    /// Reached over TLS (an `https://` proxy).
    pub(crate) secure: bool,
    /// `Proxy-Authorization` (Basic, from the proxy URL's user and password).
    pub(super) authorization: Option<HeaderValue>,
}

impl ViaProxy {
    /// `scheme://host:port`: never the credentials.
    pub(crate) fn shown(&self) -> String {
        let scheme = if self.secure { "https" } else { "http" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Debug for ViaProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ViaProxy({})", self.shown())
    }
}

/// What stands between the client and the service.
#[derive(Debug)]
pub(crate) enum ProxyChoice {
    /// Nothing: connect to the service.
    None,
    /// An `http://` or `https://` proxy, which the HTTP/1.1 transport speaks.
    Http(ViaProxy),
}

/// The proxy for requests to `base`: `explicit` (`proxy=`, bypassed for the hosts in
/// `NO_PROXY`), else the environment's or the system's. A service on loopback over plain
/// `http://` (a sandbox, a local test server) never goes through the environment's proxy.
pub(crate) fn proxy_for(base: &reqwest::Url, explicit: Option<&str>) -> Result<ProxyChoice> {
    let target: http::Uri = base
        .as_str()
        .parse()
        .map_err(|e| Error::Configuration(format!("base_url {base} is not a URI: {e}")))?;
    let matcher = match explicit {
        Some(proxy) => {
            // The URL as `url` normalised it (credentials percent-encoded): the matcher parses
            // it again as an `http::Uri`, which refuses what `url` encodes, and would then
            // quietly apply no proxy at all.
            let proxy = check_explicit(proxy)?;
            let no_proxy = ["NO_PROXY", "no_proxy"]
                .iter()
                .find_map(|name| std::env::var(name).ok())
                .unwrap_or_default();
            let matcher = Matcher::builder()
                .all(proxy.as_str().to_owned())
                .no(no_proxy)
                .build();
            if matcher.intercept(&target).is_none()
                && Matcher::builder()
                    .all(proxy.as_str().to_owned())
                    .build()
                    .intercept(&target)
                    .is_none()
            {
                // Not NO_PROXY's doing: the proxy could not be read. Never go around it.
                return Err(Error::Configuration(format!(
                    "proxy {:?} cannot be used: expected http://[user:password@]host:port",
                    without_credentials(&proxy)
                )));
            }
            matcher
        }
        None if base.scheme() == "http" && crate::client::config::is_loopback(base) => {
            return Ok(ProxyChoice::None)
        }
        None => Matcher::from_system(),
    };
    match matcher.intercept(&target) {
        None => Ok(ProxyChoice::None),
        Some(intercept) => choice_of(&intercept),
    }
}

fn choice_of(intercept: &Intercept) -> Result<ProxyChoice> {
    let uri = intercept.uri();
    // (Credentials kept raw are a SOCKS proxy's: HTTP proxies' are `basic_auth`.)
    let secure = match uri.scheme_str() {
        Some("http") if intercept.raw_auth().is_none() => false,
        Some("https") if intercept.raw_auth().is_none() => true,
        _ => {
            // reqwest is built without SOCKS: it would take a SOCKS proxy for an HTTP one and
            // write the request, token included, to it in clear. (Only the scheme, host and
            // port are shown: never credentials.)
            return Err(Error::Configuration(format!(
                "the proxy {}://{}{} is not supported: use an http:// or https:// proxy",
                uri.scheme_str().unwrap_or("?"),
                uri.host().unwrap_or("?"),
                uri.port_u16().map_or_else(String::new, |p| format!(":{p}"))
            )));
        }
    };
    let Some(host) = uri.host() else {
        return Err(Error::Configuration(format!(
            "the proxy {}://… names no host: expected http://[user:password@]host:port",
            uri.scheme_str().unwrap_or("?")
        )));
    };
    Ok(ProxyChoice::Http(ViaProxy {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port: uri.port_u16().unwrap_or(if secure { 443 } else { 80 }),
        secure,
        authorization: intercept.basic_auth().cloned(),
    }))
}

/// `proxy=` must be a URL the client can use; never shown with its user or password.
fn check_explicit(proxy: &str) -> Result<url::Url> {
    let shown = crate::masking::redact_url(proxy);
    let url = url::Url::parse(proxy.trim())
        .ok()
        .filter(url::Url::has_host)
        .ok_or_else(|| {
            Error::Configuration(format!(
                "proxy {shown:?} is not a URL: expected http://[user:password@]host:port"
            ))
        })?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(Error::Configuration(format!(
            "proxy {:?} has scheme {other:?}: use an http:// or https:// proxy (SOCKS is not \
             supported)",
            without_credentials(&url)
        ))),
    }
}

/// Opens a tunnel to `host:port` through the proxy `stream` is connected to (over TCP, or TLS
/// with an `https://` proxy). Every failure is a failure to connect: nothing of the request
/// left.
pub(super) async fn tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    proxy: &ViaProxy,
    host: &str,
    port: u16,
) -> Result<()> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    if let Some(authorization) = &proxy.authorization {
        request.extend_from_slice(b"Proxy-Authorization: ");
        request.extend_from_slice(authorization.as_bytes());
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    let failed = |what: String| {
        Error::Connect(format!(
            "the proxy {}:{} {what} (tunnel to {authority})",
            proxy.host, proxy.port
        ))
    };
    stream
        .write_all(&request)
        .await
        .map_err(|e| failed(format!("could not be written to: {e}")))?;
    // Inside TLS with an https:// proxy, part of it may still be held by rustls.
    stream
        .flush()
        .await
        .map_err(|e| failed(format!("could not be written to: {e}")))?;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    // Read a run of bytes at a time, and parsed once its blank line is there (a proxy dripping
    // its head costs no re-parsing). Nothing may follow a tunnel's head: the service speaks
    // only after the client's TLS hello, so a byte past it is the proxy's, and no tunnel.
    let mut ended = false;
    let mut followed = false;
    loop {
        if !ended {
            if head.len() >= MAX_CONNECT_HEAD {
                return Err(failed(format!(
                    "answered CONNECT with a head larger than {MAX_CONNECT_HEAD} bytes"
                )));
            }
            let seen = stream
                .read(&mut chunk)
                .await
                .map_err(|e| failed(format!("could not be read from: {e}")))?;
            if seen == 0 {
                return Err(failed(
                    "closed the connection before answering CONNECT".to_owned(),
                ));
            }
            let more = chunk.get(..seen).unwrap_or_default();
            let (take, end) = head_end(&head, more);
            head.extend_from_slice(more.get(..take).unwrap_or_default());
            // A refusal's body (a 407's page) may follow; a tunnel's may not.
            followed = take < more.len();
            ended = end;
            continue;
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&head) {
            Ok(httparse::Status::Complete(length)) => {
                let status = answer.code.unwrap_or(0);
                if (200..=299).contains(&status) && (length != head.len() || followed) {
                    return Err(failed(
                        "sent bytes after its answer to CONNECT, before the tunnel's TLS"
                            .to_owned(),
                    ));
                }
                return match status {
                    200..=299 => Ok(()),
                    407 => Err(Error::Configuration(format!(
                        "the proxy {}:{} asks for credentials (407 Proxy Authentication \
                         Required): put them in the proxy URL, scheme://user:password@host:port",
                        proxy.host, proxy.port
                    ))),
                    _ => Err(failed(format!(
                        "refused the tunnel: {status} {}",
                        answer.reason.unwrap_or_default()
                    ))),
                };
            }
            // A blank line ends every head httparse can read: anything else is no answer.
            Ok(httparse::Status::Partial) => {
                return Err(failed(
                    "answered CONNECT with no HTTP answer: an incomplete head".to_owned(),
                ))
            }
            Err(e) => return Err(failed(format!("answered CONNECT with no HTTP answer: {e}"))),
        }
    }
}

/// How many of `more` bytes belong to a head that so far is `head` (up to and including its
/// blank line, or all of them), and whether the head ends there.
fn head_end(head: &[u8], more: &[u8]) -> (usize, bool) {
    let mut window: Vec<u8> = head.iter().rev().take(3).rev().copied().collect();
    for (index, byte) in more.iter().enumerate() {
        window.push(*byte);
        if window.ends_with(b"\r\n\r\n") || window.ends_with(b"\n\n") {
            return (index + 1, true);
        }
        if window.len() > 4 {
            window.remove(0);
        }
    }
    (more.len(), false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_head_ends_at_its_blank_line_even_across_reads() {
        assert_eq!(
            head_end(b"", b"HTTP/1.1 200 OK\r\n\r\n\x16\x03"),
            (19, true)
        );
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n\r", b"\n\x16"), (1, true));
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n", b"Via: x\r\n"), (8, false));
    }

    /// What `tunnel` makes of `answer`, written by the proxy in pieces of `piece` bytes.
    async fn tunnel_answered(answer: &'static [u8], piece: usize) -> Result<()> {
        let via = ViaProxy {
            host: "proxy.local".to_owned(),
            port: 3129,
            secure: true,
            authorization: None,
        };
        let (mut client, mut proxy) = tokio::io::duplex(64 * 1024);
        let proxy = tokio::spawn(async move {
            let mut request = vec![0u8; 1024];
            let read = proxy.read(&mut request).await.unwrap();
            assert!(request[..read].starts_with(b"CONNECT api.example.com:443 HTTP/1.1\r\n"));
            for piece in answer.chunks(piece) {
                proxy.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            proxy
        });
        let tunnelled = tunnel(&mut client, &via, "api.example.com", 443).await;
        drop(proxy.await.unwrap());
        tunnelled
    }

    /// Regression (the tunnel is read, not peeked, so it works inside TLS with the proxy): a
    /// refusal followed by its page is still read as its status, a tunnel followed by bytes
    /// is refused, and a head dripped byte by byte still opens the tunnel.
    #[tokio::test]
    async fn a_tunnel_is_judged_by_its_status_whatever_follows_a_refusal() {
        let refused = tunnel_answered(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 5\r\n\r\nhello",
            4096,
        )
        .await;
        assert!(
            matches!(&refused, Err(Error::Configuration(m)) if m.contains("407")),
            "{refused:?}"
        );
        let followed = tunnel_answered(b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 200", 4096).await;
        assert!(
            matches!(&followed, Err(Error::Connect(m)) if m.contains("after its answer")),
            "{followed:?}"
        );
        let dripped = tunnel_answered(b"HTTP/1.1 200 Connection established\r\n\r\n", 1).await;
        assert!(dripped.is_ok(), "{dripped:?}");
    }

    #[test]
    fn an_explicit_proxy_is_chosen_by_its_scheme_and_never_shown_with_its_password() {
        let base = reqwest::Url::parse("https://api.example.com").unwrap();
        let chosen = proxy_for(&base, Some("http://user:s3cret@proxy.local:3128"));
        let Ok(ProxyChoice::Http(via)) = chosen else {
            unreachable!("{chosen:?}")
        };
        assert_eq!((via.host.as_str(), via.port), ("proxy.local", 3128));
        assert!(via.authorization.is_some());
        assert!(!format!("{via:?}").contains("s3cret"));
        // Credentials with characters an http::Uri refuses are still the proxy's (they were
        // once dropped with the proxy, and the service reached around it).
        let chosen = proxy_for(&base, Some("http://user:p^ss wörd@proxy.local:3128"));
        assert!(
            matches!(&chosen, Ok(ProxyChoice::Http(via)) if via.authorization.is_some()),
            "{chosen:?}"
        );
        // SOCKS is refused, never taken for an HTTP proxy.
        let refused = proxy_for(&base, Some("socks5://user:s3cret@proxy.local:1080"));
        let refused = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            refused.contains("SOCKS") && !refused.contains("s3cret"),
            "{refused}"
        );
        // An https:// proxy too, reached over TLS (443 unless it says otherwise).
        let chosen = proxy_for(&base, Some("https://user:s3cret@proxy.local"));
        assert!(
            matches!(&chosen, Ok(ProxyChoice::Http(via))
                if via.secure && via.port == 443 && via.authorization.is_some()),
            "{chosen:?}"
        );
        assert!(!format!("{chosen:?}").contains("s3cret"));
        for bad in [
            "ftp://user:s3cret@proxy.local",
            "user:s3cret@proxy.local:3128",
        ] {
            let error = proxy_for(&base, Some(bad)).err().map(|e| e.to_string());
            let error = error.unwrap_or_default();
            assert!(
                error.contains("proxy") && !error.contains("s3cret"),
                "{error}"
            );
        }
    }
}
