//! The HTTP/1.1 transport's reading, fuzzed differentially against hyper's client.
//!
//! bizmsg keeps its own HTTP/1.1 codec for speed (CONTRIBUTING.md, "Architecture"); it must then be at
//! least as strict as hyper, the client most Rust HTTP stacks stand on. Each answer is served
//! over a real loopback socket, cut into writes, once to a bizmsg connection and once to
//! `hyper::client::conn::http1`. What must hold:
//!
//! - an answer hyper refuses, bizmsg refuses too (bizmsg is never the laxer of the two);
//! - where both read an answer, they read the same status and the same body, byte for byte;
//! - bizmsg never hangs, and refuses what hyper reads only for a reason it means to
//!   (`REFUSED_ON_PURPOSE`: a status outside 100–599, `101` to a request that asked for no
//!   upgrade, a `Content-Length` that is not digits or two that disagree, a
//!   `Transfer-Encoding` that is not text or on HTTP/1.0, trailers with a bare LF, and bizmsg's
//!   caps: interim answers, a chunk-size line and its digits, the head, extensions, trailers).
//!
//! Two drivers ask it:
//!
//! - a bounded property pass in `cargo test` (`generated.rs`): answers built from real and
//!   broken pieces, then damaged at random places, for `BIZMSG_FUZZ_SECONDS` (default 2; CI
//!   gives it 60), from a seed of the clock (`BIZMSG_FUZZ_SEED` replays one);
//! - the cargo-fuzz target `fuzz/fuzz_targets/differential.rs`, coverage-guided, through
//!   [`read_alike`] (public with the `fuzzing` feature, as `bizmsg::fuzzing::read_alike`).
//!
//! A test harness, never part of a build for users (compiled for tests and with `fuzzing`):
//! it unwraps, as a failed setup is a failed run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[cfg(test)]
mod generated;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::connection::{Conn, RequestHead};
use super::connector::Connector;
use crate::client::body::OutgoingBody;
use crate::client::request::Outgoing;

/// How long either client may take to read one answer (the server always closes after its
/// last byte, so only a client that ignores the close would wait this long).
const READ_BOUND: Duration = Duration::from_secs(5);
/// A reading that did not end within `READ_BOUND`.
const NO_ANSWER: &str = "no answer within the bound";
/// Far above any generated body: the cap plays no part here (it has tests of its own).
const LIMIT: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reading {
    Answer { status: u16, body: Vec<u8> },
    Refused(String),
}

/// One answer and where the server cuts its writes.
#[derive(Debug, Clone)]
struct Case {
    bytes: Vec<u8>,
    cuts: Vec<usize>,
}

/// Serves `case` to each of the next `connections` connections: reads the request's head,
/// writes the answer in its pieces (yielding between them, so the client reads partial
/// answers), then closes.
async fn serve(listener: TcpListener, case: Case, connections: usize) {
    for _ in 0..connections {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let mut start = 0;
        for &cut in case.cuts.iter().chain(std::iter::once(&case.bytes.len())) {
            let end = cut.clamp(start, case.bytes.len());
            // A client that refused the answer may have closed already: the rest is moot.
            if socket.write_all(&case.bytes[start..end]).await.is_err() {
                break;
            }
            start = end;
            tokio::task::yield_now().await;
        }
        let _ = socket.shutdown().await;
    }
}

async fn read_with_bizmsg(address: SocketAddr) -> Reading {
    let url = reqwest::Url::parse(&format!("http://{address}/v1/answers")).unwrap();
    let connector = Connector::new(&url, None, None, None, READ_BOUND).unwrap();
    let mut conn = Conn::new(connector.connect().await.unwrap());
    let request = Outgoing {
        method: Method::GET,
        url: url.as_str().parse::<Uri>().unwrap(),
        headers: Vec::new(),
        body: OutgoingBody::empty(),
        fresh_connection: false,
        timed: false,
    };
    let head = RequestHead {
        host: HeaderValue::from_str(&address.to_string()).unwrap(),
        absolute: None,
        proxy_authorization: None,
    };
    match tokio::time::timeout(READ_BOUND, conn.exchange(request, &head, LIMIT)).await {
        // An answer over the cap (a length declared past it: nothing is read) is refused by
        // the caller as `ResponseTooLargeError`, never taken.
        Ok(Ok((reply, _))) if reply.oversized.is_some() => {
            Reading::Refused("over max_response_bytes".to_owned())
        }
        Ok(Ok((reply, _))) => Reading::Answer {
            status: reply.status,
            body: reply.body.to_vec(),
        },
        Ok(Err(failed)) => Reading::Refused(failed.error.to_string()),
        Err(_) => Reading::Refused(NO_ANSWER.to_owned()),
    }
}

async fn read_with_hyper(address: SocketAddr) -> Reading {
    let stream = TcpStream::connect(address).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let request = http::Request::get("/v1/answers")
        .header(http::header::HOST, address.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let read = tokio::time::timeout(READ_BOUND, async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body.to_vec()))
    })
    .await;
    driver.abort();
    match read {
        Ok(Ok((status, body))) => Reading::Answer { status, body },
        Ok(Err(error)) => Reading::Refused(error),
        Err(_) => Reading::Refused(NO_ANSWER.to_owned()),
    }
}

