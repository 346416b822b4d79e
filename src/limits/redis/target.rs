//! What a `shared_limits` URL asks for: where the store is, how to log in, which clock to
//! trust and how long to wait for it. Parsed here rather than by the redis crate, which refuses
//! `rediss://` without a TLS feature of its own (we bring our own TLS), and so that every
//! refusal names the field and never the password.

use std::time::Duration;

use url::Url;

use crate::error::{Error, Result};
use crate::masking::redact_url;

/// How long operations wait for an unreachable store when the URL does not say (`wait=`):
/// longer than a restart or a managed failover usually takes, short enough that a campaign
/// stops (resumably) rather than hanging.
pub(super) const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// The longest `wait=` accepted.
const LONGEST_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Where the clock of the scripts comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Clock {
    /// Redis `TIME`, read inside each script: one clock for every host.
    Redis,
    /// This host's clock, passed to each script (for stores that refuse `TIME` in scripts).
    Local,
}

/// A parsed `redis://` or `rediss://` URL.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) host: url::Host<String>,
    pub(super) port: u16,
    pub(super) tls: bool,
    pub(super) db: i64,
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    pub(super) clock: Clock,
    pub(super) wait: Duration,
    /// The URL as errors and logs show it (no password).
    pub(super) shown: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

fn invalid(shown: &str, problem: impl std::fmt::Display) -> Error {
    Error::validation("shared_limits", format!("{shown}: {problem}"))
}

impl Target {
    pub(super) fn parse(raw: &str) -> Result<Self> {
        let shown = redact_url(raw);
        let url = Url::parse(raw.trim()).map_err(|_| {
            invalid(
                &shown,
                "not a URL: expected redis://[[user]:password@]host[:port][/database] (or \
                 rediss:// for TLS)",
            )
        })?;
        let tls = match url.scheme() {
            "redis" => false,
            "rediss" => true,
            other => {
                return Err(invalid(
                    &shown,
                    format!("unknown scheme {other:?} (redis:// or rediss://)"),
                ))
            }
        };
        let host = match url.host() {
            Some(url::Host::Domain("")) | None => return Err(invalid(&shown, "no host")),
            Some(host) => host.to_owned(),
        };
        let port = url.port().unwrap_or(6379);
        let db = match url.path().trim_start_matches('/') {
            "" => 0,
            digits => digits
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0 && digits.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| {
                    invalid(
                        &shown,
                        format!("the path must be a database number, got /{digits}"),
                    )
                })?,
        };
        let username = decoded(url.username(), &shown, "user name")?.filter(|u| !u.is_empty());
        let password = match url.password() {
            Some(password) => decoded(password, &shown, "password")?,
            None => None,
        };
        if url.fragment().is_some() {
            return Err(invalid(&shown, "a fragment (#...) is not understood"));
        }
        let mut clock = None;
        let mut wait = None;
        for (name, value) in url.query_pairs() {
            let repeated = match name.as_ref() {
                "clock" => clock
                    .replace(match value.as_ref() {
                        "redis" => Clock::Redis,
                        "local" => Clock::Local,
                        other => {
                            return Err(invalid(
                                &shown,
                                format!("clock= must be redis or local, got {other:?}"),
                            ))
                        }
                    })
                    .is_some(),
                "wait" => wait.replace(parse_wait(&value, &shown)?).is_some(),
                other => {
                    return Err(invalid(
                        &shown,
                        format!("unknown parameter {other:?} (clock=, wait=)"),
                    ))
                }
            };
            if repeated {
                return Err(invalid(&shown, format!("{name}= is given twice")));
            }
        }
        Ok(Target {
            host,
            port,
            tls,
            db,
            username,
            password,
            clock: clock.unwrap_or(Clock::Redis),
            wait: wait.unwrap_or(DEFAULT_WAIT),
            shown,
        })
    }

    /// The host as a name to connect to and to check a certificate against.
    pub(super) fn host_name(&self) -> String {
        match &self.host {
            url::Host::Domain(domain) => domain.clone(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        }
    }
}

fn decoded(raw: &str, shown: &str, what: &str) -> Result<Option<String>> {
    if raw.is_empty() {
        return Ok(None);
    }
    percent_decode(raw).map(Some).ok_or_else(|| {
        invalid(
            shown,
            format!("the {what} is not valid percent-encoded UTF-8"),
        )
    })
}

/// `%XX` escapes decoded (the url crate leaves user and password encoded).
fn percent_decode(raw: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut rest = raw.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'%' {
            let hex = tail.get(..2)?;
            let hex = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = tail.get(2..)?;
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

fn parse_wait(value: &str, shown: &str) -> Result<Duration> {
    value
        .parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .filter(|wait| *wait <= LONGEST_WAIT)
        .ok_or_else(|| {
            invalid(
                shown,
                format!("wait= must be a positive number of seconds, at most a day, got {value:?}"),
            )
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn urls_are_parsed_with_their_parameters() {
        let target = Target::parse("redis://localhost").unwrap();
        assert_eq!(target.port, 6379);
        assert_eq!(target.db, 0);
        assert!(!target.tls && target.password.is_none() && target.username.is_none());
        assert_eq!(target.clock, Clock::Redis);
        assert_eq!(target.wait, DEFAULT_WAIT);

        let target =
            Target::parse("rediss://us%40r:s3cr%3At%40x@[::1]:6380/3?clock=local&wait=2.5")
                .unwrap();
        assert!(target.tls);
        assert_eq!(target.host_name(), "::1");
        assert_eq!((target.port, target.db), (6380, 3));
        assert_eq!(target.username.as_deref(), Some("us@r"));
        assert_eq!(target.password.as_deref(), Some("s3cr:t@x"));
        assert_eq!(target.clock, Clock::Local);
        assert_eq!(target.wait, Duration::from_millis(2500));
        assert!(!format!("{target:?}").contains("s3cr"));

        let target = Target::parse("redis://:pw@10.0.0.1/").unwrap();
        assert_eq!(target.password.as_deref(), Some("pw"));
        assert!(target.username.is_none());
    }

    #[test]
    fn bad_urls_are_refused_by_field_without_their_password() {
        for (url, problem) in [
            ("http://:hunter2@localhost", "unknown scheme"),
            ("localhost:6379", "unknown scheme"),
            ("redis://:hunter2@localhost/x", "database number"),
            ("redis://:hunter2@localhost/-1", "database number"),
            ("redis://:hunter2@localhost/0?db=1", "unknown parameter"),
            ("redis://:hunter2@localhost/0?wait=0", "wait="),
            ("redis://:hunter2@localhost/0?wait=abc", "wait="),
            ("redis://:hunter2@localhost/0?clock=ntp", "clock="),
            (
                "redis://:hunter2@localhost/0?clock=local&clock=local",
                "twice",
            ),
            ("redis://:hunter2@localhost/0#x", "fragment"),
            ("redis://:hunter2@/0", "host"),
            ("redis://:hunter2@ho st/0", "not a URL"),
            ("rediss://:hunter2%ff@localhost/0", "password"),
        ] {
            let error = Target::parse(url).err().unwrap();
            let text = error.to_string();
            assert!(
                matches!(&error, Error::Validation { field, .. } if field == "shared_limits"),
                "{url}: {error:?}"
            );
            assert!(text.contains(problem), "{url}: {text}");
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
    }
}
