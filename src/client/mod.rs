//! The HTTP client: configuration, the connection pool, tokens, retries and the attempt loop.
//! The operations themselves (what each endpoint sends and decodes) live in `crate::api`.

mod attempt_counts;
mod attempt_log;
mod body;
mod config;
mod decide;
mod error_body;
mod execute;
pub(crate) mod http1;
mod http2;
mod idle_limit;
pub mod log_ids;
mod operation;
mod per_runtime;
mod reply;
mod request;
mod retry;
mod retry_slot;
mod tls;
mod token;
mod transport;

use std::sync::Arc;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Uri;

pub use attempt_counts::{retries as retries_counted, throttled as throttled_counted};
pub use attempt_log::{AttemptLog, AttemptRecord, PauseRecord, MAX_PAUSES};
pub use config::{ClientConfig, Timeout, Verify, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_USER_AGENT};
pub use log_ids::LogIds;
// A pause is a limit (`limits/gate.rs`); calls take it in their options, so it is named here too.
pub use crate::limits::Gate;
pub use crate::meta::{Meta, Response};
pub use retry::{Backoff, RetryObserver};
pub(crate) use tls::config as tls_config;
pub use token::{TokenProvider, TokenSource};
pub use transport::TransportKind;

pub(crate) use body::{SendFence, SendProgress};
pub use error_body::error_body;
pub(crate) use execute::Answer;
pub(crate) use http1::check_any_answer;
pub(crate) use operation::{Operation, SendContext};
pub(crate) use retry_slot::RetrySlot;

use crate::error::{Error, Result};
use crate::limits::{LimitsStore, SenderPaces};

/// A client of the service. Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    options: HandleOptions,
}

/// What every handle derived from one client shares: the pool, the token and the endpoints.
struct Shared {
    transport: transport::Transport,
    token: token::Token,
    endpoints: Endpoints,
    success_codes: Vec<String>,
    backoff: Backoff,
    base_url: String,
    user_agent: HeaderValue,
    max_response_bytes: u64,
    /// Limits shared by every process (`shared_limits=`), and the senders' paces they need.
    limits: Option<Arc<dyn LimitsStore>>,
    paces: SenderPaces,
    idempotent_sends: bool,
}

/// What `with_options` may change per handle without a new pool.
#[derive(Clone)]
struct HandleOptions {
    timeout: Timeout,
    max_retries: u32,
    headers: HeaderMap,
    retry_observer: Option<Arc<dyn RetryObserver>>,
    /// Only the client made by `new` closes the pool; a `with_options` handle closing it would
    /// break its parent and every sibling.
    owns_pool: bool,
    /// A handle made for tracing (`observed`) records each attempt here.
    attempt_log: Option<Arc<AttemptLog>>,
    /// A traced handle's span ids, current (`log_ids::current`) while its calls run.
    log_ids: Option<Arc<log_ids::LogIds>>,
}

pub(crate) struct Endpoints {
    pub send: Uri,
    pub business_accounts: Uri,
    pub business_phone_numbers: Uri,
}

/// What a traced handle (`Client::observed`) records.
#[derive(Clone, Debug, Default)]
pub struct Observe {
    /// Each attempt of its calls (not a campaign's: its log would grow with every message).
    pub attempts: bool,
    /// The share of a campaign's messages traced on their own, 0 to 1: their times and
    /// attempts come back with their outcomes.
    pub message_sample: f64,
    /// The span ids its calls' log records name.
    pub log_ids: Option<log_ids::LogIds>,
}

/// Per-call settings; `None` means "the client's".
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    pub timeout: Option<Timeout>,
    pub max_retries: Option<u32>,
    /// For sends: the `Idempotency-Key` to use instead of a fresh one (to re-send safely after
    /// a `SendOutcomeUnknown`).
    pub idempotency_key: Option<String>,
    /// Shared by the calls of a batch: a `Retry-After` one call is given pauses them all.
    pub gate: Option<Arc<Gate>>,
    /// Where this call's attempts are recorded instead of the handle's log: a campaign
    /// message traced on its own (`AttemptLog::samples`).
    pub attempt_log: Option<Arc<AttemptLog>>,
}

