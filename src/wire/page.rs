//! The page envelope of both list operations (section 2.4).

use serde_json::{Map, Value};

use super::{fields, FromWire};
use crate::error::Error;

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
    /// The envelope as received, without `data` (each item keeps its own object).
    pub wire: Map<String, Value>,
    /// Where `data` stood among the envelope's keys, to give the object back in its order.
    pub data_index: Option<usize>,
}

impl<T: FromWire> Page<T> {
    /// Decodes an envelope; `requested` is (pageNo, pageSize) of the request, used where the
    /// service leaves `current` or `size` out.
    pub fn from_wire(mut object: Map<String, Value>, requested: (i64, i64)) -> crate::Result<Self> {
        let data_index = object.keys().position(|key| key == "data");
        let data = match object.shift_remove("data") {
            None => Vec::new(),
            Some(Value::Null) => {
                // Kept in the envelope: there are no items to hold it.
                if let Some(index) = data_index {
                    object.shift_insert(index, "data".to_owned(), Value::Null);
                }
                return Self::envelope(object, requested, Vec::new(), None);
            }
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::Object(element) => T::from_wire(element),
                    other => Err(Error::Decode {
                        message: format!("page data holds something that is not a {}", T::NAME),
                        snippet: fields::snippet(&other),
                    }),
                })
                .collect::<crate::Result<_>>()?,
            Some(other) => {
                return Err(Error::Decode {
                    message: "page `data` is not an array".to_owned(),
                    snippet: fields::snippet(&other),
                })
            }
        };
        Self::envelope(object, requested, data, data_index)
    }

    fn envelope(
        object: Map<String, Value>,
        requested: (i64, i64),
        data: Vec<T>,
        data_index: Option<usize>,
    ) -> crate::Result<Self> {
        Ok(Page {
            data,
            total: fields::integer(&object, "total"),
            size: fields::integer(&object, "size").unwrap_or(requested.1),
            current: fields::integer(&object, "current").unwrap_or(requested.0),
            pages: fields::integer(&object, "pages"),
            wire: object,
            data_index,
        })
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
    use serde_json::json;

    fn page(value: Value) -> Page<BusinessPhoneNumber> {
        let Value::Object(object) = value else {
            unreachable!()
        };
        Page::from_wire(object, (1, 2)).unwrap()
    }

    #[test]
    fn next_page_rules() {
        let one = json!({"phoneNumberId": "a"});
        let full =
            page(json!({"data": [one, one], "total": 3, "size": 2, "current": 1, "pages": 2}));
        assert!(full.has_next_page());
        let last = page(json!({"data": [one], "total": 3, "size": 2, "current": 2, "pages": 2}));
        assert!(!last.has_next_page());
        let no_pages_full = page(json!({"data": [one, one]}));
        assert!(no_pages_full.has_next_page());
        assert_eq!(
            (
                no_pages_full.current,
                no_pages_full.size,
                no_pages_full.pages
            ),
            (1, 2, None)
        );
        let total_reached = page(json!({"data": [one, one], "total": 2, "current": 1, "size": 2}));
        assert!(!total_reached.has_next_page());
        let total_left = page(json!({"data": [one, one], "total": 3, "current": 1, "size": 2}));
        assert!(total_left.has_next_page());
        let no_pages_short = page(json!({"data": [one]}));
        assert!(!no_pages_short.has_next_page());
        let empty = page(json!({"data": [], "total": 9, "current": 1, "pages": 5}));
        assert!(!empty.has_next_page());
        let numeric_strings =
            page(json!({"data": [one], "total": "3", "pages": "2", "current": "1"}));
        assert_eq!(numeric_strings.pages, Some(2));
    }

    #[test]
    fn data_that_is_not_a_list_is_a_decode_error() {
        let Value::Object(object) = json!({"data": {"x": 1}}) else {
            unreachable!()
        };
        assert!(Page::<BusinessPhoneNumber>::from_wire(object, (1, 1)).is_err());
    }
}
