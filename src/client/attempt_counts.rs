//! The HTTP attempts this process retried and the throttling answers it received, counted
//! where every attempt ends (`execute.rs`), single calls and campaigns' messages alike, while
//! the process counts (`crate::counting`): the totals the instrumentation's `bizmsg.retries`
//! (by the `error.type` of the attempt that was retried) and `bizmsg.throttled` (by status)
//! read when metrics are collected. A campaign's messages are so counted with no Python work
//! per message, traced or not. Only a retry or a throttling answer takes the lock: an attempt
//! that succeeds the first time costs the read of the counting flag.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// `(error.type of the attempt retried, url.template)` → retries.
static RETRIES: LazyLock<Mutex<HashMap<(String, String), u64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
/// `(HTTP status, url.template)` → answers.
static THROTTLED: LazyLock<Mutex<HashMap<(u16, String), u64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The statuses counted as throttling answers.
const THROTTLING: [u16; 2] = [429, 503];

/// An attempt of `path` ended with `status` (if an answer came); `retried_after` is the
/// `error.type` of the attempt before it, when this one is a retry.
pub(crate) fn attempt_ended(path: &str, status: Option<u16>, retried_after: Option<&str>) {
    if let Some(error_type) = retried_after {
        let mut retries = crate::sync::lock(&RETRIES);
        *retries
            .entry((error_type.to_owned(), path.to_owned()))
            .or_insert(0) += 1;
    }
    if let Some(status) = status.filter(|status| THROTTLING.contains(status)) {
        let mut throttled = crate::sync::lock(&THROTTLED);
        *throttled.entry((status, path.to_owned())).or_insert(0) += 1;
    }
}

/// Retries so far: `(error.type, url.template, count)`.
pub fn retries() -> Vec<(String, String, u64)> {
    crate::sync::lock(&RETRIES)
        .iter()
        .map(|((error_type, path), count)| (error_type.clone(), path.clone(), *count))
        .collect()
}

/// Throttling answers so far: `(status, url.template, count)`.
pub fn throttled() -> Vec<(u16, String, u64)> {
    crate::sync::lock(&THROTTLED)
        .iter()
        .map(|((status, path), count)| (*status, path.clone(), *count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retries_of(error_type: &str, path: &str) -> u64 {
        retries()
            .into_iter()
            .find(|(e, p, _)| e == error_type && p == path)
            .map_or(0, |(_, _, count)| count)
    }

    fn throttled_of(status: u16, path: &str) -> u64 {
        throttled()
            .into_iter()
            .find(|(s, p, _)| *s == status && p == path)
            .map_or(0, |(_, _, count)| count)
    }

    #[test]
    fn retries_are_counted_by_the_error_they_followed_and_throttling_by_status() {
        let path = "/v1/test/attempt_counts";
        attempt_ended(path, Some(429), None);
        attempt_ended(path, Some(200), Some("429"));
        attempt_ended(path, None, None);
        attempt_ended(path, Some(503), Some("timeout"));
        assert_eq!(retries_of("429", path), 1);
        assert_eq!(retries_of("timeout", path), 1);
        assert_eq!(throttled_of(429, path), 1);
        assert_eq!(throttled_of(503, path), 1);
        assert_eq!(throttled_of(200, path), 0);
    }
}
