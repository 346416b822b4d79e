//! What a call learned about itself, beside the result. A leaf below `client` and `error`:
//! a call's answer carries it, and so do the errors a call raises.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub status_code: u16,
    pub request_id: Option<String>,
    /// From the first attempt's start to the last byte of the answer.
    pub elapsed: Duration,
    pub attempts: u32,
    /// The `Idempotency-Key` a send went out with.
    pub idempotency_key: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Response<T> {
    pub value: T,
    pub meta: Meta,
}
