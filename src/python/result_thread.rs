//! The thread that hands async results back to Python.
//!
//! pyo3-async-runtimes sets each asyncio result from a closure it passes to the runtime's
//! `spawn_blocking`. On tokio's blocking pool every such closure would wake a pooled thread,
//! create a Python thread state, take the GIL from the event loop, and destroy the state again:
//! per request. This one thread keeps its thread state for life and runs every closure queued
//! while it waited under a single GIL acquisition, so a busy event loop gives the GIL up once
//! per batch instead of once per result.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use pyo3::prelude::*;

pub(crate) type Job = Box<dyn FnOnce() + Send>;

enum Message {
    Run(Job),
    Stop,
}

struct Worker {
    pid: u32,
    sender: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

static WORKER: Mutex<Option<Worker>> = Mutex::new(None);

/// Queues `job` to run with the GIL held; hands it back when no thread can be had (the
/// interpreter is exiting, or the thread could not start).
pub(crate) fn submit(job: Job) -> Result<(), Job> {
    if super::runtime::exiting() {
        return Err(job);
    }
    let pid = std::process::id();
    let mut slot = WORKER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if slot.as_ref().is_none_or(|worker| worker.pid != pid) {
        // In a forked child the parent's thread does not exist; its channel is forgotten.
        if let Some(inherited) = slot.take() {
            std::mem::forget(inherited);
        }
        let (sender, receiver) = channel();
        let thread = std::thread::Builder::new()
            .name("bizmsg-results".to_owned())
            .spawn(move || run(receiver));
        match thread {
            Ok(thread) => {
                *slot = Some(Worker {
                    pid,
                    sender,
                    thread: Some(thread),
                })
            }
            Err(_) => return Err(job),
        }
    }
    let Some(worker) = slot.as_ref() else {
        return Err(job);
    };
    worker
        .sender
        .send(Message::Run(job))
        .map_err(|failed| match failed.0 {
            Message::Run(job) => job,
            Message::Stop => Box::new(|| {}),
        })
}

fn run(mut receiver: Receiver<Message>) {
    Python::attach(|py| loop {
        // The receiver moves into the GIL-free wait and back (it cannot be shared by reference).
        let (back, message) = py.detach(move || {
            let message = receiver.recv();
            (receiver, message)
        });
        receiver = back;
        let Ok(Message::Run(first)) = message else {
            return;
        };
        run_one(first);
        while let Ok(message) = receiver.try_recv() {
            match message {
                Message::Run(job) => run_one(job),
                Message::Stop => return,
            }
        }
    });
}

fn run_one(job: Job) {
    // A panicking job must not take the thread (and every later result) with it.
    let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
}

/// Stops the thread and waits for it, with the GIL released so it can finish its batch.
/// Called from the `atexit` hook, before the interpreter finalizes.
pub(crate) fn stop(py: Python<'_>) {
    let taken = WORKER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    let Some(mut worker) = taken else { return };
    if worker.pid != std::process::id() {
        std::mem::forget(worker);
        return;
    }
    let _ = worker.sender.send(Message::Stop);
    if let Some(thread) = worker.thread.take() {
        py.detach(move || {
            let _ = thread.join();
        });
    }
}
