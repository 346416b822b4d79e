//! Where the journal is: the `postgresql://` URL read into the connection's settings, how TLS
//! is checked (`sslmode` with libpq's meanings, `sslrootcert`, through the client's own rustls
//! configuration), and the name errors show: the URL without its password.

use std::time::Duration;

use tokio_postgres::config::SslMode;
use tokio_postgres::Config;

use crate::client::Verify;
use crate::error::{Error, Result};

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the journal is: the connection settings, and how TLS is checked (`sslmode`).
pub(super) struct Target {
    pub(super) config: Config,
    pub(super) verify: Verify,
    pub(super) name: String,
}

/// Whether `journal` names a PostgreSQL database rather than a file.
pub fn is_postgres_url(journal: &str) -> bool {
    let lower = journal.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

impl Target {
    /// `postgresql://user:password@host:port/db?sslmode=...&sslrootcert=...` (also
    /// `postgres://`). `sslmode` has libpq's meanings: `disable`; `allow` and `prefer` (TLS
    /// when the server offers it, the certificate not checked); `require` (TLS, not checked);
    /// `verify-ca` and `verify-full` (TLS, checked against the system's roots or
    /// `sslrootcert`, host name included: bizmsg does not skip the host check for
    /// `verify-ca`).
    pub(super) fn parse(url: &str) -> Result<Target> {
        let name = crate::masking::redact_url(url);
        let refuse = |why: String| Error::validation("journal", format!("{name}: {why}"));
        let mut parsed = url::Url::parse(url.trim())
            .ok()
            .filter(url::Url::has_host)
            .ok_or_else(|| {
                refuse("not a URL: expected postgresql://user:password@host:port/database".into())
            })?;
        let mut sslmode = None;
        let mut rootcert = None;
        let mut kept: Vec<(String, String)> = Vec::new();
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "sslmode" => sslmode = Some(value.into_owned()),
                "sslrootcert" => rootcert = Some(value.into_owned()),
                _ => kept.push((key.into_owned(), value.into_owned())),
            }
        }
        if kept.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(kept);
        }
        let mut config: Config = parsed
            .as_str()
            .parse()
            .map_err(|e: tokio_postgres::Error| {
                // The cause ("unknown option `x`") is the error's source.
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                refuse(cause.map_or_else(|| e.to_string(), |cause| format!("{e}: {cause}")))
            })?;
        let (mode, verify) = match sslmode.as_deref().unwrap_or("prefer") {
            "disable" => (SslMode::Disable, Verify::Disabled),
            "allow" | "prefer" => (SslMode::Prefer, Verify::Disabled),
            "require" => (SslMode::Require, Verify::Disabled),
            "verify-ca" | "verify-full" => (
                SslMode::Require,
                match &rootcert {
                    Some(path) => Verify::CaBundle(path.into()),
                    None => Verify::Default,
                },
            ),
            other => {
                return Err(refuse(format!(
                    "sslmode={other:?} is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                )))
            }
        };
        if config.get_dbname().is_none() {
            return Err(refuse("names no database".to_owned()));
        }
        config
            .ssl_mode(mode)
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .application_name("bizmsg");
        Ok(Target {
            config,
            verify,
            name,
        })
    }
}