impl Client {
    pub fn new(config: ClientConfig) -> Result<Self> {
        let base = config::base_url(&config.base_url, config.allow_insecure_http)?;
        let endpoint = |path: &str| {
            let url = base
                .join(path)
                .map_err(|e| Error::Configuration(format!("base_url cannot take {path}: {e}")))?;
            url.as_str()
                .parse::<Uri>()
                .map_err(|e| Error::Configuration(format!("base_url cannot take {path}: {e}")))
        };
        let endpoints = Endpoints {
            send: endpoint("v1/chat/messages/send")?,
            business_accounts: endpoint("v1/chat/businessAccounts")?,
            business_phone_numbers: endpoint("v1/chat/businessPhoneNumber")?,
        };
        if config.success_codes.is_empty() {
            return Err(Error::Configuration(
                "success_codes must name at least one code".to_owned(),
            ));
        }
        let headers = header_map(&config.default_headers)?;
        config.timeout.check()?;
        if config.max_response_bytes == 0 {
            return Err(Error::Configuration(
                "max_response_bytes must be at least 1".to_owned(),
            ));
        }
        if config.user_agent.chars().any(char::is_control) {
            return Err(Error::Configuration(
                "user_agent contains a control character".to_owned(),
            ));
        }
        let user_agent = HeaderValue::from_str(&config.user_agent).map_err(|_| {
            Error::Configuration("user_agent is not a valid header value".to_owned())
        })?;
        let base_url = base.as_str().trim_end_matches('/').to_owned();
        let limits = match &config.shared_limits {
            // Shared by every client of this service (its base URL), in every process.
            Some(url) => Some(crate::limits::shared(
                url,
                &base_url,
                Some(Arc::new(tls::config(&config.verify, &[])?)),
            )?),
            None => None,
        };
        Ok(Client {
            shared: Arc::new(Shared {
                transport: transport::Transport::new(&config, &base)?,
                token: token::Token::new(config.token)?,
                endpoints,
                success_codes: config
                    .success_codes
                    .iter()
                    .map(|c| c.trim().to_owned())
                    .collect(),
                backoff: config.backoff,
                base_url,
                user_agent,
                max_response_bytes: config.max_response_bytes,
                limits,
                paces: SenderPaces::default(),
                idempotent_sends: config.idempotent_sends,
            }),
            options: HandleOptions {
                timeout: config.timeout,
                max_retries: config.max_retries,
                headers,
                retry_observer: config.retry_observer,
                owns_pool: true,
                attempt_log: None,
                log_ids: None,
            },
        })
    }

    /// A handle with other defaults that shares this client's pool, token and endpoints.
    /// `headers` are added to (and override) the current extra headers.
    pub fn with_options(
        &self,
        timeout: Option<Timeout>,
        max_retries: Option<u32>,
        headers: &[(String, String)],
        retry_observer: Option<Arc<dyn RetryObserver>>,
    ) -> Result<Self> {
        let mut options = self.options.clone();
        options.owns_pool = false;
        if let Some(timeout) = timeout {
            timeout.check()?;
            // `connect` belongs to the shared pool and stays the pool's.
            options.timeout = Timeout {
                connect: self.options.timeout.connect,
                ..self.options.timeout.overridden_by(timeout)
            };
        }
        if let Some(max_retries) = max_retries {
            options.max_retries = max_retries;
        }
        for (name, value) in header_map(headers)? {
            if let Some(name) = name {
                options.headers.insert(name, value);
            }
        }
        if retry_observer.is_some() {
            options.retry_observer = retry_observer;
        }
        Ok(Client {
            shared: Arc::clone(&self.shared),
            options,
        })
    }

