//! An answer's head: its status, how its body is framed, whether the connection may be kept.

use http::Method;

use super::Malformed;

/// The largest answer head accepted (status line and headers); a longer one is refused rather
/// than buffered without end.
pub(crate) const MAX_HEAD: usize = 256 * 1024;
/// Headers in one answer head (hyper's default too); more is refused.
pub(super) const MAX_HEADERS: usize = 100;

/// How an answer's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body at all (a 204 or 304, or the answer to a HEAD).
    Empty,
    Length(u64),
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
}

/// Whether a head's end (a blank line: `\n\n` or `\n\r\n`) may be in `buf` past the first
/// `scanned` bytes, which held none (the few bytes before them are looked at again, as a blank
/// line may straddle the two parts).
pub(crate) fn may_end_head(buf: &[u8], scanned: usize) -> bool {
    let fresh = buf.get(scanned.saturating_sub(2)..).unwrap_or_default();
    fresh
        .windows(2)
        .any(|pair| pair == b"\n\n" || pair == b"\n\r")
}

/// What the client needs from an answer's head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    /// Bytes of the head, blank line included.
    pub(crate) len: usize,
    pub(crate) framing: Framing,
    /// The connection may take another request after this answer (HTTP/1.1, no
    /// `Connection: close`, a body delimited without closing).
    pub(crate) keep_alive: bool,
    pub(crate) request_id: Option<String>,
    pub(crate) retry_after: Option<String>,
    /// `Keep-Alive: timeout=N`: how long the server keeps the connection once idle.
    pub(crate) keep_alive_timeout: Option<std::time::Duration>,
}

impl Head {
    /// An interim answer (100 Continue, 103 Early Hints): skipped, the real one follows.
    /// (101 is refused by [`parse_head`].)
    pub(crate) fn is_interim(&self) -> bool {
        (100..200).contains(&self.status)
    }
}

