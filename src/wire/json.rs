//! Reading the service's JSON: a pull parser (jiter) walked once over a body, and the tolerant
//! field rules every model shares: the spec shows strings, a real service may send numbers; a
//! field may be missing or null; unknown fields are skipped (and kept in the raw text).
//!
//! Nothing is decoded into an intermediate tree: a model's fields are read straight from the
//! bytes, and each model keeps the exact text of its object ([`RawJson`], a cheap slice of the
//! body), from which `to_dict()` is built only when asked.

use bytes::Bytes;
use jiter::{Jiter, JiterError, Peek};

use super::decode_error::{DecodeError, DecodeResult as Result};
use crate::masking::truncate;

/// The JSON text of one object exactly as received.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RawJson(pub Bytes);

impl RawJson {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its start, for error messages.
    pub fn snippet(&self) -> String {
        snippet(&self.0)
    }
}

/// The first 200 characters of a body, for error messages.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    truncate(&String::from_utf8_lossy(bytes), 200)
}

/// A field whose type the spec leaves open (`smsId`, `status`, `code`): kept as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scalar {
    Text(String),
    /// A JSON number, as written (`0`, `17`, `1.5e3`, or an integer beyond 64 bits).
    Number(String),
    Bool(bool),
}

impl Scalar {
    /// As text: a string trimmed, a number as written, `true`/`false`. Codes are compared so,
    /// which makes `0` and `"0"` one code.
    pub fn text(&self) -> &str {
        match self {
            Scalar::Text(text) => text.trim(),
            // The integer -0 is 0 (as Python reads it); JSON allows no other spelling of it.
            Scalar::Number(number) if number == "-0" => "0",
            Scalar::Number(number) => number,
            Scalar::Bool(true) => "true",
            Scalar::Bool(false) => "false",
        }
    }
}

/// A body being read: the parser and the bytes it reads, to slice objects out of.
pub struct Reader<'a> {
    pub(crate) jiter: Jiter<'a>,
    body: &'a Bytes,
    /// Where the body came from (`GET /v1/...`), for error messages.
    source: &'a str,
}

impl<'a> Reader<'a> {
    pub fn new(body: &'a Bytes) -> Self {
        Reader::from_source(body, "the answer")
    }

    /// A reader whose errors name `source` (e.g. `GET /v1/chat/businessAccounts`).
    pub fn from_source(body: &'a Bytes, source: &'a str) -> Self {
        Reader {
            jiter: Jiter::new(body),
            body,
            source,
        }
    }

    pub(crate) fn position(&self) -> usize {
        self.jiter.current_index()
    }

    /// Where the next value starts (whitespace skipped): the start of its raw text.
    pub(crate) fn start(&mut self, what: &str) -> Result<usize> {
        self.peek(what)?;
        Ok(self.position())
    }

    /// The text from `start` to where the reader is now.
    pub(crate) fn raw_since(&self, start: usize) -> RawJson {
        RawJson(self.body.slice(start..self.position().max(start)))
    }

    /// A parse error, located and with the body's start (`what` is the model being read).
    pub(crate) fn error(&self, what: &str, error: JiterError) -> DecodeError {
        let position = self.jiter.error_position(error.index);
        DecodeError {
            message: format!(
                "{} did not answer JSON: {} at line {} column {} (in a {what})",
                self.source, error.error_type, position.line, position.column
            ),
            snippet: snippet(self.body),
        }
    }

    /// The next value's kind (whitespace skipped).
    pub(crate) fn peek(&mut self, what: &str) -> Result<Peek> {
        self.jiter.peek().map_err(|e| self.error(what, e))
    }

    /// Enters the object the reader is at; its first key, if any, as `field` names it (keys
    /// are looked at where they lie in the body, never copied).
    pub(crate) fn object<F>(&mut self, what: &str, field: impl Fn(&str) -> F) -> Result<Option<F>> {
        match self.peek(what)? {
            Peek::Object => self
                .jiter
                .known_object()
                .map(|key| key.map(&field))
                .map_err(|e| self.error(what, e)),
            _ => {
                let start = self.position();
                self.skip(what)?;
                Err(DecodeError {
                    message: format!("expected a JSON object ({what}) from {}", self.source),
                    snippet: snippet(self.raw_since(start).as_bytes()),
                })
            }
        }
    }

