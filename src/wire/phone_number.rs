//! A business phone number (section 2.3).

use super::model::{wire_model, Required, Text, Timestamp};

wire_model! {
    /// A business phone number (section 2.3).
    pub struct BusinessPhoneNumber as "business phone number" {
        biz_account_id: Text = "bizAccountId",
        phone_number_id: Required = "phoneNumberId",
        display_phone_number: Text = "displayPhoneNumber",
        verified_name: Text = "verifiedName",
        status: Text = "status",
        quality_rating: Text = "qualityRating",
        code_verification_status: Text = "codeVerificationStatus",
        throughput: Text = "throughput",
        messaging_limit_tier: Text = "messagingLimitTier",
        create_time: Timestamp = "createTime",
        update_time: Timestamp = "updateTime",
    }
}
