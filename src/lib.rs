//! bizmsg: a client for the Business Chat Messaging Service.
//!
//! The crate is a pure-Rust core (HTTP client, wire models, errors, embedded sandbox server).
//! The Python bindings live in [`python`] behind the `python` feature, so `cargo test` builds
//! and tests the core without a Python interpreter.

// Library code may not index (a panic); tests may, where a wrong index is a failed test.
#![cfg_attr(test, allow(clippy::indexing_slicing))]

pub mod api;
pub mod campaign;
pub mod client;
pub mod counting;
pub mod error;
pub mod fuzzing;
pub mod limits;
pub mod masking;
pub mod meta;
#[cfg(test)]
mod module_cycles;
pub mod platform;
pub mod process;
pub mod sandbox;
mod sync;
#[cfg(test)]
mod test_servers;
pub mod validate;
pub mod wire;

#[cfg(feature = "python")]
mod python;

pub use client::{CallOptions, Client, ClientConfig, Timeout};
pub use error::{Error, Result};