/// Parses an answer head at the start of `buf`: `Ok(None)` when more bytes are needed.
pub(crate) fn parse_head(buf: &[u8], request: &Method) -> Result<Option<Head>, Malformed> {
    // Left uninitialized: httparse fills what it uses. Initializing all 100 (3.2 KB) for every
    // answer stood out in a campaign's profile.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buf,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Err(Malformed(format!(
                "the answer's head is larger than {MAX_HEAD} bytes"
            )))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Malformed(format!(
                "the answer has more than {MAX_HEADERS} headers"
            )))
        }
        Err(e) => return Err(Malformed(format!("the answer is not valid HTTP/1.1: {e}"))),
    };
    let status = response.code.unwrap_or_default();
    if !(100..=599).contains(&status) {
        // httparse reads any three digits: 099, 000 and 600 are not HTTP statuses, and an
        // answer that carries one cannot be judged.
        return Err(Malformed(format!(
            "the answer's status {status:03} is not an HTTP status (100 to 599)"
        )));
    }
    if status == 101 {
        // Never asked for (no request carries Upgrade): the connection is no longer HTTP.
        return Err(Malformed(
            "the answer is 101 Switching Protocols, which no request asked for".to_owned(),
        ));
    }
    let http11 = response.version == Some(1);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut close = false;
    let mut keep_alive_header = false;
    let mut request_id = None;
    let mut retry_after = None;
    let mut keep_alive_timeout = None;
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(header.value)
                .ok()
                .map(|v| v.trim_matches([' ', '\t']))
                .and_then(|v| {
                    // Digits only: `+5` and `-0` parse as u64 in Rust, and are not lengths.
                    v.bytes()
                        .all(|b| b.is_ascii_digit())
                        .then(|| v.parse::<u64>().ok())
                        .flatten()
                })
                .ok_or_else(|| {
                    Malformed(format!(
                        "the answer's Content-Length {:?} is not a length",
                        String::from_utf8_lossy(header.value)
                    ))
                })?;
            if length.is_some_and(|seen| seen != value) {
                return Err(Malformed(
                    "the answer has two different Content-Length headers".to_owned(),
                ));
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            // Codings are tokens: a value that is not visible ASCII cannot say how the body
            // is framed (hyper then reads the body to the close, a framing the server did not
            // mean; found by the differential fuzzing, `differential/`).
            if !header
                .value
                .iter()
                .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
            {
                return Err(Malformed(format!(
                    "the answer's Transfer-Encoding {:?} is not readable",
                    String::from_utf8_lossy(header.value)
                )));
            }
            // Only the last coding decides whether the body is chunked.
            let value = String::from_utf8_lossy(header.value);
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for option in String::from_utf8_lossy(header.value).split(',') {
                let option = option.trim();
                close |= option.eq_ignore_ascii_case("close");
                keep_alive_header |= option.eq_ignore_ascii_case("keep-alive");
            }
        } else if name.eq_ignore_ascii_case("x-request-id") {
            request_id = text(header.value);
        } else if name.eq_ignore_ascii_case("retry-after") {
            retry_after = text(header.value);
        } else if name.eq_ignore_ascii_case("keep-alive") {
            keep_alive_timeout = keep_alive_timeout_of(header.value).or(keep_alive_timeout);
        }
    }
    if transfer_encoding && !http11 {
        // RFC 9112 6.1: no Transfer-Encoding in an answer to HTTP/1.0 terms; its framing
        // cannot be trusted (chunked or not), so the answer is not read as one.
        return Err(Malformed(
            "the answer is HTTP/1.0 with Transfer-Encoding, a framing that cannot be trusted"
                .to_owned(),
        ));
    }
    let framing = if *request == Method::HEAD || status == 204 || status == 304 || status < 200 {
        Framing::Empty
    } else if transfer_encoding {
        // RFC 9112 6.3: Transfer-Encoding overrides Content-Length; a coding other than
        // chunked last runs until the connection closes.
        if chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else if let Some(length) = length {
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    let keep_alive = !close
        && (http11 || keep_alive_header)
        && framing != Framing::UntilClose
        // A message with both is a sign of request smuggling: its connection is not reused
        // (RFC 9112 6.1, 6.3).
        && !(transfer_encoding && length.is_some());
    Ok(Some(Head {
        status,
        len,
        framing,
        keep_alive,
        request_id,
        retry_after,
        keep_alive_timeout,
    }))
}

/// The `timeout=N` parameter of a `Keep-Alive` header (RFC 9112 does not define the header;
/// servers that send it, Apache among them, mean seconds).
fn keep_alive_timeout_of(value: &[u8]) -> Option<std::time::Duration> {
    String::from_utf8_lossy(value).split(',').find_map(|part| {
        let (name, seconds) = part.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("timeout") {
            return None;
        }
        let seconds: u64 = seconds.trim().trim_matches('"').parse().ok()?;
        Some(std::time::Duration::from_secs(seconds))
    })
}

/// A header value as text, when it is text.
fn text(value: &[u8]) -> Option<String> {
    std::str::from_utf8(value).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bytes::BytesMut;
    use proptest::prelude::*;

    use crate::client::http1::codec::Chunked;

    fn head(text: &str) -> Result<Option<Head>, Malformed> {
        parse_head(text.as_bytes(), &Method::POST)
    }

    #[test]
    fn heads_are_framed_as_rfc_9112_says() {
        let text =
            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX-Request-Id: r-1\r\nRetry-After: 3\r\n\r\n";
        let parsed = head(&format!("{text}rest")).ok().flatten();
        assert_eq!(
            parsed,
            Some(Head {
                status: 200,
                len: text.len(),
                framing: Framing::Length(12),
                keep_alive: true,
                request_id: Some("r-1".into()),
                retry_after: Some("3".into()),
                keep_alive_timeout: None,
            })
        );
        let apache =
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nKeep-Alive: timeout=5, max=100\r\n\r\n";
        assert_eq!(
            head(apache)
                .ok()
                .flatten()
                .and_then(|h| h.keep_alive_timeout),
            Some(std::time::Duration::from_secs(5))
        );
        // (head, framing, reusable)
        let cases = [
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                Framing::Chunked,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                Framing::UntilClose,
                false,
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n",
                Framing::Chunked,
                false,
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", Framing::UntilClose, false),
            (
                "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
                Framing::Empty,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, Close\r\n\r\n",
                Framing::Length(2),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
                Framing::Length(2),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n",
                Framing::Length(2),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
                Framing::Length(2),
                true,
            ),
        ];
        for (text, framing, reusable) in cases {
            let parsed = head(text).ok().flatten().map(|h| (h.framing, h.keep_alive));
            assert_eq!(parsed, Some((framing, reusable)), "{text:?}");
        }
        assert_eq!(
            parse_head(
                b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n",
                &Method::HEAD
            )
            .ok()
            .flatten()
            .map(|h| h.framing),
            Some(Framing::Empty)
        );
        assert!(head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n").is_err());
        let interim = head("HTTP/1.1 100 Continue\r\n\r\n").ok().flatten();
        assert!(interim.is_some_and(|h| h.is_interim() && h.framing == Framing::Empty));
    }

    #[test]
    fn a_head_end_is_found_across_two_reads() {
        let whole = b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n";
        // Whatever the last read brought (at least the head's last byte), the end is seen.
        for scanned in 0..whole.len() {
            assert!(may_end_head(whole, scanned), "missed after {scanned} bytes");
        }
        assert!(!may_end_head(b"HTTP/1.1 200 OK\r\nA: b\r", 0));
        assert!(may_end_head(b"HTTP/1.1 200 OK\nA: b\n\n", 10));
        // Not looked at: what was scanned before, beyond the two bytes kept.
        assert!(!may_end_head(b"\n\nabcdef", 5));
    }

    #[test]
    fn bad_heads_are_refused_and_partial_ones_wait() {
        assert_eq!(head("HTTP/1.1 200 OK\r\nContent-Len"), Ok(None));
        assert_eq!(head(""), Ok(None));
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "SMTP ready\r\n\r\n",
            // Three digits that are no HTTP status.
            "HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 000 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n",
            // An HTTP/1.0 answer's Transfer-Encoding cannot be trusted.
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            // Found by the differential fuzzing: a coding that is not visible ASCII.
            "HTTP/1.1 200\r\nTransfer-Encoding: chu\u{ff}ked, chunked\r\nContent-Length: 0\r\n\r\n",
        ] {
            assert!(head(bad).is_err(), "{bad:?} was accepted");
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: y\r\n")).collect();
        assert!(head(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")).is_err());
        let huge = format!("HTTP/1.1 200 OK\r\nx: {}", "y".repeat(MAX_HEAD));
        assert!(head(&huge).is_err());
    }

    proptest! {
        /// Any bytes as an answer head: parsed, refused or waited for, never a panic.
        #[test]
        fn any_head_is_judged_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_head(&bytes, &Method::GET);
            let mut input = BytesMut::from(bytes.as_slice());
            let _ = Chunked::default().decode(&mut input, &mut BytesMut::new(), 64);
        }
    }
}
