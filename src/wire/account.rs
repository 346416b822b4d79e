//! A business account (section 2.2), with its nested phone numbers, decoded in the same pass.

use super::model::{wire_model, PhoneNumbers, Required, Text, Timestamp};

wire_model! {
    /// A business account (section 2.2).
    pub struct BusinessAccount as "business account" {
        biz_account_id: Required = "bizAccountId",
        name: Text = "name",
        status: Text = "status",
        business_verification_status: Text = "businessVerificationStatus",
        account_review_status: Text = "accountReviewStatus",
        chat_business_manager_messaging_limit: Text = "chatBusinessManagerMessagingLimit",
        business_phone_numbers: PhoneNumbers = "businessPhoneNumbers",
        create_time: Timestamp = "createTime",
        update_time: Timestamp = "updateTime",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::DecodeError;
    use crate::wire::FromWire;

    fn decode(text: &str) -> crate::wire::DecodeResult<BusinessAccount> {
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
            assert!(matches!(decode(text), Err(DecodeError { .. })), "{text}");
        }
        assert!(decode(r#"{"bizAccountId": "1", "businessPhoneNumbers": null}"#).is_ok());
    }
}
