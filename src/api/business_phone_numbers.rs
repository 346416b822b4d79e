//! `GET /v1/chat/businessPhoneNumber`.

use super::{PageRequest, Pager};
use crate::client::{CallOptions, Client, Response};
use crate::error::Result;
use crate::wire::{BusinessPhoneNumber, Page};

impl Client {
    /// One page of the caller's business phone numbers.
    pub async fn list_business_phone_numbers(
        &self,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<Response<Page<BusinessPhoneNumber>>> {
        self.list_page(Pager::BusinessPhoneNumbers, page, call)
            .await
    }
}
