//! Walking a listing page by page, one page ahead.
//!
//! When a page is handed out, the next one is already requested in a task, so the caller's
//! time with one page overlaps the next round trip. Never more than one page ahead: memory
//! stays bounded by two pages however long the listing.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use super::{PageRequest, Pager};
use crate::client::{CallOptions, Client, Response};
use crate::error::{Error, Result};
use crate::wire::{FromWire, Page, RawJson};

type Fetched<T> = Result<Response<Page<T>>>;

/// Wraps the read-ahead task's future before it is spawned: a binding uses it to carry the
/// caller's context (e.g. the asyncio loop an async token callable must run on) into the task.
pub type TaskScope<T> =
    Arc<dyn Fn(BoxFuture<'static, Fetched<T>>) -> BoxFuture<'static, Fetched<T>> + Send + Sync>;

pub struct PageStream<T: FromWire + Send + 'static> {
    client: Client,
    pager: Pager,
    page_size: i64,
    call: CallOptions,
    next_page_no: i64,
    /// Items wanted in all: no page is fetched past it, and the last page is cut to it.
    limit: Option<u64>,
    delivered: u64,
    ahead: Option<JoinHandle<Result<Response<Page<T>>>>>,
    finished: bool,
    /// The first item of the last page, to notice a service that repeats a page.
    last_first: Option<RawJson>,
    scope: Option<TaskScope<T>>,
    /// The process the read-ahead task belongs to (a forked child must not wait for it).
    pid: u32,
}

impl<T: FromWire + Send + 'static> PageStream<T> {
    pub fn new(
        client: Client,
        pager: Pager,
        first: PageRequest,
        limit: Option<u64>,
        call: CallOptions,
    ) -> Self {
        PageStream {
            client,
            pager,
            page_size: first.page_size,
            call,
            next_page_no: first.page_no,
            limit,
            delivered: 0,
            ahead: None,
            finished: limit == Some(0),
            last_first: None,
            scope: None,
            pid: crate::process::id(),
        }
    }

    /// Sets how the next read-ahead task is wrapped (see [`TaskScope`]).
    pub fn set_task_scope(&mut self, scope: Option<TaskScope<T>>) {
        self.scope = scope;
    }

    /// The next page, or `None` after the last one. Needs a tokio runtime context (the
    /// read-ahead is a spawned task).
    pub async fn next(&mut self) -> Result<Option<Response<Page<T>>>> {
        if self.finished {
            return Ok(None);
        }
        let requested = self.next_page_no;
        if self.pid != crate::process::id() {
            // Forked: the read-ahead task lives in the parent's runtime, which has no threads
            // here. Forget it (touching it could block) and fetch the page anew.
            std::mem::forget(self.ahead.take());
            self.pid = crate::process::id();
        }
        let fetched = match self.ahead.take() {
            Some(task) => task
                .await
                .map_err(|e| Error::Internal(format!("the page read-ahead task failed: {e}")))?,
            None => {
                fetch(
                    self.client.clone(),
                    self.pager,
                    self.request(requested)?,
                    self.call.clone(),
                )
                .await
            }
        };
        let mut response = match fetched {
            Ok(response) => response,
            Err(error) => {
                self.finished = true;
                return Err(error);
            }
        };
        if let Err(error) = self.check(&response.value, requested) {
            self.finished = true;
            return Err(error);
        }
        if let Some(limit) = self.limit {
            let wanted = limit.saturating_sub(self.delivered);
            response
                .value
                .data
                .truncate(usize::try_from(wanted).unwrap_or(usize::MAX));
        }
        self.delivered += response.value.data.len() as u64;
        self.next_page_no = requested + 1;
        self.last_first = response.value.data.first().map(|item| item.wire().clone());
        let wanted_more = self.limit.is_none_or(|limit| self.delivered < limit);
        if response.value.has_next_page() && wanted_more {
            let request = self.request(self.next_page_no)?;
            let task: BoxFuture<'static, Fetched<T>> = Box::pin(fetch(
                self.client.clone(),
                self.pager,
                request,
                self.call.clone(),
            ));
            let task = match &self.scope {
                Some(scope) => scope(task),
                None => task,
            };
            self.ahead = Some(tokio::spawn(task));
        } else {
            self.finished = true;
        }
        Ok(Some(response))
    }

    fn request(&self, page_no: i64) -> Result<PageRequest> {
        PageRequest::new(page_no, self.page_size)
    }

    fn check(&self, page: &Page<T>, requested: i64) -> Result<()> {
        if page.current != requested {
            return Err(Error::Pagination(format!(
                "asked for page {requested}, the service answered page {}",
                page.current
            )));
        }
        if let (Some(previous), Some(first)) = (&self.last_first, page.data.first()) {
            if previous == first.wire() {
                return Err(Error::Pagination(format!(
                    "page {requested} starts with the same item as page {}: the service is \
                     repeating a page",
                    requested - 1
                )));
            }
        }
        Ok(())
    }
}

impl<T: FromWire + Send + 'static> Drop for PageStream<T> {
    fn drop(&mut self) {
        // A page nobody will read is not worth the round trip. (In a forked child the task
        // is the parent's runtime's: it is left alone.)
        if let Some(task) = self.ahead.take() {
            if self.pid == crate::process::id() {
                task.abort();
            } else {
                std::mem::forget(task);
            }
        }
    }
}

async fn fetch<T: FromWire + Send + 'static>(
    client: Client,
    pager: Pager,
    page: PageRequest,
    call: CallOptions,
) -> Result<Response<Page<T>>> {
    client.list_page(pager, page, &call).await
}