/// A loopback address of its own for each case's server. The server closes first, so each case
/// leaves its connections in TIME_WAIT on the listener's port; at tens of thousands of cases a
/// minute, listeners all on 127.0.0.1 ran out of ports (`AddrInUse`, with two runs at once).
/// A port in use on one address is free on the others.
fn next_loopback() -> Ipv4Addr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let octet = |value: u32| u8::try_from(value).unwrap();
    Ipv4Addr::new(
        127,
        octet(1 + n / 62_500 % 250),
        octet(n / 250 % 250),
        octet(1 + n % 250),
    )
}

/// Both clients' reading of `case`, on this thread's runtime (one per thread, kept: the fuzzer
/// and the property pass call this for every case).
fn read_both_now(case: Case) -> (Reading, Reading) {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
    }
    RUNTIME.with(|runtime| runtime.block_on(read_both(case)))
}

/// Both clients' reading of `case`, each on a connection of its own to one server.
async fn read_both(case: Case) -> (Reading, Reading) {
    let listener = TcpListener::bind((next_loopback(), 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(serve(listener, case, 2));
    let ours = read_with_bizmsg(address).await;
    let theirs = read_with_hyper(address).await;
    server.abort();
    (ours, theirs)
}

/// What bizmsg alone refuses on purpose (a distinctive part of each reason); any other answer
/// hyper reads and bizmsg refuses is a defect, as a send refused wrongly is an unknown outcome.
const REFUSED_ON_PURPOSE: &[&str] = &[
    // Never asked for: no request carries Upgrade.
    "Switching Protocols, which no request asked for",
    // Digits only (hyper also takes a list of equal values, and a bad one on a 204 or 304).
    "is not a length",
    // Three digits that are no status (hyper takes 100 to 999).
    "is not an HTTP status (100 to 599)",
    // Not visible ASCII: hyper then reads the body to the close.
    "is not readable",
    // A bare LF among trailers: hyper reads on to the next blank CRLF line (and drops what it
    // cannot parse), httparse ends the section at the LF; framed two ways, the answer is
    // refused rather than leave bytes on the connection (found with BIZMSG_FUZZ_SEED=1795643431).
    "the answer's trailers have a bare CR or LF",
    // Transfer-Encoding on an HTTP/1.0 answer, whatever its status: hyper
    // reads a 204 or 304 such as this, whose framing does not matter, as empty (found with
    // BIZMSG_FUZZ_SEED=1795659066).
    "the answer is HTTP/1.0 with Transfer-Encoding, a framing that cannot be trusted",
    // Lengths that disagree (RFC 9112 6.3: a smuggling sign), even where hyper ignores them
    // (a 204, a 304, an interim answer, chunked framing).
    "the answer has two different Content-Length headers",
    // bizmsg's caps, where hyper has none or a looser one: interim answers (hyper skips any
    // number), a chunk-size line (hyper reads extensions up to 16 KiB and padding without
    // end), a size's digits (hyper takes any number of zeros in front), the head (hyper: about
    // 400 KiB), extensions (bizmsg counts padding too), and trailers (hyper refuses at about
    // the same 16 KiB, counted its own way: a section near the cap may fall between).
    "interim (1xx) answers",
    "a chunk-size line of the answer is too long",
    "a chunk size of the answer has more than",
    "the answer's head is larger than",
    "the answer's chunk extensions pass",
    "the answer's trailers pass",
];

/// Why a reading differs in a way that is a defect of bizmsg, if it does.
fn defect(ours: &Reading, theirs: &Reading) -> Option<String> {
    match (ours, theirs) {
        (Reading::Answer { .. }, Reading::Refused(why)) => Some(format!(
            "bizmsg took an answer hyper refuses ({why}): {ours:?}"
        )),
        (Reading::Answer { .. }, Reading::Answer { .. }) if ours != theirs => {
            Some(format!("bizmsg read {ours:?}, hyper read {theirs:?}"))
        }
        // The reason exactly: a server's Content-Length is quoted in another reason.
        (Reading::Refused(why), _) if why == NO_ANSWER => {
            Some(format!("bizmsg hung on an answer (hyper: {theirs:?})"))
        }
        (Reading::Refused(why), Reading::Answer { .. })
            if !REFUSED_ON_PURPOSE.iter().any(|reason| why.contains(reason)) =>
        {
            Some(format!(
                "bizmsg refused an answer hyper reads ({why}), not on purpose: {theirs:?}"
            ))
        }
        _ => None,
    }
}

/// Reads `data` as an answer with both clients and panics (the fuzzer's signal) where
/// bizmsg's reading is a defect (see the module's comment). `data[0]` is how many bytes the
/// server writes at a time (0: all at once); the rest is the answer, served as it is (an
/// answer of `LIMIT` bytes or more is not tried).
pub fn read_alike(data: &[u8]) {
    let Some((&piece, answer)) = data.split_first() else {
        return;
    };
    // Past `LIMIT` bizmsg refuses by max_response_bytes (a cap of its own, tested apart).
    if answer.len() as u64 >= LIMIT {
        return;
    }
    let cuts = match usize::from(piece) {
        0 => Vec::new(),
        piece => (piece..answer.len()).step_by(piece).collect(),
    };
    let case = Case {
        bytes: answer.to_vec(),
        cuts,
    };
    let (ours, theirs) = read_both_now(case);
    if let Some(defect) = defect(&ours, &theirs) {
        panic!(
            "{defect}\nthe answer: {:?}",
            String::from_utf8_lossy(answer)
        );
    }
}
