//! The trace context of a traced handle's calls (`Client::observed`), for the log records Rust
//! writes while it runs them: kept in a tokio task-local around each call of the handle and
//! around a campaign's task, so every record logged there, on whatever thread (the runtime's,
//! for async calls, campaigns and the pages `iter()` reads ahead), can name the call's trace
//! and span. The bindings' logger reads it (`current`) and adds the ids as the record's fields;
//! an untraced call sets nothing, and its records carry nothing more.

use std::future::Future;
use std::sync::Arc;

/// A span's ids as `opentelemetry-instrumentation-logging` writes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogIds {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    pub sampled: bool,
}

tokio::task_local! {
    static CURRENT: Arc<LogIds>;
}

/// The ids of the traced call (or campaign) being run where this is called, if any.
pub fn current() -> Option<Arc<LogIds>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Runs `future` with `ids` as the current ids (as it is, without any).
pub async fn within<F: Future>(ids: Option<Arc<LogIds>>, future: F) -> F::Output {
    match ids {
        Some(ids) => CURRENT.scope(ids, future).await,
        None => future.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ids_are_current_within_and_only_within() {
        assert!(current().is_none());
        let ids = Arc::new(LogIds {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            sampled: true,
        });
        let seen = within(Some(Arc::clone(&ids)), async { current() }).await;
        assert_eq!(seen.as_deref(), Some(&*ids));
        assert!(within(None, async { current() }).await.is_none());
        assert!(current().is_none());
    }
}
