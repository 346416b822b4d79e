//! A business phone number (section 2.3).

use chrono::{DateTime, FixedOffset};
use serde_json::{Map, Value};

use super::{fields, parse_timestamp, FromWire};

#[derive(Debug, Clone, PartialEq)]
pub struct BusinessPhoneNumber {
    pub biz_account_id: Option<String>,
    pub phone_number_id: String,
    pub display_phone_number: Option<String>,
    pub verified_name: Option<String>,
    pub status: Option<String>,
    pub quality_rating: Option<String>,
    pub code_verification_status: Option<String>,
    pub throughput: Option<String>,
    pub messaging_limit_tier: Option<String>,
    pub create_time: Option<DateTime<FixedOffset>>,
    pub update_time: Option<DateTime<FixedOffset>>,
    pub wire: Map<String, Value>,
}

impl FromWire for BusinessPhoneNumber {
    fn wire(&self) -> &Map<String, Value> {
        &self.wire
    }

    const NAME: &'static str = "business phone number";

    fn from_wire(object: Map<String, Value>) -> crate::Result<Self> {
        let timestamp = |name| {
            fields::string(&object, name)
                .as_deref()
                .and_then(parse_timestamp)
        };
        Ok(BusinessPhoneNumber {
            biz_account_id: fields::string(&object, "bizAccountId"),
            phone_number_id: fields::required_string(&object, Self::NAME, "phoneNumberId")?,
            display_phone_number: fields::string(&object, "displayPhoneNumber"),
            verified_name: fields::string(&object, "verifiedName"),
            status: fields::string(&object, "status"),
            quality_rating: fields::string(&object, "qualityRating"),
            code_verification_status: fields::string(&object, "codeVerificationStatus"),
            throughput: fields::string(&object, "throughput"),
            messaging_limit_tier: fields::string(&object, "messagingLimitTier"),
            create_time: timestamp("createTime"),
            update_time: timestamp("updateTime"),
            wire: object,
        })
    }
}
