//! Opening a connection to the service: TCP, then TLS for `https://`, with an HTTP proxy in
//! between when there is one (`proxy.rs`: forward mode, or a `CONNECT` tunnel). What a
//! connection does once open is `connection.rs`'s (`Conn::new` takes the stream).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::proxy::{self, ViaProxy};
use crate::error::{Error, Result};

/// A TCP stream, or one wrapped in TLS (with the service, or with an `https://` proxy), or TLS
/// with the service inside TLS with an `https://` proxy.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Nested(Box<TlsStream<TlsStream<TcpStream>>>),
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
            Stream::Nested(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
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
            Stream::Nested(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
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
            Stream::Nested(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(stream) => stream.is_write_vectored(),
            Stream::Tls(stream) => stream.is_write_vectored(),
            Stream::Nested(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            Stream::Nested(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Stream::Nested(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

/// How to reach the service: its address, TLS for `https://`, and the HTTP proxy in between
/// if there is one (`proxy.rs`), with TLS for an `https://` proxy.
pub(crate) struct Connector {
    host: String,
    port: u16,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    via: Option<ViaProxy>,
    proxy_tls: Option<(TlsConnector, ServerName<'static>)>,
    connect_timeout: Duration,
}

/// TLS over `stream` with the peer `tls` names.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    tls: &(TlsConnector, ServerName<'static>),
    stream: S,
) -> io::Result<TlsStream<S>> {
    tls.0.connect(tls.1.clone(), stream).await
}

/// A TLS connector and the name its peer must prove, for `host`.
fn tls_for(
    config: Arc<rustls::ClientConfig>,
    host: &str,
) -> Result<(TlsConnector, ServerName<'static>)> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| Error::Configuration(format!("{host:?} is not a TLS server name: {e}")))?;
    Ok((TlsConnector::from(config), name))
}

impl Connector {
    /// `proxy_tls` is the TLS an `https://` proxy is reached with (`via.secure`).
    pub(crate) fn new(
        url: &reqwest::Url,
        tls: Option<Arc<rustls::ClientConfig>>,
        via: Option<ViaProxy>,
        proxy_tls: Option<Arc<rustls::ClientConfig>>,
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
        let tls = tls.map(|config| tls_for(config, &host)).transpose()?;
        let proxy_tls = match (&via, proxy_tls) {
            (Some(via), Some(config)) if via.secure => Some(tls_for(config, &via.host)?),
            (Some(via), _) if via.secure => {
                return Err(Error::Configuration(format!(
                    "the proxy {}:{} is https:// and no TLS was set up for it",
                    via.host, via.port
                )))
            }
            _ => None,
        };
        Ok(Connector {
            host,
            port,
            tls,
            via,
            proxy_tls,
            connect_timeout,
        })
    }

    /// Whether the proxy in between, if any, is reached over TLS.
    pub(crate) fn proxy_is_https(&self) -> bool {
        self.proxy_tls.is_some()
    }

    /// A new connection's stream, ready for its first request. Every failure here happened
    /// before any request byte was written: it is a [`Error::Connect`] (or, for a proxy that
    /// wants credentials, a [`Error::Configuration`]).
    pub(crate) async fn connect(&self) -> Result<Stream> {
        match tokio::time::timeout(self.connect_timeout, self.establish()).await {
            Ok(connected) => connected,
            Err(_) => Err(Error::Connect(format!(
                "no connection to {}:{}{} within {:.3}s",
                self.host,
                self.port,
                self.via.as_ref().map_or_else(String::new, |via| format!(
                    " through the proxy {}:{}",
                    via.host, via.port
                )),
                self.connect_timeout.as_secs_f64()
            ))),
        }
    }

    async fn establish(&self) -> Result<Stream> {
        let (host, port, whom) = match &self.via {
            Some(via) => (via.host.as_str(), via.port, "the proxy "),
            None => (self.host.as_str(), self.port, ""),
        };
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Error::Connect(format!("{what} {whom}{host}:{port}: {e}"))
        };
        let mut tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| failed("cannot connect to", &e))?;
        // Requests and answers are small: Nagle would only delay them.
        tcp.set_nodelay(true)
            .map_err(|e| failed("cannot configure the connection to", &e))?;
        let proxy_failed = failed;
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Error::Connect(format!("{what} {}:{}: {e}", self.host, self.port))
        };
        let stream = match (&self.proxy_tls, &self.via, &self.tls) {
            // A proxy reached over TLS: forward requests in it, or a tunnel and TLS in it.
            (Some(to_proxy), _, None) => Stream::Tls(Box::new(
                handshake(to_proxy, tcp)
                    .await
                    .map_err(|e| proxy_failed("TLS handshake failed with", &e))?,
            )),
            (Some(to_proxy), Some(via), Some(to_service)) => {
                let mut to_proxy = handshake(to_proxy, tcp)
                    .await
                    .map_err(|e| proxy_failed("TLS handshake failed with", &e))?;
                proxy::tunnel(&mut to_proxy, via, &self.host, self.port).await?;
                Stream::Nested(Box::new(
                    handshake(to_service, to_proxy)
                        .await
                        .map_err(|e| failed("TLS handshake failed with", &e))?,
                ))
            }
            (Some(_), None, Some(_)) => {
                return Err(Error::Connect(
                    "TLS with a proxy that is not there: a bug in bizmsg".to_owned(),
                ))
            }
            (None, _, None) => Stream::Plain(tcp),
            (None, via, Some(to_service)) => {
                if let Some(via) = via {
                    proxy::tunnel(&mut tcp, via, &self.host, self.port).await?;
                }
                Stream::Tls(Box::new(
                    handshake(to_service, tcp)
                        .await
                        .map_err(|e| failed("TLS handshake failed with", &e))?,
                ))
            }
        };
        Ok(stream)
    }
}
