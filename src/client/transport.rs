//! The connection pool. One reqwest client per bizmsg client; rebuilt in a forked child, whose
//! copy of the parent's pool holds connections driven by tasks of a runtime that does not exist
//! in the child (using them would hang).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::config::{ClientConfig, Verify};
use crate::error::{Error, Result};

pub(crate) struct Settings {
    connect_timeout: Duration,
    user_agent: String,
    proxy: Option<String>,
    verify: Verify,
    /// `http://` to loopback: environment proxies are not used, or the token would travel in
    /// clear text to the proxy.
    local_plain_http: bool,
}

impl Settings {
    pub(crate) fn from_config(config: &ClientConfig, base: &reqwest::Url) -> Result<Self> {
        if config.user_agent.chars().any(char::is_control) {
            return Err(Error::Configuration(
                "user_agent contains a control character".to_owned(),
            ));
        }
        Ok(Settings {
            connect_timeout: config
                .timeout
                .connect
                .unwrap_or(super::Timeout::DEFAULT_CONNECT),
            user_agent: config.user_agent.clone(),
            proxy: config.proxy.clone(),
            verify: config.verify.clone(),
            local_plain_http: base.scheme() == "http" && super::config::is_loopback(base),
        })
    }

    fn build(&self) -> Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .user_agent(self.user_agent.as_str())
            .tcp_nodelay(true)
            // Below the 60 s idle limit common to servers and load balancers, so the pool drops
            // an idle connection before the server does (reusing one the server is closing
            // makes a send's outcome unknown).
            .pool_idle_timeout(Duration::from_secs(50))
            // Redirects would re-send a POST somewhere the caller did not name.
            .redirect(reqwest::redirect::Policy::none())
            // Every retry goes through our loop, so it is counted, logged and judged for send
            // safety in one place (HTTP/2 refusals included, see execute.rs).
            .retry(reqwest::retry::never());
        if let Some(proxy) = &self.proxy {
            let proxy = reqwest::Proxy::all(proxy.as_str())
                .map_err(|e| Error::Configuration(format!("proxy {proxy:?} is not usable: {e}")))?
                .no_proxy(reqwest::NoProxy::from_env());
            builder = builder.proxy(proxy);
        } else if self.local_plain_http {
            builder = builder.no_proxy();
        }
        match &self.verify {
            Verify::Default => {}
            Verify::Disabled => builder = builder.tls_danger_accept_invalid_certs(true),
            Verify::CaBundle(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    Error::Configuration(format!("verify: cannot read {}: {e}", path.display()))
                })?;
                let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                    Error::Configuration(format!(
                        "verify: {} is not a PEM bundle: {e}",
                        path.display()
                    ))
                })?;
                if certificates.is_empty() {
                    return Err(Error::Configuration(format!(
                        "verify: {} holds no certificate",
                        path.display()
                    )));
                }
                builder = builder.tls_certs_only(certificates);
            }
        }
        builder
            .build()
            .map_err(|e| Error::Configuration(format!("cannot build the HTTP client: {e}")))
    }
}

pub(crate) struct Transport {
    settings: Settings,
    pool: Mutex<Option<Pool>>,
    closed: AtomicBool,
}

struct Pool {
    pid: u32,
    http: reqwest::Client,
}

impl Transport {
    pub(crate) fn new(settings: Settings) -> Result<Self> {
        let http = settings.build()?;
        Ok(Transport {
            settings,
            pool: Mutex::new(Some(Pool {
                pid: std::process::id(),
                http,
            })),
            closed: AtomicBool::new(false),
        })
    }

    /// The pool of this process (a cheap handle).
    pub(crate) fn http(&self) -> Result<reqwest::Client> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let pid = std::process::id();
        let mut pool = self
            .pool
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match pool.as_ref() {
            Some(current) if current.pid == pid => Ok(current.http.clone()),
            Some(_) => {
                // A forked child: forget the parent's pool without touching its connections.
                if let Some(inherited) = pool.take() {
                    std::mem::forget(inherited);
                }
                let http = self.settings.build()?;
                *pool = Some(Pool {
                    pid,
                    http: http.clone(),
                });
                Ok(http)
            }
            None => Err(Error::Closed),
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let mut pool = self
            .pool
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *pool = None;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