    /// A handle for one traced call (or campaign): its requests carry `headers` (the trace
    /// context, which the caller's propagator wrote) besides the client's, and it records in
    /// the returned log what `observe` asks (see [`Observe`]). Trace headers are not checked
    /// against the reserved names: a propagator writes only its own.
    pub fn observed(
        &self,
        headers: &[(String, String)],
        observe: Observe,
    ) -> Result<(Self, Arc<AttemptLog>)> {
        let mut options = self.options.clone();
        options.owns_pool = false;
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                Error::Configuration(format!("{name:?} is not a valid trace header name"))
            })?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                Error::Configuration(format!("the trace header {name} has an invalid value"))
            })?;
            options.headers.insert(name, value);
        }
        let log = Arc::new(AttemptLog::new(observe.attempts, observe.message_sample));
        options.attempt_log = Some(Arc::clone(&log));
        options.log_ids = observe.log_ids.map(Arc::new);
        Ok((
            Client {
                shared: Arc::clone(&self.shared),
                options,
            },
            log,
        ))
    }

    /// The span ids of a handle made for tracing, for the records logged while its calls (or
    /// its campaign) run.
    pub fn log_ids(&self) -> Option<&Arc<log_ids::LogIds>> {
        self.options.log_ids.as_ref()
    }

    /// The log of a handle made for tracing (`observed`).
    pub fn attempt_log(&self) -> Option<&Arc<AttemptLog>> {
        self.options.attempt_log.as_ref()
    }

    pub fn base_url(&self) -> &str {
        &self.shared.base_url
    }

    pub fn timeout(&self) -> Timeout {
        self.options.timeout
    }

    pub fn max_retries(&self) -> u32 {
        self.options.max_retries
    }

    /// How long to wait before retry `n` (the batch sender uses it for its own pauses).
    pub fn backoff(&self) -> &Backoff {
        &self.shared.backoff
    }

    pub fn success_codes(&self) -> &[String] {
        &self.shared.success_codes
    }

    /// Drops the connection pool; every later call of this client and of the handles made
    /// from it fails with [`Error::Closed`]. On a `with_options` handle it does nothing: the
    /// pool is its parent's.
    pub fn close(&self) {
        if self.options.owns_pool {
            self.shared.transport.close();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.shared.transport.is_closed()
    }

    /// Before a paced send waits for its slot: a connection to the service is opened now if
    /// none is idle, rather than after the slot (late for it). Best effort, never an error;
    /// given up past the call's total timeout (the connect timeout bounds it too).
    pub(crate) async fn warm_connection(&self, call: &CallOptions) {
        match self.total_timeout(call) {
            Some(total) => {
                let _ = tokio::time::timeout(total, self.shared.transport.warm()).await;
            }
            None => self.shared.transport.warm().await,
        }
    }

    /// A call's total timeout: its own, or the client's. It bounds what a paced send does
    /// outside its attempts too (the wait for a slot, a connection opened ahead, a token asked
    /// at the slot).
    pub(crate) fn total_timeout(&self, call: &CallOptions) -> Option<std::time::Duration> {
        match call.timeout {
            Some(timeout) => self.options.timeout.overridden_by(timeout).total,
            None => self.options.timeout.total,
        }
    }

    /// Which transport the client uses (bizmsg's own HTTP/1.1, or reqwest's HTTP/2 when forced).
    pub fn transport_kind(&self) -> TransportKind {
        self.shared.transport.kind()
    }

    pub fn max_response_bytes(&self) -> u64 {
        self.shared.max_response_bytes
    }

    pub(crate) fn endpoints(&self) -> &Endpoints {
        &self.shared.endpoints
    }

    /// The limits shared by every process, when the client was given a store.
    pub fn shared_limits(&self) -> Option<Arc<dyn LimitsStore>> {
        self.shared.limits.clone()
    }

    /// This client's memo of its senders' paces, for single sends under shared limits.
    pub(crate) fn sender_paces(&self) -> &SenderPaces {
        &self.shared.paces
    }
}

/// Headers the client itself must own, and why: overriding them would leak or reuse a
/// credential, send one idempotency key for different messages, or corrupt the framing.
fn reserved_header(name: &HeaderName) -> Option<&'static str> {
    use http::header::{
        AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, EXPECT, HOST, PROXY_AUTHORIZATION,
        TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
    };
    if name == AUTHORIZATION {
        Some("it comes from `token`")
    } else if name == operation::IDEMPOTENCY_KEY {
        Some("each send gets a fresh one; pass idempotency_key= to a send to choose it")
    } else if [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION, HOST].contains(name) {
        Some("it is set by the HTTP client from the request itself")
    } else if [UPGRADE, EXPECT, TE, TRAILER, PROXY_AUTHORIZATION].contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
    {
        // Each asks the server for another exchange than one request and its answer (a
        // protocol switch, an interim answer, trailers, how long to keep the connection), or
        // belongs to the proxy: the HTTP client owns those.
        Some("it changes how the connection or the exchange works, which the HTTP client owns")
    } else if name == CONTENT_TYPE {
        Some("request bodies are always JSON")
    } else {
        None
    }
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Error::Configuration(format!("{name:?} is not a valid header name")))?;
        if let Some(why) = reserved_header(&header) {
            return Err(Error::Configuration(format!(
                "header {name:?} cannot be set in headers: {why}"
            )));
        }
        // Header values may hold inner spaces (User-Agent strings), but no other whitespace,
        // no CR, LF or other control character, and nothing at either end.
        if value
            .chars()
            .any(|c| c.is_control() || (c.is_whitespace() && c != ' '))
        {
            return Err(Error::Configuration(format!(
                "the value of header {name:?} contains CR, LF, a tab or another control character"
            )));
        }
        if value.trim() != value {
            return Err(Error::Configuration(format!(
                "the value of header {name:?} starts or ends with whitespace"
            )));
        }
        let value = HeaderValue::from_str(value)
            .map_err(|_| Error::Configuration(format!("header {name:?} has an invalid value")))?;
        map.insert(header, value);
    }
    Ok(map)
}
