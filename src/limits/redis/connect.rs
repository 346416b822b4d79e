//! Opening connections to the store (on the background runtime): TCP, TLS with the client's
//! own rustls configuration for `rediss://`, then AUTH and SELECT by redis-rs; and why an
//! attempt failed (`Failure`), which `link.rs` judges for another attempt.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ::redis::aio::{MultiplexedConnection, PubSub, PubSubStream};
use ::redis::{AsyncConnectionConfig, ErrorKind, RedisConnectionInfo, RedisError, ServerErrorKind};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::target::Target;

/// How long one answer may take before the connection is given up for a new one. Scripts
/// finish in microseconds to milliseconds; a server that takes this long is hung or gone.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection attempt (TCP, TLS, AUTH/SELECT) may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection, and whether its driver still runs.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) connection: MultiplexedConnection,
    pub(super) alive: Arc<AtomicBool>,
}

/// A multiplexed connection to `target`; its driver is spawned on the current (background)
/// runtime.
pub(super) async fn connect(
    target: &Target,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Live, Failure> {
    let stream = open(target, tls).await?;
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
    let (connection, driver) =
        MultiplexedConnection::new_with_config(&info(target), stream, config).await?;
    let alive = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&alive);
    tokio::spawn(async move {
        driver.await;
        flag.store(false, Ordering::Release);
    });
    Ok(Live { connection, alive })
}

/// The messages of `channel`, on a connection of their own.
pub(super) async fn subscribe(
    target: &Target,
    tls: Option<Arc<rustls::ClientConfig>>,
    channel: &str,
) -> Result<PubSubStream, Failure> {
    let stream = open(target, tls).await?;
    let mut pubsub = PubSub::new(&info(target), stream).await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub.into_on_message())
}

fn info(target: &Target) -> RedisConnectionInfo {
    let mut info = RedisConnectionInfo::default().set_db(target.db);
    if let Some(username) = &target.username {
        info = info.set_username(username);
    }
    if let Some(password) = &target.password {
        info = info.set_password(password);
    }
    info
}

async fn open(target: &Target, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Stream, Failure> {
    let host = target.host_name();
    let tcp = TcpStream::connect((host.as_str(), target.port))
        .await
        .map_err(Failure::Connect)?;
    let _ = tcp.set_nodelay(true);
    if !target.tls {
        return Ok(Stream::Plain(tcp));
    }
    let tls = tls.ok_or_else(|| {
        Failure::Background("rediss:// needs a TLS configuration, none was given".to_owned())
    })?;
    let name = rustls::pki_types::ServerName::try_from(host)
        .map_err(|e| Failure::Connect(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(Failure::Connect)?;
    Ok(Stream::Tls(Box::new(stream)))
}

/// A plain or TLS connection (both Unpin).
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Tls(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Stream::Tls(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Stream::Tls(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(stream) => stream.is_write_vectored(),
            Stream::Tls(stream) => stream.is_write_vectored(),
        }
    }
}

/// Why an attempt failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The server answered with an error, or the connection failed.
    Redis(RedisError),
    /// TCP or TLS failed before Redis was reached.
    Connect(std::io::Error),
    /// No answer in time.
    TimedOut(&'static str),
    /// The background runtime could not be used.
    Background(String),
}

impl Failure {
    /// Whether another attempt (on a new connection) may succeed: the store is away, not
    /// misconfigured.
    pub(super) fn retryable(&self) -> bool {
        match self {
            Failure::Connect(_) | Failure::TimedOut(_) => true,
            Failure::Background(_) => false,
            Failure::Redis(error) => match error.kind() {
                ErrorKind::Io | ErrorKind::Parse => true,
                ErrorKind::Server(kind) => {
                    matches!(
                        kind,
                        ServerErrorKind::BusyLoading
                            | ServerErrorKind::TryAgain
                            | ServerErrorKind::ClusterDown
                            | ServerErrorKind::MasterDown
                            | ServerErrorKind::ReadOnly
                    )
                }
                // A script still running on the server (`BUSY`).
                ErrorKind::Extension => error.code() == Some("BUSY"),
                _ => false,
            },
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Redis(error) => write!(f, "{error}"),
            Failure::Connect(error) => write!(f, "cannot connect: {error}"),
            Failure::TimedOut(what) => write!(f, "{what} timed out"),
            Failure::Background(why) => write!(f, "{why}"),
        }
    }
}

impl From<RedisError> for Failure {
    fn from(error: RedisError) -> Self {
        Failure::Redis(error)
    }
}
