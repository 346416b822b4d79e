//! What the connection task (`server.rs`) puts on every request it serves, for the handlers
//! (`routes.rs`) and the request log (`log.rs`) to read. Apart from the server, so that those
//! two need not import the server that imports them.

use std::sync::Arc;

use tokio::sync::Notify;

/// Lets a request handler drop the connection it arrived on without answering. Put into every
/// request's extensions by the connection task.
#[derive(Clone)]
pub(crate) struct CutSignal(pub(super) Arc<Notify>);

impl CutSignal {
    pub(crate) fn cut(&self) {
        // `notify_one` keeps a permit, so a cut is not lost if the connection task is busy.
        self.0.notify_one();
    }
}

/// Which TCP connection (numbered from 1 in accept order) a request arrived on, so tests can
/// see keep-alive reuse. Put into every request's extensions by the connection task.
#[derive(Clone, Copy)]
pub(crate) struct ConnectionNumber(pub(crate) u64);
