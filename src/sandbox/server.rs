//! The [`Sandbox`] handle and the network side: the accept loop, one task per connection
//! (HTTP/1.1 with keep-alive, or HTTP/2 without TLS by prior knowledge, told apart by its first
//! bytes), cutting a connection on a fault, and shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::service::Service as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use super::arrival::{time_arrivals_on, ArrivalStream, Arrived};
use super::config::SandboxConfig;
use super::connection::{ConnectionNumber, CutSignal};
use super::faults::{Fault, Route};
use super::log::RecordedRequest;
use super::routes::router;
use super::state::Shared;

/// hyper's header-read timeout also bounds how long an idle keep-alive connection is kept:
/// explicit, so clients can keep their pool idle timeout below it (docs/sandbox.md).
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a new connection may take to send its first bytes (the same limit; shorter in
/// `cargo test`, which checks it).
const FIRST_BYTES_TIMEOUT: Duration = if cfg!(test) {
    Duration::from_millis(500)
} else {
    IDLE_CONNECTION_TIMEOUT
};

/// A running sandbox server. Every method may be called from any thread; dropping it shuts the
/// server down.
pub struct Sandbox {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    /// Disconnected once the accept loop closed its listener and every connection it accepted
    /// is closed (each holds a sender).
    listening: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl Sandbox {
    /// Generates the seeded data, binds, and spawns the server on the current tokio runtime.
    /// Returns once it is listening.
    pub async fn start(config: SandboxConfig) -> io::Result<Sandbox> {
        config.validate()?;
        let bind_to = SocketAddr::new(config.host, config.port);
        let shared = tokio::task::spawn_blocking(move || Shared::new(&config))
            .await
            .map_err(io::Error::other)?;
        let shared = Arc::new(shared);
        let listener = TcpListener::bind(bind_to).await?;
        time_arrivals_on(&listener);
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let (closed, listening) = std::sync::mpsc::channel();
        tokio::spawn(accept_loop(
            listener,
            router(shared.clone()),
            stopped,
            closed,
        ));
        ::log::info!("sandbox listening on http://{addr}");
        Ok(Sandbox {
            shared,
            addr,
            stop,
            listening: std::sync::Mutex::new(Some(listening)),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `(tenant, token)` in configuration order.
    pub fn tenant_tokens(&self) -> Vec<(String, String)> {
        self.shared.tokens.pairs().to_vec()
    }

    /// The token of the first tenant.
    pub fn token(&self) -> String {
        self.shared
            .tokens
            .pairs()
            .first()
            .map(|(_, token)| token.clone())
            .unwrap_or_default()
    }

    /// Every request received, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.all()
    }

    /// Every `POST /v1/chat/messages/send` request, whatever it was answered.
    pub fn sent_messages(&self) -> Vec<RecordedRequest> {
        self.shared.log.sends()
    }

    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Replaces the delay added before every response.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.set_delay(delay);
    }

    /// Counts of what the sandbox answered since it started.
    /// Per sender and recipient: what a run of many processes did (see `traffic.rs`).
    pub fn traffic(&self) -> super::TrafficReport {
        self.shared.traffic.report()
    }

    pub fn stats(&self) -> super::SandboxStats {
        self.shared.stats.snapshot()
    }

    /// Queues a fault; faults apply in the order they were injected.
    pub fn inject(&self, route: Route, fault: Fault) {
        self.shared.faults.push(route, fault);
    }

    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Queues the faults of a fault file (after those already queued); its `seed`, if any,
    /// restarts the draws of `probability` faults.
    pub fn load_faults(&self, plan: super::FaultPlan) {
        if let Some(seed) = plan.seed {
            self.shared.faults.reseed(seed);
        }
        for (route, fault) in plan.faults {
            self.shared.faults.push(route, fault);
        }
    }

    /// Stops accepting and drops every open connection. Idempotent. Called outside an async
    /// runtime, it returns once the port and every connection are closed (a connection
    /// attempt is then refused rather than accepted and reset, and a client's pooled
    /// connection is broken); inside one it cannot wait for the server's tasks.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
        if tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        let listening = crate::sync::lock(&self.listening).take();
        if let Some(listening) = listening {
            // Disconnected (an error) once the loop dropped the listener and every
            // connection task its socket.
            let _ = listening.recv_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").field("addr", &self.addr).finish()
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    // A dropped sender means the handle is gone: that is a shutdown too.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    mut stop: watch::Receiver<bool>,
    closed: std::sync::mpsc::Sender<()>,
) {
    let mut accepted_so_far = 0u64;
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    accepted_so_far += 1;
                    let number = ConnectionNumber(accepted_so_far);
                    tokio::spawn(serve_connection(
                        stream,
                        number,
                        router.clone(),
                        stop.clone(),
                        closed.clone(),
                    ));
                }
                Err(error) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    ::log::warn!("sandbox accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    drop(closed);
    ::log::info!("sandbox stopped");
}

async fn serve_connection(
    stream: TcpStream,
    number: ConnectionNumber,
    router: Router,
    mut stop: watch::Receiver<bool>,
    // Dropped with the connection: `shutdown` waits for that, so that a client's pooled
    // connection is broken once `close()` returns, not some time after.
    _open: std::sync::mpsc::Sender<()>,
) {
    // Small JSON answers: do not let Nagle hold them back.
    let _ = stream.set_nodelay(true);
    // Timed from the start, the first bytes included (`arrival.rs`).
    let (stream, arrivals) = ArrivalStream::new(stream);
    // The auto builder reads a connection's first bytes to tell HTTP/1.1 from HTTP/2, with no
    // timer of its own: a connection that does not show which it speaks in time is closed, as
    // one that sends no HTTP/1.1 head would be.
    tokio::select! {
        told = tokio::time::timeout(FIRST_BYTES_TIMEOUT, tells_its_protocol(stream.get_ref())) => {
            if !matches!(told, Ok(true)) {
                return;
            }
        }
        () = stopped(&mut stop) => return,
    }
    let cut = Arc::new(Notify::new());
    let signal = CutSignal(cut.clone());
    let service = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |mut request| {
        request.extensions_mut().insert(signal.clone());
        request.extensions_mut().insert(number);
        // hyper calls this as soon as it has read the request's head: the bytes read last.
        if let Some(arrived) = arrivals.latest() {
            request.extensions_mut().insert(Arrived(arrived));
        }
        service.call(request)
    });
    // HTTP/2 (h2c) is for the forced HTTP/2 transport (BIZMSG_TRANSPORT=http2), whose tests
    // run on the sandbox as the HTTP/1.1 transport's do. A cut drops every stream of the
    // connection: in those tests one request is in flight per connection when it matters.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_CONNECTION_TIMEOUT)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    // Leaving the select drops the connection, closing the socket mid-exchange if need be.
    tokio::select! {
        served = connection => {
            if let Err(error) = served {
                ::log::debug!("sandbox connection ended: {error}");
            }
        }
        () = cut.notified() => ::log::debug!("sandbox cut a connection (injected fault)"),
        () = stopped(&mut stop) => {}
    }
}

/// Waits until the connection's first bytes tell HTTP/1.1 from HTTP/2's preface (without
/// taking them: the server reads them again); false if the client left first.
async fn tells_its_protocol(stream: &TcpStream) -> bool {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let mut seen = [0u8; PREFACE.len()];
    loop {
        match stream.peek(&mut seen).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n >= PREFACE.len() || seen.get(..n) != PREFACE.get(..n) => return true,
            // A part of the preface (an HTTP/1.1 request differs from its second byte on): a
            // peek returns at once while those bytes are there, so wait a little for the rest.
            Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{start, TestClient};
    use std::net::{IpAddr, Ipv4Addr};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn refuses_connections(addr: SocketAddr) -> bool {
        for _ in 0..100 {
            if TcpStream::connect(addr).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn binds_loopback_and_reports_its_address() {
        let sandbox = start(SandboxConfig::default()).await;
        let addr = sandbox.local_addr();
        assert_eq!(addr.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_ne!(addr.port(), 0);
        assert_eq!(
            sandbox.base_url(),
            format!("http://127.0.0.1:{}", addr.port())
        );

        let refused = Sandbox::start(SandboxConfig {
            host: IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1)),
            ..SandboxConfig::default()
        })
        .await
        .unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);

        let taken = Sandbox::start(SandboxConfig {
            port: addr.port(),
            ..SandboxConfig::default()
        })
        .await
        .unwrap_err();
        assert_eq!(taken.kind(), io::ErrorKind::AddrInUse);
    }

    #[tokio::test]
    async fn a_connection_that_does_not_show_its_protocol_is_closed_after_a_while() {
        let sandbox = start(SandboxConfig::default()).await;
        // Nothing at all; a part of HTTP/2's preface; a lone "P", which HTTP/1.1's POST and
        // the preface share.
        for first in [&b""[..], b"PRI * HTTP/2", b"P"] {
            let mut stream = TcpStream::connect(sandbox.local_addr()).await.unwrap();
            stream.write_all(first).await.unwrap();
            let opened = std::time::Instant::now();
            let mut buffer = [0u8; 16];
            let read =
                tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await;
            // Closed without a byte of answer (reset, when the sandbox left bytes unread).
            match read.unwrap() {
                Ok(read) => assert_eq!(read, 0),
                Err(error) => assert_eq!(error.kind(), io::ErrorKind::ConnectionReset),
            }
            assert!(opened.elapsed() >= FIRST_BYTES_TIMEOUT / 2);
        }
        // A request dripped a byte at a time is served.
        let mut stream = TcpStream::connect(sandbox.local_addr()).await.unwrap();
        let request = format!(
            "GET /v1/chat/businessAccounts?pageSize=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            sandbox.token()
        );
        for byte in request.as_bytes() {
            stream.write_all(&[*byte]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut buffer = vec![0; 64 * 1024];
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(buffer[..read].starts_with(b"HTTP/1.1 200 OK"));
    }

    #[tokio::test]
    async fn serves_http2_without_tls_by_prior_knowledge() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = reqwest::Client::builder()
            .no_proxy()
            .http2_prior_knowledge()
            .build()
            .unwrap();
        let url = format!("{}/v1/chat/businessAccounts?pageSize=1", sandbox.base_url());
        for _ in 0..3 {
            let answer = client
                .get(&url)
                .bearer_auth(sandbox.token())
                .send()
                .await
                .unwrap();
            assert_eq!(answer.version(), reqwest::Version::HTTP_2);
            assert_eq!(answer.status(), 200);
        }
        // Three streams on one connection.
        let connections: std::collections::HashSet<u64> = sandbox
            .requests()
            .iter()
            .map(|request| request.connection)
            .collect();
        assert_eq!(connections.len(), 1);
    }

    #[tokio::test]
    async fn keeps_connections_alive_between_requests() {
        let sandbox = start(SandboxConfig::default()).await;
        let mut stream = TcpStream::connect(sandbox.local_addr()).await.unwrap();
        let request = format!(
            "GET /v1/chat/businessAccounts?pageSize=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            sandbox.token()
        );
        let mut seen = String::new();
        for _ in 0..2 {
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut buffer = vec![0; 64 * 1024];
            let read = stream.read(&mut buffer).await.unwrap();
            seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
        assert_eq!(seen.matches("HTTP/1.1 200 OK").count(), 2, "{seen}");
        assert_eq!(sandbox.requests().len(), 2);
    }

    #[tokio::test]
    async fn shutdown_stops_listening_and_drops_open_connections() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        assert_eq!(client.get("/v1/chat/businessAccounts").await.status, 200);
        let mut idle = TcpStream::connect(sandbox.local_addr()).await.unwrap();
        let addr = sandbox.local_addr();

        sandbox.shutdown();
        sandbox.shutdown();
        assert!(refuses_connections(addr).await);
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(2), idle.read(&mut buffer))
            .await
            .expect("an open connection is closed at shutdown");
        assert!(matches!(read, Ok(0) | Err(_)));
        assert!(client
            .http
            .get(format!("{}/v1/chat/businessAccounts", sandbox.base_url()))
            .send()
            .await
            .is_err());
    }

    #[tokio::test]
    async fn dropping_the_handle_shuts_down() {
        let sandbox = start(SandboxConfig::default()).await;
        let addr = sandbox.local_addr();
        drop(sandbox);
        assert!(refuses_connections(addr).await);
    }

    #[test]
    fn the_handle_works_from_other_threads_and_runtimes() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sandbox = runtime
            .block_on(Sandbox::start(SandboxConfig::default()))
            .unwrap();
        let sandbox = Arc::new(sandbox);
        let worker = {
            let sandbox = sandbox.clone();
            std::thread::spawn(move || {
                sandbox.inject(
                    Route::Any,
                    Fault {
                        status: Some(503),
                        ..Fault::default()
                    },
                );
                sandbox.set_delay(Duration::from_millis(1));
                sandbox.base_url()
            })
        };
        let base_url = worker.join().unwrap();
        let status = runtime.block_on(async {
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            client
                .get(format!("{base_url}/v1/chat/businessAccounts"))
                .bearer_auth(sandbox.token())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        });
        assert_eq!(status, 503);
        assert_eq!(sandbox.requests().len(), 1);
        sandbox.shutdown();
    }
}
