//! A business phone number (section 2.3).

use chrono::{DateTime, FixedOffset};

use super::json::{RawJson, Reader};
use super::{parse_timestamp, FromWire};
use crate::error::Error;

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
    pub wire: RawJson,
}

/// A timestamp field: parsed when it can be, else absent (its text stays in the raw JSON).
pub(crate) fn timestamp(
    reader: &mut Reader<'_>,
    what: &str,
) -> crate::Result<Option<DateTime<FixedOffset>>> {
    Ok(reader.text(what)?.as_deref().and_then(parse_timestamp))
}

/// The fields of spec section 2.3, by their wire names.
#[derive(Clone, Copy)]
enum Field {
    BizAccountId,
    PhoneNumberId,
    DisplayPhoneNumber,
    VerifiedName,
    Status,
    QualityRating,
    CodeVerificationStatus,
    Throughput,
    MessagingLimitTier,
    CreateTime,
    UpdateTime,
    Other,
}

impl Field {
    fn of(name: &str) -> Field {
        match name {
            "bizAccountId" => Field::BizAccountId,
            "phoneNumberId" => Field::PhoneNumberId,
            "displayPhoneNumber" => Field::DisplayPhoneNumber,
            "verifiedName" => Field::VerifiedName,
            "status" => Field::Status,
            "qualityRating" => Field::QualityRating,
            "codeVerificationStatus" => Field::CodeVerificationStatus,
            "throughput" => Field::Throughput,
            "messagingLimitTier" => Field::MessagingLimitTier,
            "createTime" => Field::CreateTime,
            "updateTime" => Field::UpdateTime,
            _ => Field::Other,
        }
    }
}

impl FromWire for BusinessPhoneNumber {
    fn wire(&self) -> &RawJson {
        &self.wire
    }

    const NAME: &'static str = "business phone number";

    fn read(reader: &mut Reader<'_>) -> crate::Result<Self> {
        let what = Self::NAME;
        let start = reader.start(what)?;
        let mut id = None;
        let mut number = BusinessPhoneNumber {
            biz_account_id: None,
            phone_number_id: String::new(),
            display_phone_number: None,
            verified_name: None,
            status: None,
            quality_rating: None,
            code_verification_status: None,
            throughput: None,
            messaging_limit_tier: None,
            create_time: None,
            update_time: None,
            wire: RawJson::default(),
        };
        let mut key = reader.object(what, Field::of)?;
        while let Some(name) = key {
            match name {
                Field::BizAccountId => number.biz_account_id = reader.text(what)?,
                Field::PhoneNumberId => id = reader.text(what)?,
                Field::DisplayPhoneNumber => number.display_phone_number = reader.text(what)?,
                Field::VerifiedName => number.verified_name = reader.text(what)?,
                Field::Status => number.status = reader.text(what)?,
                Field::QualityRating => number.quality_rating = reader.text(what)?,
                Field::CodeVerificationStatus => {
                    number.code_verification_status = reader.text(what)?
                }
                Field::Throughput => number.throughput = reader.text(what)?,
                Field::MessagingLimitTier => number.messaging_limit_tier = reader.text(what)?,
                Field::CreateTime => number.create_time = timestamp(reader, what)?,
                Field::UpdateTime => number.update_time = timestamp(reader, what)?,
                Field::Other => reader.skip(what)?,
            }
            key = reader.key(what, Field::of)?;
        }
        number.wire = reader.raw_since(start);
        number.phone_number_id = id.ok_or_else(|| Error::Decode {
            message: format!("{what} has no usable \"phoneNumberId\" field"),
            snippet: number.wire.snippet(),
        })?;
        Ok(number)
    }
}
