//! The page envelope of both list operations (section 2.4).

use bytes::Bytes;

use jiter::Peek;

use super::decode_error::DecodeError;
use super::json::{RawJson, Reader};
use super::model::objects;
use super::FromWire;

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Missing when the service does not say.
    pub total: Option<i64>,
    /// The page size; the requested one when the service does not say.
    pub size: i64,
    /// The page number; the requested one when the service does not say.
    pub current: i64,
    /// Missing when the service does not say (pagination then stops on a short page).
    pub pages: Option<i64>,
    /// The envelope as received (items included).
    pub wire: RawJson,
}

impl<T: FromWire> Page<T> {
    /// Decodes an envelope; `requested` is (pageNo, pageSize) of the request, used where the
    /// service leaves `current` or `size` out. Items are decoded in the same pass.
    pub fn from_json(body: Bytes, requested: (i64, i64)) -> crate::wire::DecodeResult<Self> {
        Self::from_answer(body, requested, "the answer")
    }

    /// [`Page::from_json`] for the answer of `source` (`GET /v1/...`), which errors name.
    pub fn from_answer(
        body: Bytes,
        requested: (i64, i64),
        source: &str,
    ) -> crate::wire::DecodeResult<Self> {
        let mut reader = Reader::from_source(&body, source);
        let what = "page";
        let start = reader.start(what)?;
        let mut page = Page {
            data: Vec::new(),
            total: None,
            size: requested.1,
            current: requested.0,
            pages: None,
            wire: RawJson::default(),
        };
        let (mut size, mut current) = (None, None);
        let mut has_data = false;
        #[derive(Clone, Copy)]
        enum Field {
            Data,
            Total,
            Size,
            Current,
            Pages,
            Other,
        }
        let field = |name: &str| match name {
            "data" => Field::Data,
            "total" => Field::Total,
            "size" => Field::Size,
            "current" => Field::Current,
            "pages" => Field::Pages,
            _ => Field::Other,
        };
        let mut key = reader.object(what, field)?;
        while let Some(name) = key {
            match name {
                Field::Data => {
                    if reader.peek(what)? == Peek::Null {
                        let start = reader.position();
                        reader.skip(what)?;
                        return Err(DecodeError {
                            message: format!("{source}: the page's \"data\" is null, not a list"),
                            snippet: reader.raw_since(start).snippet(),
                        });
                    }
                    page.data = objects(&mut reader, what, "page data")?;
                    has_data = true;
                }
                Field::Total => page.total = reader.integer(what)?,
                Field::Size => size = reader.integer(what)?,
                Field::Current => current = reader.integer(what)?,
                Field::Pages => page.pages = reader.integer(what)?,
                Field::Other => reader.skip(what)?,
            }
            key = reader.key(what, field)?;
        }
        page.wire = reader.raw_since(start);
        reader.finish(what)?;
        if !has_data {
            // Not a page (an empty object, a send result...): read as an empty one, it would
            // end a listing early without a word.
            return Err(DecodeError {
                message: format!("{source}: the answer has no \"data\" list, so it is not a page"),
                snippet: page.wire.snippet(),
            });
        }
        page.size = size.unwrap_or(requested.1);
        page.current = current.unwrap_or(requested.0);
        Ok(page)
    }

    /// Whether another page may follow this one (see [`has_next_page`]).
    pub fn has_next_page(&self) -> bool {
        has_next_page(
            self.current,
            self.size,
            self.data.len(),
            self.pages,
            self.total,
        )
    }
}

/// Whether another page may follow a page of `items` items: an empty page is the last; then
/// `current < pages`; without `pages`, `current * size < total`; without either, a full page
/// means "maybe". The one rule for the page stream and for Python's `Page.has_next_page()`.
pub fn has_next_page(
    current: i64,
    size: i64,
    items: usize,
    pages: Option<i64>,
    total: Option<i64>,
) -> bool {
    if items == 0 {
        return false;
    }
    match (pages, total) {
        (Some(pages), _) => current < pages,
        (None, Some(total)) => current.saturating_mul(size) < total,
        (None, None) => i64::try_from(items).unwrap_or(i64::MAX) >= size,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::BusinessPhoneNumber;

    fn page(text: &str) -> Page<BusinessPhoneNumber> {
        Page::from_json(Bytes::from(text.to_owned()), (1, 2)).unwrap()
    }

    #[test]
    fn next_page_rules() {
        let one = r#"{"phoneNumberId": "a"}"#;
        let full = page(&format!(
            r#"{{"data": [{one}, {one}], "total": 3, "size": 2, "current": 1, "pages": 2}}"#
        ));
        assert!(full.has_next_page());
        let last = page(&format!(
            r#"{{"data": [{one}], "total": 3, "size": 2, "current": 2, "pages": 2}}"#
        ));
        assert!(!last.has_next_page());
        let no_pages_full = page(&format!(r#"{{"data": [{one}, {one}]}}"#));
        assert!(no_pages_full.has_next_page());
        assert_eq!(
            (
                no_pages_full.current,
                no_pages_full.size,
                no_pages_full.pages
            ),
            (1, 2, None)
        );
        let total_reached = page(&format!(
            r#"{{"data": [{one}, {one}], "total": 2, "current": 1, "size": 2}}"#
        ));
        assert!(!total_reached.has_next_page());
        let total_left = page(&format!(
            r#"{{"data": [{one}, {one}], "total": 3, "current": 1, "size": 2}}"#
        ));
        assert!(total_left.has_next_page());
        let no_pages_short = page(&format!(r#"{{"data": [{one}]}}"#));
        assert!(!no_pages_short.has_next_page());
        let empty = page(r#"{"data": [], "total": 9, "current": 1, "pages": 5}"#);
        assert!(!empty.has_next_page());
        let numeric_strings = page(&format!(
            r#"{{"data": [{one}], "total": "3", "pages": "2", "current": "1"}}"#
        ));
        assert_eq!(numeric_strings.pages, Some(2));
    }

    #[test]
    fn items_keep_their_exact_text_and_the_envelope_its_own() {
        let text = r#"{ "data" : [ {"phoneNumberId": "a", "x": 1.50} ,{"phoneNumberId":"b"}], "extra": [true] }"#;
        let decoded = page(text);
        assert_eq!(
            decoded.data[0].wire.as_bytes(),
            br#"{"phoneNumberId": "a", "x": 1.50}"#
        );
        assert_eq!(decoded.data[1].wire.as_bytes(), br#"{"phoneNumberId":"b"}"#);
        assert_eq!(decoded.wire.as_bytes(), text.as_bytes());
    }

    #[test]
    fn data_that_is_not_a_list_is_a_decode_error() {
        for text in [
            r#"{"data": {"x": 1}}"#,
            r#"{"data": [1]}"#,
            "[]",
            r#"{"data": []} []"#,
            // Not a page at all, read as an empty one it ended a listing.
            "{}",
            r#"{"data": null, "total": 0}"#,
            r#"{"smsId": "s", "status": "ACCEPTED", "code": "0", "msg": "success"}"#,
        ] {
            assert!(
                Page::<BusinessPhoneNumber>::from_json(Bytes::from(text), (1, 1)).is_err(),
                "{text}"
            );
        }
    }
}
