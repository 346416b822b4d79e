//! The connection to Redis of one process, and what is done while it is lost.
//!
//! A connection's socket is only ever woken by the reactor of the runtime that opened it, and
//! bizmsg's callers run on many runtimes (one current-thread runtime per thread making sync
//! calls, one multi-thread runtime for async ones). So the connection and the task that
//! drives it live on a small runtime of their own, on one thread named `bizmsg-redis`, and
//! callers talk to it through redis-rs's multiplexed handle, whose requests and answers are
//! channel messages any runtime can await. Requests from every caller share the one socket
//! (pipelined by the driver).
//!
//! redis-rs's multiplexed connection never reconnects by itself, and its connection manager
//! retries a fixed number of times then fails; what the limits need is different: wait while
//! the store is away (nothing may be sent unpaced), retrying with backoff, and give up only
//! past the bound the URL sets (`wait=`). So the connection is replaced here: after any
//! failure that may be the connection's (I/O, a response timeout, a server still loading or
//! read-only after a failover), it is dropped and the next attempt connects anew.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::redis::aio::MultiplexedConnection;
use ::redis::RedisError;
use futures::StreamExt;
use tokio::sync::oneshot;

use super::connect::{connect, subscribe, Failure, Live, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use super::target::Target;
use crate::error::{Error, Result};
use crate::sync::lock;

/// Backoff between attempts while the store is unreachable.
const FIRST_RETRY: Duration = Duration::from_millis(50);
const LONGEST_RETRY: Duration = Duration::from_secs(2);

/// The runtime the connections of one process live on: one thread, `bizmsg-redis`, ended
/// when this is dropped.
struct Background {
    handle: tokio::runtime::Handle,
    /// Dropped: the thread's `block_on` returns and the runtime is dropped on its own thread.
    _stop: oneshot::Sender<()>,
}

impl Background {
    fn start() -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("bizmsg-redis")
            .build()
            .map_err(|e| {
                Error::Internal(format!("cannot start the shared limits' runtime: {e}"))
            })?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("bizmsg-redis".to_owned())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(|e| Error::Internal(format!("cannot start the shared limits' thread: {e}")))?;
        Ok(Background {
            handle,
            _stop: stop,
        })
    }
}

/// The connection of one process to the store.
pub(super) struct Link {
    target: Arc<Target>,
    tls: Option<Arc<rustls::ClientConfig>>,
    background: Background,
    live: Mutex<Option<Live>>,
    /// One connection attempt at a time; the others wait for its result.
    connecting: tokio::sync::Mutex<()>,
    /// An outage is logged once, when it starts, and once when it ends.
    failing: AtomicBool,
}

impl Drop for Link {
    fn drop(&mut self) {
        // A store dropped while unreachable is no longer an outage going on.
        if *self.failing.get_mut() {
            crate::limits::outages::ended();
        }
    }
}

