//! A page item kept as the JSON text it was: what `raw=True` listings decode into.

use super::json::{RawJson, Reader};
use super::FromWire;

/// Any JSON object, unread: a raw listing checks the page envelope (an object whose `data` is a
/// list of objects, with integer counts) and hands back the text as received, so it does not
/// pay for decoding fields it will not use, nor refuse an item the models would.
#[derive(Debug, Clone, PartialEq)]
pub struct RawObject(pub RawJson);

impl FromWire for RawObject {
    const NAME: &'static str = "JSON object";

    fn read(reader: &mut Reader<'_>) -> crate::wire::DecodeResult<Self> {
        let start = reader.start(Self::NAME)?;
        reader.skip(Self::NAME)?;
        Ok(RawObject(reader.raw_since(start)))
    }

    fn wire(&self) -> &RawJson {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Page;
    use bytes::Bytes;

    #[test]
    fn a_raw_page_keeps_items_the_models_would_refuse_and_checks_the_envelope() {
        let body = r#"{"data":[{"phoneNumberId":{"odd":1}},{"x":1}],"total":2,"pages":1}"#;
        let page = Page::<RawObject>::from_json(Bytes::from_static(body.as_bytes()), (1, 20));
        let Ok(page) = page else {
            return assert!(page.is_ok(), "{page:?}");
        };
        let items: Vec<&[u8]> = page.data.iter().map(|item| item.0.as_bytes()).collect();
        assert_eq!(
            items,
            [&br#"{"phoneNumberId":{"odd":1}}"#[..], br#"{"x":1}"#]
        );
        assert_eq!(page.wire.as_bytes(), body.as_bytes());
        assert!(
            crate::wire::BusinessPhoneNumber::from_json(Bytes::from_static(
                br#"{"phoneNumberId":{"odd":1}}"#
            ))
            .is_err()
        );
        for bad in [
            r#"{"data":[1],"total":1}"#,
            r#"{"data":{},"total":1}"#,
            r#"{"data":[],"total":1} trailing"#,
            r#"{"data":[{"a":}]}"#,
            r#"[]"#,
        ] {
            assert!(
                Page::<RawObject>::from_json(Bytes::from_static(bad.as_bytes()), (1, 20)).is_err(),
                "{bad} was accepted"
            );
        }
    }
}
