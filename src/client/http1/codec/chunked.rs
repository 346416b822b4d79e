//! A chunked body (RFC 9112 section 7.1), decoded as its bytes arrive, bounded in every part a
//! server could send without end.

use bytes::{Buf, BytesMut};

use super::head::{may_end_head, MAX_HEADERS};
use super::Malformed;

/// Bytes of chunk extensions (and padding) in one body, all chunk-size lines together; more
/// is refused (hyper's limit too): they carry nothing the client uses, and a server could
/// otherwise send them without end.
const MAX_CHUNK_EXTENSIONS: u64 = 16 * 1024;
/// Bytes of trailer fields after a chunked body; more is refused (hyper's limit too).
const MAX_TRAILERS: usize = 16 * 1024;
/// Bytes of one chunk-size line, its CRLF included; a longer line is refused, whether it
/// arrives whole or in pieces (the same answer is judged alike however the server's writes cut
/// it). No server pads or extends a size line this far; hyper reads longer ones (extensions up
/// to 16 KiB, padding without end), so the difference is on purpose. It also bounds the
/// re-reading of a line that arrives a byte at a time.
const MAX_CHUNK_LINE: usize = 1024;
/// Hex digits of a chunk size (zeros in front included) that httparse reads; hyper reads any
/// number of zeros in front.
const MAX_CHUNK_SIZE_DIGITS: usize = 16;

/// Decodes a chunked body as its bytes arrive.
#[derive(Debug, Default)]
pub(crate) struct Chunked {
    state: ChunkState,
    /// Bytes of the body as they came on the wire (framing, extensions, trailers included):
    /// what `max_response_bytes` counts, so padding cannot make a body read without end.
    wire: u64,
    /// Bytes of chunk-size lines beyond their sizes (extensions, padding), for the body.
    extensions: u64,
    /// Bytes of the trailer section already known to hold no blank line (a trailer section
    /// that comes slowly is scanned once, not again from its start at every read).
    trailers_scanned: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk: this many data bytes left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer fields, up to a blank line.
    Trailers,
    Done,
}

impl Chunked {
    /// The body's bytes on the wire so far (see `wire`).
    pub(crate) fn wire_bytes(&self) -> u64 {
        self.wire
    }

