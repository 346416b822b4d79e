//! HTTP/1.1 as bizmsg writes and reads it (RFC 9112): a request serialised into
//! one buffer, an answer's head parsed by httparse, and its body framed by `Content-Length`,
//! chunked transfer coding, or the end of the connection.
//!
//! This is the whole protocol surface of one request shape: no pipelining, no upgrades, no
//! request trailers. Keeping it this small is what lets an exchange cost one write and, for a
//! small answer, one read, with no allocation beyond the answer's own bytes (see
//! `connection.rs`). Every function here is pure (bytes in, bytes or a decision out), so the
//! framing rules are tested without a socket.
//!
//! `request.rs` writes a request, `head.rs` reads an answer's head and how its body is framed,
//! `chunked.rs` decodes a chunked body.

mod chunked;
mod head;
mod request;

use bytes::BytesMut;
use http::Method;

pub(crate) use chunked::Chunked;
pub(crate) use head::{may_end_head, parse_head, Framing, MAX_HEAD};
pub(crate) use request::encode_request;

/// Why an answer could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) String);

/// For the fuzzers (`crate::fuzzing`): the head parser and the chunked decoder on any bytes. What
/// must hold: no panic; a parsed head lies within the bytes; a decoded body is never longer
/// than what was consumed to decode it.
pub(crate) fn check_any_answer(data: &[u8]) {
    for method in [Method::GET, Method::POST, Method::HEAD] {
        if let Ok(Some(head)) = parse_head(data, &method) {
            assert!(head.len <= data.len(), "a head longer than its bytes");
            let mut input = BytesMut::from(data.get(head.len..).unwrap_or_default());
            let before = input.len();
            let mut out = BytesMut::new();
            let _ = Chunked::default().decode(&mut input, &mut out, u64::MAX);
            assert!(
                out.len() <= before - input.len(),
                "more body than bytes read"
            );
        }
    }
    let mut input = BytesMut::from(data);
    let mut out = BytesMut::new();
    let _ = Chunked::default().decode(&mut input, &mut out, 16);
    assert!(
        out.len() <= data.len() - input.len(),
        "more body than bytes read"
    );
}
