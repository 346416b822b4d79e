//! Client configuration: what a caller may set, with the defaults and the checks that refuse
//! a configuration before it can send anything.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use super::retry::{Backoff, RetryObserver};
use super::token::TokenSource;
use crate::error::{Error, Result};

pub const DEFAULT_USER_AGENT: &str = concat!("bizmsg-python/", env!("CARGO_PKG_VERSION"));

/// The largest answer body read by default: far above any page of 1000 accounts with their
/// numbers, far below what would hurt a process.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// Timeouts of a call. `connect` bounds establishing a connection (a pool-wide setting, fixed
/// when the client is made); `read` bounds one attempt once connected; `total` bounds the whole
/// call, retries and their waits included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeout {
    pub connect: Option<Duration>,
    pub read: Option<Duration>,
    pub total: Option<Duration>,
}

impl Timeout {
    pub const DEFAULT_CONNECT: Duration = Duration::from_secs(10);

    /// `timeout=30.0`: the whole call within 30 s.
    pub fn total(total: Duration) -> Self {
        Timeout {
            connect: None,
            read: None,
            total: Some(total),
        }
    }

    /// This timeout with the parts `other` sets replaced.
    pub fn overridden_by(self, other: Timeout) -> Self {
        Timeout {
            connect: other.connect.or(self.connect),
            read: other.read.or(self.read),
            total: other.total.or(self.total),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        for (name, value) in [
            ("connect", self.connect),
            ("read", self.read),
            ("total", self.total),
        ] {
            if value == Some(Duration::ZERO) {
                return Err(Error::Configuration(format!(
                    "timeout {name} must be more than 0 seconds"
                )));
            }
        }
        Ok(())
    }
}

impl Default for Timeout {
    fn default() -> Self {
        Timeout {
            connect: Some(Self::DEFAULT_CONNECT),
            read: None,
            total: Some(Duration::from_secs(30)),
        }
    }
}

/// How TLS certificates are checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Verify {
    /// The platform's trust store.
    #[default]
    Default,
    /// No verification at all (tests against self-signed servers only).
    Disabled,
    /// Trust the certificates of this PEM bundle (in addition to none of the platform's).
    CaBundle(PathBuf),
}

#[derive(Clone)]
pub struct ClientConfig {
    pub base_url: String,
    pub token: TokenSource,
    pub timeout: Timeout,
    pub max_retries: u32,
    pub success_codes: Vec<String>,
    pub default_headers: Vec<(String, String)>,
    pub user_agent: String,
    pub proxy: Option<String>,
    pub verify: Verify,
    pub allow_insecure_http: bool,
    /// Answers with a longer body are refused (see [`crate::Error::ResponseTooLarge`]).
    pub max_response_bytes: u64,
    pub backoff: Backoff,
    pub retry_observer: Option<Arc<dyn RetryObserver>>,
    /// The store of limits shared by every process (`redis://...`); `None`: this process's
    /// own, per campaign.
    pub shared_limits: Option<String>,
    /// The service deduplicates sends by `Idempotency-Key`: a send whose reused connection
    /// ended before any answer (the keep-alive race) goes again once, with its key, instead
    /// of being an unknown outcome.
    pub idempotent_sends: bool,
}

impl ClientConfig {
    pub fn new(base_url: impl Into<String>, token: TokenSource) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            token,
            timeout: Timeout::default(),
            max_retries: 2,
            success_codes: crate::wire::DEFAULT_SUCCESS_CODES
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            default_headers: Vec::new(),
            user_agent: DEFAULT_USER_AGENT.to_owned(),
            proxy: None,
            verify: Verify::Default,
            allow_insecure_http: false,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            backoff: Backoff::default(),
            retry_observer: None,
            shared_limits: None,
            idempotent_sends: false,
        }
    }
}

/// Parses and checks the base URL. Plain `http://` is allowed only to loopback, because the
/// bearer token would otherwise cross a network in clear text.
pub(crate) fn base_url(text: &str, allow_insecure_http: bool) -> Result<Url> {
    let trimmed = text.trim();
    // Shown in errors without a user or password (a token is sometimes put there as the
    // user), whatever else is wrong with it.
    let shown = match Url::parse(trimmed) {
        Ok(url) if url.has_host() => without_credentials(&url),
        _ => crate::masking::redact_url(trimmed),
    };
    let mut url = Url::parse(trimmed)
        .map_err(|e| Error::Configuration(format!("base_url {shown:?} is not a URL: {e}")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_insecure_http || is_loopback(&url) => {}
        "http" => {
            return Err(Error::Configuration(format!(
                "base_url {shown:?} uses plain http:// to a host that is not loopback, which \
                 would send the token unencrypted; use https:// or pass allow_insecure_http=True"
            )))
        }
        other => {
            return Err(Error::Configuration(format!(
                "base_url {shown:?} has scheme {other:?}; use https:// (or http:// to loopback)"
            )))
        }
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::Configuration(format!(
            "base_url {shown:?} must not have a query or fragment"
        )));
    }
    // It would be shown by every error and repr that names the service, and sent nowhere: the
    // service authenticates with the bearer token.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::Configuration(format!(
            "base_url {shown:?} must not carry a user or password: the service authenticates \
             with the token"
        )));
    }
    // Endpoints are joined onto the base, so it must end in `/` to keep any path prefix.
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// `url` as errors show it: without its user or password (of a service, or of a proxy).
pub(crate) fn without_credentials(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn base_url_rules() {
        assert_eq!(
            base_url("https://api.example.com", false).unwrap().as_str(),
            "https://api.example.com/"
        );
        assert_eq!(
            base_url("https://h/prefix", false).unwrap().as_str(),
            "https://h/prefix/"
        );
        assert!(base_url("http://127.0.0.1:8080", false).is_ok());
        assert!(base_url("http://localhost:8080/", false).is_ok());
        assert!(base_url("http://[::1]:8080/", false).is_ok());
        let insecure = base_url("http://api.example.com", false)
            .unwrap_err()
            .to_string();
        assert!(insecure.contains("allow_insecure_http"), "{insecure}");
        assert!(base_url("http://api.example.com", true).is_ok());
        assert!(base_url("ftp://x", true).is_err());
        assert!(base_url("not a url", true).is_err());
        assert!(base_url("https://h/?a=1", true).is_err());
        for with_credentials in [
            "https://user:s3cret@h/",
            "https://s3cret@h/",
            "https://s3cret:@h/",
            "https://:s3cret@h/",
        ] {
            let refused = base_url(with_credentials, false).unwrap_err().to_string();
            assert!(
                refused.contains("must not carry a user or password"),
                "{refused}"
            );
            assert!(!refused.contains("s3cret"), "{refused}");
        }
        let typo = base_url("ftp://user:s3cret@h/", false)
            .unwrap_err()
            .to_string();
        assert!(!typo.contains("s3cret"), "{typo}");
    }

    #[test]
    fn timeouts_merge_part_by_part() {
        let merged = Timeout::default().overridden_by(Timeout::total(Duration::from_secs(5)));
        assert_eq!(merged.connect, Some(Timeout::DEFAULT_CONNECT));
        assert_eq!(merged.total, Some(Duration::from_secs(5)));
        assert!(Timeout::total(Duration::ZERO).check().is_err());
    }
}