impl Link {
    pub(super) fn new(target: Arc<Target>, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Self> {
        Ok(Link {
            target,
            tls,
            background: Background::start()?,
            live: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            failing: AtomicBool::new(false),
        })
    }

    /// The error for a store that failed with `failure`.
    fn error(&self, failure: &Failure) -> Error {
        Error::SharedState(format!("{}: {failure}", self.target.shown))
    }

    /// Runs `op` once on a connection (made if there is none): one attempt, no retry.
    pub(super) async fn once<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = std::result::Result<T, RedisError>>,
    {
        let attempt = async {
            let live = self.connection().await?;
            let result = op(live.connection.clone()).await;
            if let Err(error) = &result {
                if Failure::Redis(error.clone()).retryable() {
                    self.forget(&live);
                }
            }
            Ok::<_, Failure>(result?)
        };
        let limit = self.target.wait.min(CONNECT_TIMEOUT + RESPONSE_TIMEOUT);
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(failure)) => Err(self.error(&failure)),
            Err(_) => Err(self.error(&Failure::TimedOut("the store's answer"))),
        }
    }

    /// Runs `op` on a connection, retrying with backoff while the store is unreachable (each
    /// retry on a new connection), for at most the URL's `wait=` in all: past it, the store's
    /// error. A `deadline` the retries would pass fails with a timeout instead.
    ///
    /// `op` may run more than once: an attempt that timed out may still have taken effect on
    /// the server (the scripts err on the safe side then: slots or recipients counted twice).
    pub(super) async fn run<T, F, Fut>(&self, deadline: Option<Instant>, mut op: F) -> Result<T>
    where
        F: FnMut(MultiplexedConnection) -> Fut,
        Fut: Future<Output = std::result::Result<T, RedisError>>,
    {
        let give_up = Instant::now() + self.target.wait;
        let mut delay = FIRST_RETRY;
        loop {
            let attempt = async {
                let live = self.connection().await?;
                match op(live.connection.clone()).await {
                    Ok(value) => Ok(value),
                    Err(error) => {
                        let failure = Failure::Redis(error);
                        if failure.retryable() {
                            self.forget(&live);
                        }
                        Err(failure)
                    }
                }
            };
            let until = deadline.map_or(give_up, |deadline| deadline.min(give_up));
            let result = match tokio::time::timeout_at(until.into(), attempt).await {
                Ok(result) => result,
                Err(_) => Err(Failure::TimedOut("waiting for the store")),
            };
            let failure = match result {
                Ok(value) => {
                    if self.failing.swap(false, Ordering::AcqRel) {
                        crate::limits::outages::ended();
                        // At the outage's own level: whoever saw it go sees it come back.
                        log::warn!(
                            target: "bizmsg",
                            store = self.target.shown.as_str(),
                            outage = false;
                            "shared limits {}: reachable again; sends go on",
                            self.target.shown
                        );
                    }
                    return Ok(value);
                }
                Err(failure) if !failure.retryable() => return Err(self.error(&failure)),
                Err(failure) => failure,
            };
            if !self.failing.swap(true, Ordering::AcqRel) {
                crate::limits::outages::started();
                log::warn!(
                    target: "bizmsg",
                    store = self.target.shown.as_str(),
                    outage = true;
                    "shared limits {}: unreachable ({failure}); sends wait for it (up to {:?})",
                    self.target.shown,
                    self.target.wait
                );
            }
            let now = Instant::now();
            if now >= give_up {
                return Err(self.error(&failure));
            }
            if deadline.is_some_and(|deadline| now + delay >= deadline) {
                return Err(Error::Timeout(format!(
                    "waiting for the shared limits ({}): {failure}",
                    self.target.shown
                )));
            }
            tokio::time::sleep(delay.min(give_up - now)).await;
            delay = (delay * 2).min(LONGEST_RETRY);
        }
    }

    /// Listens to `channel` on a connection of its own, on the background runtime, for as long
    /// as `on_message` returns true (reconnecting with backoff when it is lost). Messages
    /// published while it is lost are missed.
    pub(super) fn watch(
        &self,
        channel: String,
        on_message: impl Fn(&[u8]) -> bool + Send + 'static,
    ) {
        let target = Arc::clone(&self.target);
        let tls = self.tls.clone();
        self.background.handle.spawn(async move {
            let mut delay = FIRST_RETRY;
            loop {
                let subscribed = tokio::time::timeout(
                    CONNECT_TIMEOUT,
                    subscribe(&target, tls.clone(), &channel),
                )
                .await;
                if let Ok(Ok(mut messages)) = subscribed {
                    delay = FIRST_RETRY;
                    while let Some(message) = messages.next().await {
                        if !on_message(message.get_payload_bytes()) {
                            return;
                        }
                    }
                }
                if !on_message(b"") {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(LONGEST_RETRY);
            }
        });
    }

    /// The current connection, or a new one.
    async fn connection(&self) -> std::result::Result<Live, Failure> {
        if let Some(live) = self.current() {
            return Ok(live);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(live) = self.current() {
            return Ok(live);
        }
        let target = Arc::clone(&self.target);
        let tls = self.tls.clone();
        // Connected on the background runtime, so that the socket and the driver belong to it.
        let connected = self
            .background
            .handle
            .spawn(async move {
                tokio::time::timeout(CONNECT_TIMEOUT, connect(&target, tls))
                    .await
                    .unwrap_or(Err(Failure::TimedOut("connecting")))
            })
            .await
            .map_err(|e| {
                Failure::Background(format!("the shared limits' runtime failed: {e}"))
            })??;
        *lock(&self.live) = Some(connected.clone());
        Ok(connected)
    }

    fn current(&self) -> Option<Live> {
        let mut live = lock(&self.live);
        match &*live {
            Some(current) if current.alive.load(Ordering::Acquire) => Some(current.clone()),
            Some(_) => {
                *live = None;
                None
            }
            None => None,
        }
    }

    /// Drops `failed` (if still the current connection): the next attempt connects anew.
    fn forget(&self, failed: &Live) {
        let mut live = lock(&self.live);
        if live
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(&current.alive, &failed.alive))
        {
            *live = None;
        }
        failed.alive.store(false, Ordering::Release);
    }
}
