//! What a sandbox is started with, and the checks that refuse a configuration it cannot honour.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// How to start a [`Sandbox`](super::Sandbox). Everything it generates is a pure function of
/// `seed`, `tenants`, `accounts_per_tenant` and `numbers_per_account`.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    /// Only loopback addresses are accepted: the sandbox has well-known tokens.
    pub host: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    pub seed: u64,
    /// The token of tenant `T` is `sandbox-token-T`.
    pub tenants: Vec<String>,
    pub accounts_per_tenant: usize,
    /// Inclusive range; each account draws its count from the seeded generator.
    pub numbers_per_account: (usize, usize),
    /// Added before every response.
    pub delay: Duration,
    /// Act like the platform: sends over a number's throughput get `429` with `Retry-After`,
    /// new recipients past an account's messaging tier get a failed commit (docs/sandbox.md).
    pub enforce_limits: bool,
    /// Keep at most this many requests in the log, dropping the oldest (`None`: all of them;
    /// a long campaign against a standalone sandbox wants a bound).
    pub max_logged_requests: Option<usize>,
    /// Seeds the draws of faults with a `probability`.
    pub fault_seed: u64,
    /// Answer a repeated `Idempotency-Key` with its first answer (the default); off, the
    /// sandbox acts like a service that does not deduplicate: every request commits anew.
    pub honour_idempotency_keys: bool,
    /// Accounts and numbers to serve instead of generated ones (`--seed-data`).
    pub data: Option<super::seed_data::SeedData>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            seed: 0,
            tenants: vec!["acme".to_owned(), "globex".to_owned()],
            accounts_per_tenant: 3,
            numbers_per_account: (2, 4),
            delay: Duration::ZERO,
            enforce_limits: false,
            max_logged_requests: None,
            fault_seed: 0,
            honour_idempotency_keys: true,
            data: None,
        }
    }
}

/// The bearer token that authenticates as `tenant`.
pub(crate) fn token_of(tenant: &str) -> String {
    format!("sandbox-token-{tenant}")
}

impl SandboxConfig {
    /// The tenants served: from the seed data when given, else `tenants`.
    pub(crate) fn tenant_names(&self) -> Vec<String> {
        match &self.data {
            Some(data) => data.tenants.iter().map(|(name, _)| name.clone()).collect(),
            None => self.tenants.clone(),
        }
    }

    pub(crate) fn validate(&self) -> io::Result<()> {
        if !self.host.is_loopback() {
            return Err(invalid(format!(
                "sandbox host {} is not a loopback address; the sandbox only listens on 127.0.0.1 or ::1",
                self.host
            )));
        }
        let tenants = self.tenant_names();
        if tenants.is_empty() {
            return Err(invalid("sandbox needs at least one tenant".to_owned()));
        }
        let mut seen = HashSet::new();
        for tenant in &tenants {
            // The token travels in an HTTP header, so the name must be plain visible ASCII.
            if tenant.is_empty() || !tenant.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(invalid(format!(
                    "tenant name {tenant:?} must be non-empty visible ASCII without spaces"
                )));
            }
            if !seen.insert(tenant.as_str()) {
                return Err(invalid(format!(
                    "tenant {tenant:?} is listed twice; tokens must map to one tenant"
                )));
            }
        }
        let (least, most) = self.numbers_per_account;
        if least > most {
            return Err(invalid(format!(
                "numbers_per_account ({least}, {most}) is empty: the minimum exceeds the maximum"
            )));
        }
        Ok(())
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn refused(config: &SandboxConfig) -> String {
        match config.validate() {
            Err(error) => {
                assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
                error.to_string()
            }
            Ok(()) => String::from("accepted"),
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let config = SandboxConfig::default();
        assert_eq!(config.host, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(config.port, 0);
        assert_eq!(config.seed, 0);
        assert_eq!(config.tenants, vec!["acme", "globex"]);
        assert_eq!(config.accounts_per_tenant, 3);
        assert_eq!(config.numbers_per_account, (2, 4));
        assert_eq!(config.delay, Duration::ZERO);
        assert!(config.validate().is_ok());
        assert_eq!(token_of("acme"), "sandbox-token-acme");
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let base = SandboxConfig::default();
        let public = SandboxConfig {
            host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            ..base.clone()
        };
        assert!(refused(&public).contains("0.0.0.0 is not a loopback"));
        let none = SandboxConfig {
            tenants: vec![],
            ..base.clone()
        };
        assert!(refused(&none).contains("at least one tenant"));
        let twice = SandboxConfig {
            tenants: vec!["acme".into(), "acme".into()],
            ..base.clone()
        };
        assert!(refused(&twice).contains("listed twice"));
        let spaced = SandboxConfig {
            tenants: vec!["a b".into()],
            ..base.clone()
        };
        assert!(refused(&spaced).contains("visible ASCII"));
        let empty_range = SandboxConfig {
            numbers_per_account: (3, 2),
            ..base.clone()
        };
        assert!(refused(&empty_range).contains("minimum exceeds"));
        let v6 = SandboxConfig {
            host: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..base
        };
        assert!(v6.validate().is_ok());
    }
}
