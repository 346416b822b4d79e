//! Reaching the service through an HTTP proxy, from the direct transport: the same codec, pool
//! and keep-alive guards as a direct connection, so a client behind a corporate proxy is as
//! fast and as safe as one without.
//!
//! - An `http://` service: requests go to the proxy in absolute form
//!   (`POST http://host:port/v1/... HTTP/1.1`), with `Proxy-Authorization`; the connection to
//!   the proxy is kept alive and pooled like any other.
//! - An `https://` service: a `CONNECT host:port` tunnel through the proxy, then TLS with the
//!   service inside it (the proxy sees neither the token nor the messages); the tunnel is the
//!   pooled connection.
//!
//! Which proxy applies is decided as curl and reqwest decide it (hyper-util's matcher:
//! `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, the system's settings on macOS and
//! Windows), or by `proxy=`. A proxy this transport does not speak (`https://` to the proxy,
//! SOCKS) is left to the proxied transport (reqwest).

use http::HeaderValue;
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// The largest answer head to a `CONNECT` read before giving up on the proxy.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

/// An HTTP proxy between the client and the service.
#[derive(Clone)]
pub(crate) struct ViaProxy {
    pub(super) host: String,
    pub(super) port: u16,
    /// `Proxy-Authorization` (Basic, from the proxy URL's user and password).
    pub(super) authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for ViaProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        write!(f, "ViaProxy({}:{})", self.host, self.port)
    }
}

/// What stands between the client and the service.
#[derive(Debug)]
pub(crate) enum ProxyChoice {
    /// Nothing: connect to the service.
    None,
    /// An `http://` proxy, which the direct transport speaks.
    Http(ViaProxy),
    /// A proxy only the proxied transport speaks (`https://` to the proxy, SOCKS).
    Other,
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
            check_explicit(proxy)?;
            let no_proxy = ["NO_PROXY", "no_proxy"]
                .iter()
                .find_map(|name| std::env::var(name).ok())
                .unwrap_or_default();
            Matcher::builder().all(proxy.trim()).no(no_proxy).build()
        }
        None if base.scheme() == "http" && crate::client::config::is_loopback(base) => {
            return Ok(ProxyChoice::None)
        }
        None => Matcher::from_system(),
    };
    Ok(match matcher.intercept(&target) {
        None => ProxyChoice::None,
        Some(intercept) => choice_of(&intercept),
    })
}

fn choice_of(intercept: &Intercept) -> ProxyChoice {
    let uri = intercept.uri();
    if uri.scheme_str() != Some("http") || intercept.raw_auth().is_some() {
        return ProxyChoice::Other;
    }
    let Some(host) = uri.host() else {
        return ProxyChoice::Other;
    };
    ProxyChoice::Http(ViaProxy {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port: uri.port_u16().unwrap_or(80),
        authorization: intercept.basic_auth().cloned(),
    })
}

/// `proxy=` must be a URL the client can use; never shown with its password.
fn check_explicit(proxy: &str) -> Result<()> {
    let shown = crate::limits::redact_url(proxy);
    let url = url::Url::parse(proxy.trim())
        .ok()
        .filter(url::Url::has_host)
        .ok_or_else(|| {
            Error::Configuration(format!(
                "proxy {shown:?} is not a URL: expected http://[user:password@]host:port"
            ))
        })?;
    match url.scheme() {
        "http" | "https" | "socks5" | "socks5h" => Ok(()),
        other => Err(Error::Configuration(format!(
            "proxy {shown:?} has scheme {other:?}: use http://, https://, socks5:// or \
             socks5h://"
        ))),
    }
}

/// Opens a tunnel to `host:port` through the proxy `tcp` is connected to. Every failure is a
/// failure to connect: nothing of the request left.
pub(super) async fn tunnel(
    tcp: &mut TcpStream,
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
    tcp.write_all(&request)
        .await
        .map_err(|e| failed(format!("could not be written to: {e}")))?;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    // Read a byte run at a time, never past the head: what follows is the service's TLS.
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&head) {
            Ok(httparse::Status::Complete(length)) => {
                let status = answer.code.unwrap_or(0);
                if length != head.len() {
                    return Err(failed(
                        "sent bytes after its answer to CONNECT, before the tunnel's TLS"
                            .to_owned(),
                    ));
                }
                return match status {
                    200..=299 => Ok(()),
                    407 => Err(Error::Configuration(format!(
                        "the proxy {}:{} asks for credentials (407 Proxy Authentication \
                         Required): put them in the proxy URL, http://user:password@host:port",
                        proxy.host, proxy.port
                    ))),
                    _ => Err(failed(format!(
                        "refused the tunnel: {status} {}",
                        answer.reason.unwrap_or_default()
                    ))),
                };
            }
            Ok(httparse::Status::Partial) if head.len() < MAX_CONNECT_HEAD => {}
            Ok(httparse::Status::Partial) => {
                return Err(failed(format!(
                    "answered CONNECT with a head larger than {MAX_CONNECT_HEAD} bytes"
                )))
            }
            Err(e) => return Err(failed(format!("answered CONNECT with no HTTP answer: {e}"))),
        }
        // Peeked first, so that not one byte past the head is consumed.
        let seen = tcp
            .peek(&mut chunk)
            .await
            .map_err(|e| failed(format!("could not be read from: {e}")))?;
        if seen == 0 {
            return Err(failed(
                "closed the connection before answering CONNECT".to_owned(),
            ));
        }
        let take = head_end(&head, chunk.get(..seen).unwrap_or_default());
        let mut taken = vec![0u8; take];
        tcp.read_exact(&mut taken)
            .await
            .map_err(|e| failed(format!("could not be read from: {e}")))?;
        head.extend_from_slice(&taken);
    }
}

/// How many of `more` bytes belong to a head that so far is `head`: up to and including its
/// blank line, or all of them.
fn head_end(head: &[u8], more: &[u8]) -> usize {
    let mut window: Vec<u8> = head.iter().rev().take(3).rev().copied().collect();
    for (index, byte) in more.iter().enumerate() {
        window.push(*byte);
        if window.ends_with(b"\r\n\r\n") || window.ends_with(b"\n\n") {
            return index + 1;
        }
        if window.len() > 4 {
            window.remove(0);
        }
    }
    more.len()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_head_ends_at_its_blank_line_even_across_reads() {
        assert_eq!(head_end(b"", b"HTTP/1.1 200 OK\r\n\r\n\x16\x03"), 19);
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n\r", b"\n\x16"), 1);
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n", b"Via: x\r\n"), 8);
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
        assert!(matches!(
            proxy_for(&base, Some("socks5://proxy.local:1080")),
            Ok(ProxyChoice::Other)
        ));
        assert!(matches!(
            proxy_for(&base, Some("https://proxy.local:3129")),
            Ok(ProxyChoice::Other)
        ));
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