    /// Moves what `input` holds of the body into `out`, consuming it from `input`: `Ok(true)`
    /// once the body is complete (anything after it is left in `input`), `Ok(false)` when more
    /// bytes are needed. Stops early once `out` holds more than `limit` bytes.
    pub(crate) fn decode(
        &mut self,
        input: &mut BytesMut,
        out: &mut BytesMut,
        limit: u64,
    ) -> Result<bool, Malformed> {
        loop {
            match self.state {
                ChunkState::Size => match httparse::parse_chunk_size(input) {
                    Ok(httparse::Status::Complete((used, _))) if used > MAX_CHUNK_LINE => {
                        return Err(Malformed(
                            "a chunk-size line of the answer is too long".to_owned(),
                        ))
                    }
                    Ok(httparse::Status::Complete((used, size))) => {
                        // httparse lets a bare CR or LF pass inside an extension; hyper ends
                        // the line only at CRLF and refuses either alone (found by the
                        // differential fuzzing, `differential/`).
                        let line = input.get(..used.saturating_sub(2)).unwrap_or_default();
                        if !input.get(..used).is_some_and(|l| l.ends_with(b"\r\n"))
                            || line.iter().any(|&b| b == b'\r' || b == b'\n')
                        {
                            return Err(Malformed(
                                "a chunk-size line of the answer has a bare CR or LF".to_owned(),
                            ));
                        }
                        let digits = input.iter().take_while(|b| b.is_ascii_hexdigit()).count();
                        if digits == 0 {
                            // httparse reads a line without digits (`;ext`) as size 0, the
                            // body's end; hyper refuses it, and so does bizmsg.
                            return Err(Malformed(
                                "a chunk-size line of the answer has no size".to_owned(),
                            ));
                        }
                        // The line's own CRLF and size digits are its due; the rest is
                        // extension or padding.
                        self.extensions += used.saturating_sub(digits + 2) as u64;
                        if self.extensions > MAX_CHUNK_EXTENSIONS {
                            return Err(Malformed(format!(
                                "the answer's chunk extensions pass {MAX_CHUNK_EXTENSIONS} bytes"
                            )));
                        }
                        self.wire += used as u64;
                        input.advance(used);
                        self.state = if size == 0 {
                            ChunkState::Trailers
                        } else {
                            ChunkState::Data(size)
                        };
                    }
                    // What has come of the line is already as long as a whole line may be.
                    Ok(httparse::Status::Partial) if input.len() >= MAX_CHUNK_LINE => {
                        return Err(Malformed(
                            "a chunk-size line of the answer is too long".to_owned(),
                        ))
                    }
                    Ok(httparse::Status::Partial) => return Ok(false),
                    Err(_)
                        if input
                            .iter()
                            .take(MAX_CHUNK_SIZE_DIGITS + 1)
                            .take_while(|b| b.is_ascii_hexdigit())
                            .count()
                            > MAX_CHUNK_SIZE_DIGITS =>
                    {
                        return Err(Malformed(format!(
                            "a chunk size of the answer has more than {MAX_CHUNK_SIZE_DIGITS} \
                             digits"
                        )))
                    }
                    Err(_) => {
                        return Err(Malformed(
                            "the answer's chunked body has an invalid chunk size".to_owned(),
                        ))
                    }
                },
                ChunkState::Data(left) => {
                    if input.is_empty() {
                        return Ok(false);
                    }
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    out.extend_from_slice(input.split_to(take).as_ref());
                    self.wire += take as u64;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                    if out.len() as u64 > limit {
                        return Ok(false);
                    }
                }
                ChunkState::DataEnd => {
                    if input.len() < 2 {
                        return Ok(false);
                    }
                    if input.get(..2) != Some(b"\r\n".as_slice()) {
                        return Err(Malformed(
                            "a chunk of the answer is longer than its size".to_owned(),
                        ));
                    }
                    input.advance(2);
                    self.wire += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => {
                    // Parsed once their end may be there: an empty section (the blank line at
                    // once) or a blank line past what was scanned before.
                    let ends = input.starts_with(b"\r\n")
                        || input.starts_with(b"\n")
                        || may_end_head(input, self.trailers_scanned);
                    if !ends {
                        if input.len() > MAX_TRAILERS {
                            return Err(Malformed(format!(
                                "the answer's trailers pass {MAX_TRAILERS} bytes"
                            )));
                        }
                        self.trailers_scanned = input.len();
                        return Ok(false);
                    }
                    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
                    match httparse::parse_headers(input, &mut fields) {
                        Ok(httparse::Status::Complete((used, _)))
                            if !input.get(..used).is_some_and(crlf_lines) =>
                        {
                            // httparse takes LF alone as a line's end; hyper reads trailers
                            // line by line up to CRLF and refuses what that leaves (found by
                            // the differential fuzzing, `differential/`).
                            return Err(Malformed(
                                "the answer's trailers have a bare CR or LF".to_owned(),
                            ));
                        }
                        Ok(httparse::Status::Complete((used, _))) if used <= MAX_TRAILERS => {
                            self.wire += used as u64;
                            input.advance(used);
                            self.state = ChunkState::Done;
                        }
                        Ok(httparse::Status::Complete(_)) => {
                            return Err(Malformed(format!(
                                "the answer's trailers pass {MAX_TRAILERS} bytes"
                            )))
                        }
                        Ok(httparse::Status::Partial) if input.len() > MAX_TRAILERS => {
                            return Err(Malformed(format!(
                                "the answer's trailers pass {MAX_TRAILERS} bytes"
                            )))
                        }
                        Ok(httparse::Status::Partial) => {
                            self.trailers_scanned = input.len();
                            return Ok(false);
                        }
                        Err(e) => {
                            return Err(Malformed(format!(
                                "the answer's trailers are invalid: {e}"
                            )))
                        }
                    }
                }
                ChunkState::Done => return Ok(true),
            }
        }
    }
}

/// Whether every line of `bytes` ends with CRLF, and no CR or LF stands alone.
fn crlf_lines(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().all(|(i, &b)| match b {
        b'\r' => bytes.get(i + 1) == Some(&b'\n'),
        b'\n' => i > 0 && bytes.get(i - 1) == Some(&b'\r'),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn decode_all(
        wire: &[u8],
        pieces: &[usize],
        limit: u64,
    ) -> Result<(Vec<u8>, bool, Vec<u8>), Malformed> {
        let mut decoder = Chunked::default();
        let mut input = BytesMut::new();
        let mut out = BytesMut::new();
        let mut rest = wire;
        let mut sizes = pieces.iter().copied().cycle();
        loop {
            let take = sizes
                .next()
                .unwrap_or(1)
                .clamp(1, rest.len().max(1))
                .min(rest.len());
            let (piece, tail) = rest.split_at(take);
            input.extend_from_slice(piece);
            rest = tail;
            let done = decoder.decode(&mut input, &mut out, limit)?;
            if done || rest.is_empty() || out.len() as u64 > limit {
                return Ok((out.to_vec(), done, input.to_vec()));
            }
        }
    }

    #[test]
    fn chunked_bodies_are_decoded_with_trailers_and_what_follows_is_left() {
        let wire = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        assert_eq!(
            decode_all(wire, &[wire.len()], u64::MAX),
            Ok((b"hello world".to_vec(), true, b"NEXT".to_vec()))
        );
        assert_eq!(
            decode_all(b"0\r\n\r\n", &[1], u64::MAX),
            Ok((Vec::new(), true, Vec::new()))
        );
        assert!(decode_all(b"5\r\nhello!!\r\n0\r\n\r\n", &[64], u64::MAX).is_err());
        assert!(decode_all(b"zz\r\nhello\r\n0\r\n\r\n", &[64], u64::MAX).is_err());
        let (out, done, _) =
            decode_all(b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", &[64], 7).unwrap_or_default();
        assert!(!done && out.len() > 7 && out.len() <= 10, "{out:?}");
    }

    /// Found by the differential fuzzing against hyper: a chunk-size line, and a trailer line,
    /// ends only at CRLF; a bare LF or CR in it (inside an extension, after the size, in a
    /// trailer) is refused, as hyper refuses it, never read as the line's end.
    #[test]
    fn a_chunk_size_line_with_a_bare_cr_or_lf_is_refused() {
        for wire in [
            &b"1;\name=\"quoted;value\"\r\n\0\r\n0\r\n\r\n"[..],
            b"1;a\rb\r\nx\r\n0\r\n\r\n",
            b"1\nx\r\n0\r\n\r\n",
            b"1\r\nx\r\n0;e\n\r\n\r\n",
            // The same in the trailers.
            b"1\r\nx\r\n0\r\nX-Long: a\nX-Checksum: abc\r\n\r\n",
            b"1\r\nx\r\n0\r\nX-Long: a\r\n\n",
            b"1\r\nx\r\n0\r\n\n",
            // A line without its size is not the last chunk.
            b"1\r\nx\r\n;n\r\n\r\n",
            b"1\r\nx\r\n\r\n\r\n",
        ] {
            let refused = decode_all(wire, &[wire.len()], u64::MAX);
            assert!(
                refused.is_err(),
                "{:?}: {refused:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    /// Extensions and padding of chunk-size lines are capped per body, the
    /// trailers too, and the wire bytes of a body are counted (what max_response_bytes caps).
    #[test]
    fn extensions_trailers_and_wire_bytes_are_bounded() {
        let extended: Vec<u8> = (0..20)
            .flat_map(|_| {
                let mut chunk = b"1;".to_vec();
                chunk.extend(std::iter::repeat_n(b'e', 996));
                chunk.extend_from_slice(b"\r\nx\r\n");
                chunk
            })
            .collect();
        let refused = decode_all(&extended, &[4096], u64::MAX).unwrap_err();
        assert!(refused.0.contains("chunk extensions"), "{}", refused.0);
        // Small extensions, as servers send them, stay fine.
        assert!(decode_all(b"1;a=1\r\nx\r\n0;b\r\n\r\n", &[3], u64::MAX).is_ok());
        let mut trailers = b"0\r\n".to_vec();
        for n in 0..2000 {
            trailers.extend_from_slice(format!("x-{n}: v\r\n").as_bytes());
        }
        trailers.extend_from_slice(b"\r\n");
        let refused = decode_all(&trailers, &[7], u64::MAX).unwrap_err();
        assert!(refused.0.contains("trailers pass"), "{}", refused.0);
        let mut decoder = Chunked::default();
        let mut input = BytesMut::from(&b"5\r\nhello\r\n0\r\nt: 1\r\n\r\n"[..]);
        let mut out = BytesMut::new();
        assert_eq!(decoder.decode(&mut input, &mut out, u64::MAX), Ok(true));
        assert_eq!(decoder.wire_bytes(), 21);
    }

    /// A chunk-size line past MAX_CHUNK_LINE is refused whether it arrives whole or in pieces
    /// (it was refused only when a read ended more than 1 KiB into it; found by a review of
    /// the differential fuzzing); one at the limit is read either way. A size of more than 16
    /// digits says so.
    #[test]
    fn a_long_chunk_size_line_is_judged_alike_however_it_arrives() {
        let line = |length: usize| {
            let mut wire = b"1;".to_vec();
            wire.resize(length - 2, b'e');
            wire.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
            wire
        };
        for pieces in [&[usize::MAX][..], &[1], &[700], &[1023], &[1024]] {
            let refused = decode_all(&line(MAX_CHUNK_LINE + 1), pieces, u64::MAX).unwrap_err();
            assert!(
                refused.0.ends_with("is too long"),
                "{pieces:?}: {}",
                refused.0
            );
            let (body, done, _) = decode_all(&line(MAX_CHUNK_LINE), pieces, u64::MAX).unwrap();
            assert_eq!((body.as_slice(), done), (&b"x"[..], true), "{pieces:?}");
        }
        let padded = b"00000000000000001\r\nx\r\n0\r\n\r\n";
        let refused = decode_all(padded, &[usize::MAX], u64::MAX).unwrap_err();
        assert!(refused.0.ends_with("more than 16 digits"), "{}", refused.0);
        let (body, _, _) = decode_all(&padded[1..], &[usize::MAX], u64::MAX).unwrap();
        assert_eq!(body, b"x");
    }

    proptest! {
        /// However the bytes arrive, a chunked body decodes to what was encoded, the message
        /// ends where it ends, and the bytes after it are left untouched.
        #[test]
        fn chunked_decoding_does_not_depend_on_how_bytes_arrive(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..40), 0..8),
            pieces in proptest::collection::vec(1usize..20, 1..8),
            trailer in any::<bool>(),
        ) {
            let mut wire = Vec::new();
            for chunk in &chunks {
                wire.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                wire.extend_from_slice(chunk);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"0\r\n");
            if trailer {
                wire.extend_from_slice(b"t: v\r\n");
            }
            wire.extend_from_slice(b"\r\nHTTP/1.1");
            let (out, done, rest) = decode_all(&wire, &pieces, u64::MAX)
                .map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert!(done);
            prop_assert_eq!(out, chunks.concat());
            // What arrived after the end stays in the input, whole or in part.
            prop_assert!(b"HTTP/1.1".starts_with(&rest));
        }
    }
}
