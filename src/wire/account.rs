//! A business account (section 2.2), with its nested phone numbers.

use chrono::{DateTime, FixedOffset};
use serde_json::{Map, Value};

use super::{fields, parse_timestamp, BusinessPhoneNumber, FromWire};
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
    pub wire: Map<String, Value>,
}

impl FromWire for BusinessAccount {
    fn wire(&self) -> &Map<String, Value> {
        &self.wire
    }

    const NAME: &'static str = "business account";

    fn from_wire(object: Map<String, Value>) -> crate::Result<Self> {
        let numbers = match object.get("businessPhoneNumbers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::Object(number) => BusinessPhoneNumber::from_wire(number.clone()),
                    other => Err(Error::Decode {
                        message: "businessPhoneNumbers holds a non-object".to_owned(),
                        snippet: fields::snippet(other),
                    }),
                })
                .collect::<crate::Result<_>>()?,
            Some(other) => {
                return Err(Error::Decode {
                    message: "businessPhoneNumbers is not an array".to_owned(),
                    snippet: fields::snippet(other),
                })
            }
        };
        let timestamp = |name| {
            fields::string(&object, name)
                .as_deref()
                .and_then(parse_timestamp)
        };
        Ok(BusinessAccount {
            biz_account_id: fields::required_string(&object, Self::NAME, "bizAccountId")?,
            name: fields::string(&object, "name"),
            status: fields::string(&object, "status"),
            business_verification_status: fields::string(&object, "businessVerificationStatus"),
            account_review_status: fields::string(&object, "accountReviewStatus"),
            chat_business_manager_messaging_limit: fields::string(
                &object,
                "chatBusinessManagerMessagingLimit",
            ),
            business_phone_numbers: numbers,
            create_time: timestamp("createTime"),
            update_time: timestamp("updateTime"),
            wire: object,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_nested_numbers_unknown_values_and_bad_timestamps() {
        let wire = json!({
            "bizAccountId": 1001,
            "name": "Acme",
            "status": "SUSPENDED_FOR_REVIEW",
            "chatBusinessManagerMessagingLimit": "TIER_10K",
            "newField": {"x": 1},
            "businessPhoneNumbers": [{
                "phoneNumberId": "p1", "qualityRating": "YELLOW",
                "createTime": "2024-03-05T10:15:30.123Z", "updateTime": "not a time"
            }],
            "createTime": "2024-03-05T10:15:30.123+0800"
        });
        let Value::Object(object) = wire.clone() else {
            unreachable!()
        };
        let account = BusinessAccount::from_wire(object).unwrap();
        assert_eq!(account.biz_account_id, "1001");
        assert_eq!(account.status.as_deref(), Some("SUSPENDED_FOR_REVIEW"));
        assert_eq!(account.business_phone_numbers.len(), 1);
        let number = &account.business_phone_numbers[0];
        assert_eq!(number.quality_rating.as_deref(), Some("YELLOW"));
        assert!(number.create_time.is_some());
        assert_eq!(number.update_time, None);
        assert_eq!(number.wire.get("updateTime"), Some(&json!("not a time")));
        assert_eq!(Value::Object(account.wire), wire);
    }

    #[test]
    fn an_account_without_an_id_is_a_decode_error() {
        let Value::Object(object) = json!({"name": "x"}) else {
            unreachable!()
        };
        assert!(matches!(
            BusinessAccount::from_wire(object),
            Err(Error::Decode { .. })
        ));
    }
}
