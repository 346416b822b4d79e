//! A business account (section 2.2), with its nested phone numbers, decoded in the same pass.

use chrono::{DateTime, FixedOffset};
use jiter::Peek;

use super::json::{RawJson, Reader};
use super::phone_number::timestamp;
use super::{BusinessPhoneNumber, FromWire};
use crate::error::Error;

#[derive(Debug, Clone, PartialEq)]
pub struct BusinessAccount {
    pub biz_account_id: String,
    pub name: Option<String>,
    pub status: Option<String>,
    pub business_verification_status: Option<String>,
    pub account_review_status: Option<String>,
    pub chat_business_manager_messaging_limit: Option<String>,
    pub business_phone_numbers: Vec<BusinessPhoneNumber>,
    pub create_time: Option<DateTime<FixedOffset>>,
    pub update_time: Option<DateTime<FixedOffset>>,
    pub wire: RawJson,
}

/// A list of objects of `T` (null or absent: empty).
pub(crate) fn objects<T: FromWire>(
    reader: &mut Reader<'_>,
    what: &str,
    field: &str,
) -> crate::Result<Vec<T>> {
    match reader.peek(what)? {
        Peek::Null => {
            reader.skip(what)?;
            return Ok(Vec::new());
        }
        Peek::Array => {}
        _ => {
            let start = reader.position();
            reader.skip(what)?;
            return Err(Error::Decode {
                message: format!("{what}: {field} is not an array"),
                snippet: reader.raw_since(start).snippet(),
            });
        }
    }
    let mut items = Vec::new();
    let mut next = reader
        .jiter
        .known_array()
        .map_err(|e| reader.error(what, e))?;
    while let Some(peek) = next {
        if peek != Peek::Object {
            let start = reader.position();
            reader.skip(what)?;
            return Err(Error::Decode {
                message: format!("{field} holds something that is not a {}", T::NAME),
                snippet: reader.raw_since(start).snippet(),
            });
        }
        items.push(T::read(reader)?);
        next = reader
            .jiter
            .array_step()
            .map_err(|e| reader.error(what, e))?;
    }
    Ok(items)
}

/// The fields of spec section 2.2, by their wire names.
#[derive(Clone, Copy)]
enum Field {
    BizAccountId,
    Name,
    Status,
    BusinessVerificationStatus,
    AccountReviewStatus,
    MessagingLimit,
    BusinessPhoneNumbers,
    CreateTime,
    UpdateTime,
    Other,
}

impl Field {
    fn of(name: &str) -> Field {
        match name {
            "bizAccountId" => Field::BizAccountId,
            "name" => Field::Name,
            "status" => Field::Status,
            "businessVerificationStatus" => Field::BusinessVerificationStatus,
            "accountReviewStatus" => Field::AccountReviewStatus,
            "chatBusinessManagerMessagingLimit" => Field::MessagingLimit,
            "businessPhoneNumbers" => Field::BusinessPhoneNumbers,
            "createTime" => Field::CreateTime,
            "updateTime" => Field::UpdateTime,
            _ => Field::Other,
        }
    }
}

impl FromWire for BusinessAccount {
    fn wire(&self) -> &RawJson {
        &self.wire
    }

    const NAME: &'static str = "business account";

    fn read(reader: &mut Reader<'_>) -> crate::Result<Self> {
        let what = Self::NAME;
        let start = reader.start(what)?;
        let mut id = None;
        let mut account = BusinessAccount {
            biz_account_id: String::new(),
            name: None,
            status: None,
            business_verification_status: None,
            account_review_status: None,
            chat_business_manager_messaging_limit: None,
            business_phone_numbers: Vec::new(),
            create_time: None,
            update_time: None,
            wire: RawJson::default(),
        };
        let mut key = reader.object(what, Field::of)?;
        while let Some(name) = key {
            match name {
                Field::BizAccountId => id = reader.text(what)?,
                Field::Name => account.name = reader.text(what)?,
                Field::Status => account.status = reader.text(what)?,
                Field::BusinessVerificationStatus => {
                    account.business_verification_status = reader.text(what)?
                }
                Field::AccountReviewStatus => account.account_review_status = reader.text(what)?,
                Field::MessagingLimit => {
                    account.chat_business_manager_messaging_limit = reader.text(what)?
                }
                Field::BusinessPhoneNumbers => {
                    account.business_phone_numbers = objects(reader, what, "businessPhoneNumbers")?
                }
                Field::CreateTime => account.create_time = timestamp(reader, what)?,
                Field::UpdateTime => account.update_time = timestamp(reader, what)?,
                Field::Other => reader.skip(what)?,
            }
            key = reader.key(what, Field::of)?;
        }
        account.wire = reader.raw_since(start);
        account.biz_account_id = id.ok_or_else(|| Error::Decode {
            message: format!("{what} has no usable \"bizAccountId\" field"),
            snippet: account.wire.snippet(),
        })?;
        Ok(account)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decode(text: &str) -> crate::Result<BusinessAccount> {
        BusinessAccount::from_json(bytes::Bytes::from(text.to_owned()))
    }

    #[test]
    fn decodes_nested_numbers_unknown_values_and_bad_timestamps() {
        let text = r#"{"bizAccountId": 1001, "name": "Acme", "status": "SUSPENDED_FOR_REVIEW",
            "chatBusinessManagerMessagingLimit": "TIER_10K", "newField": {"x": 1},
            "businessPhoneNumbers": [{"phoneNumberId": "p1", "qualityRating": "YELLOW",
                "createTime": "2024-03-05T10:15:30.123Z", "updateTime": "not a time"}],
            "createTime": "2024-03-05T10:15:30.123+0800"}"#;
        let account = decode(text).unwrap();
        assert_eq!(account.biz_account_id, "1001");
        assert_eq!(account.status.as_deref(), Some("SUSPENDED_FOR_REVIEW"));
        assert_eq!(account.business_phone_numbers.len(), 1);
        let number = &account.business_phone_numbers[0];
        assert_eq!(number.quality_rating.as_deref(), Some("YELLOW"));
        assert!(number.create_time.is_some());
        assert_eq!(number.update_time, None);
        assert!(std::str::from_utf8(number.wire.as_bytes())
            .unwrap()
            .contains("\"not a time\""));
        assert!(std::str::from_utf8(number.wire.as_bytes())
            .unwrap()
            .starts_with("{\"phoneNumberId\""));
        assert_eq!(account.wire.as_bytes(), text.as_bytes());
    }

    #[test]
    fn an_account_without_an_id_or_with_bad_numbers_is_a_decode_error() {
        for text in [
            r#"{"name": "x"}"#,
            r#"{"bizAccountId": "1", "businessPhoneNumbers": {"a": 1}}"#,
            r#"{"bizAccountId": "1", "businessPhoneNumbers": [1]}"#,
            r#"{"bizAccountId": "1", "businessPhoneNumbers": [{"name": "no id"}]}"#,
        ] {
            assert!(matches!(decode(text), Err(Error::Decode { .. })), "{text}");
        }
        assert!(decode(r#"{"bizAccountId": "1", "businessPhoneNumbers": null}"#).is_ok());
    }
}