    /// The object's next key, if any, as `field` names it.
    pub(crate) fn key<F>(&mut self, what: &str, field: impl Fn(&str) -> F) -> Result<Option<F>> {
        self.jiter
            .next_key()
            .map(|key| key.map(&field))
            .map_err(|e| self.error(what, e))
    }

    pub(crate) fn skip(&mut self, what: &str) -> Result<()> {
        self.jiter.next_skip().map_err(|e| self.error(what, e))
    }

    /// Expects the end of the document (only whitespace left).
    pub(crate) fn finish(&mut self, what: &str) -> Result<()> {
        self.jiter.finish().map_err(|e| self.error(what, e))
    }

    /// A field whose type is open: string, number or bool; an object or array becomes its JSON
    /// text; null is absent.
    pub(crate) fn scalar(&mut self, what: &str) -> Result<Option<Scalar>> {
        let peek = self.peek(what)?;
        let read = match peek {
            Peek::Null => self.jiter.known_null().map(|()| None),
            Peek::True | Peek::False => self.jiter.known_bool(peek).map(|b| Some(Scalar::Bool(b))),
            Peek::String => self
                .jiter
                .known_str()
                .map(|text| Some(Scalar::Text(text.to_owned()))),
            Peek::Object | Peek::Array => {
                let start = self.position();
                self.skip(what)?;
                let text = String::from_utf8_lossy(self.raw_since(start).as_bytes()).into_owned();
                return Ok(Some(Scalar::Text(text)));
            }
            number => self
                .jiter
                .known_number_bytes(number)
                .map(|bytes| Some(Scalar::Number(String::from_utf8_lossy(bytes).into_owned()))),
        };
        read.map_err(|e| self.error(what, e))
    }

    /// A string field; a number or bool is accepted as its text; null, objects and arrays are
    /// absent.
    pub(crate) fn text(&mut self, what: &str) -> Result<Option<String>> {
        let peek = self.peek(what)?;
        match peek {
            Peek::Object | Peek::Array => {
                self.skip(what)?;
                Ok(None)
            }
            _ => Ok(self.scalar(what)?.map(|scalar| match scalar {
                Scalar::Text(text) | Scalar::Number(text) => text,
                Scalar::Bool(flag) => flag.to_string(),
            })),
        }
    }

    /// An integer field; a numeric string (`"12"`) or a whole float (`12.0`) is accepted;
    /// anything else is absent.
    pub(crate) fn integer(&mut self, what: &str) -> Result<Option<i64>> {
        Ok(match self.scalar(what)? {
            Some(Scalar::Text(text)) => text.trim().parse().ok(),
            Some(Scalar::Number(number)) => number.parse::<i64>().ok().or_else(|| {
                number
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                    .map(|f| f as i64)
            }),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fields_are_read_tolerantly() {
        let body = Bytes::from_static(
            br#"{"s": "x", "n": 17, "f": 1.50, "b": true, "z": null, "o": {"k": [1]}, "i": "12", "w": 3.0}"#,
        );
        let mut reader = Reader::new(&body);
        let mut seen = Vec::new();
        let mut key = reader.object("test", str::to_owned).unwrap();
        while let Some(name) = key {
            let value = match name.as_str() {
                "i" | "w" => format!("{:?}", reader.integer("test").unwrap()),
                "o" => format!("{:?}", reader.text("test").unwrap()),
                _ => format!("{:?}", reader.scalar("test").unwrap()),
            };
            seen.push(format!("{name}={value}"));
            key = reader.key("test", str::to_owned).unwrap();
        }
        reader.finish("test").unwrap();
        assert_eq!(
            seen,
            [
                "s=Some(Text(\"x\"))",
                "n=Some(Number(\"17\"))",
                "f=Some(Number(\"1.50\"))",
                "b=Some(Bool(true))",
                "z=None",
                "o=None",
                "i=Some(12)",
                "w=Some(3)"
            ]
        );
        assert_eq!(Scalar::Text(" 0 ".into()).text(), "0");
        // Regression: -0 was judged a failed commit while Python reads its code as 0.
        assert_eq!(Scalar::Number("-0".into()).text(), "0");
        assert_eq!(Scalar::Number("-0.0".into()).text(), "-0.0");
    }

    #[test]
    fn errors_say_where() {
        let body = Bytes::from_static(b"{\"a\": tru}");
        let mut reader = Reader::new(&body);
        let error = reader
            .object("a page", str::to_owned)
            .and_then(|_| reader.scalar("a page"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("the answer did not answer JSON") && error.contains("line 1"),
            "{error}"
        );
    }
}
