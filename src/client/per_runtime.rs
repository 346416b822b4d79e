//! Idle connections (or per-runtime HTTP clients), kept per tokio runtime.
//!
//! A connection is registered with the reactor of the runtime that opened it, and is only ever
//! woken by that reactor: used from another runtime it would hang. So each runtime gets its own
//! idle list. Sync calls run on a current-thread runtime of the calling thread: their lists
//! live in a thread-local and die with the thread. Everything else runs on one multi-thread
//! runtime, whose list lives here behind a lock.
//!
//! Both kinds are tied to the process that filled them: in a forked child the inherited
//! entries are forgotten without being dropped (dropping would deregister their sockets from
//! an epoll instance the child shares with its parent, breaking the parent's connections).

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::runtime::{Handle, RuntimeFlavor};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One client's items, one list per runtime.
pub(crate) struct PerRuntime<T> {
    id: u64,
    /// Cleared when the client closes; thread-local lists of other threads check it.
    open: Arc<AtomicBool>,
    shared: Mutex<Slot<T>>,
}

struct Slot<T> {
    pid: u32,
    items: Vec<T>,
}

impl<T> Slot<T> {
    fn new() -> Self {
        Slot {
            pid: crate::process::id(),
            items: Vec::new(),
        }
    }

    /// The items of this process; a forked child forgets the parent's.
    fn items(&mut self) -> &mut Vec<T> {
        let pid = crate::process::id();
        if self.pid != pid {
            std::mem::forget(std::mem::take(&mut self.items));
            self.pid = pid;
        }
        &mut self.items
    }
}

struct LocalEntry {
    id: u64,
    open: Weak<AtomicBool>,
    items: Box<dyn Any>,
}

struct LocalLists {
    pid: u32,
    entries: Vec<LocalEntry>,
}

thread_local! {
    static LOCAL: RefCell<LocalLists> = RefCell::new(LocalLists {
        pid: crate::process::id(),
        entries: Vec::new(),
    });
}

/// Whether the caller runs on a current-thread runtime (a sync call's), whose connections
/// belong to this thread.
fn on_current_thread_runtime() -> bool {
    Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread)
}

impl<T: 'static> PerRuntime<T> {
    pub(crate) fn new() -> Self {
        PerRuntime {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            open: Arc::new(AtomicBool::new(true)),
            shared: Mutex::new(Slot::new()),
        }
    }

    /// Runs `f` on the list of the runtime the caller is on. `f` must not block or await.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Vec<T>) -> R) -> R {
        if !on_current_thread_runtime() {
            let mut slot = crate::sync::lock(&self.shared);
            return f(slot.items());
        }
        // The thread's list is taken out for `f` and put back after, so `f` runs without the
        // thread-local borrowed. (While the thread exits, its locals are gone: then the list
        // is a fresh one that is not kept.)
        let mut items = LOCAL
            .try_with(|local| self.take_local(&mut local.borrow_mut()))
            .unwrap_or_default();
        let done = f(&mut items);
        let _ = LOCAL.try_with(|local| self.put_local(&mut local.borrow_mut(), items));
        done
    }

    fn take_local(&self, local: &mut LocalLists) -> Vec<T> {
        let pid = crate::process::id();
        if local.pid != pid {
            std::mem::forget(std::mem::take(&mut local.entries));
            local.pid = pid;
        }
        // Entries of closed or dropped clients: their connections are closed now.
        local.entries.retain(|entry| {
            entry
                .open
                .upgrade()
                .is_some_and(|open| open.load(Ordering::Acquire))
        });
        local
            .entries
            .iter_mut()
            .find(|entry| entry.id == self.id)
            .and_then(|entry| entry.items.downcast_mut::<Vec<T>>())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn put_local(&self, local: &mut LocalLists, items: Vec<T>) {
        let kept = local
            .entries
            .iter_mut()
            .find(|entry| entry.id == self.id)
            .and_then(|entry| entry.items.downcast_mut::<Vec<T>>());
        match kept {
            Some(kept) => *kept = items,
            None => local.entries.push(LocalEntry {
                id: self.id,
                open: Arc::downgrade(&self.open),
                items: Box::new(items),
            }),
        }
    }

    /// Drops every item this client keeps for the multi-thread runtime; thread-local lists
    /// of other threads are dropped the next time those threads use any client.
    pub(crate) fn close(&self) {
        self.open.store(false, Ordering::Release);
        let items = {
            let mut slot = crate::sync::lock(&self.shared);
            std::mem::take(slot.items())
        };
        drop(items);
        let _ = LOCAL.try_with(|local| {
            if let Ok(mut local) = local.try_borrow_mut() {
                local.entries.retain(|entry| entry.id != self.id);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_per_runtime_and_closed_lists_are_dropped() {
        let pool: PerRuntime<u32> = PerRuntime::new();
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| e.to_string());
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .map_err(|e| e.to_string());
        let (Ok(current), Ok(multi)) = (current, multi) else {
            return;
        };
        current.block_on(async { pool.with(|items| items.push(1)) });
        multi.block_on(async { pool.with(|items| items.push(2)) });
        assert_eq!(
            current.block_on(async { pool.with(|items| items.clone()) }),
            vec![1]
        );
        assert_eq!(
            multi.block_on(async { pool.with(|items| items.clone()) }),
            vec![2]
        );
        pool.close();
        assert!(multi.block_on(async { pool.with(|items| items.is_empty()) }));
        assert!(current.block_on(async { pool.with(|items| items.is_empty()) }));
    }
}
