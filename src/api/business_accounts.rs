//! `GET /v1/chat/businessAccounts`.

use super::{PageRequest, Pager};
use crate::client::{CallOptions, Client, Response};
use crate::error::Result;
use crate::wire::{BusinessAccount, Page};

impl Client {
    /// One page of the caller's business accounts, each with its phone numbers.
    pub async fn list_business_accounts(
        &self,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<Response<Page<BusinessAccount>>> {
        self.list_page(Pager::BusinessAccounts, page, call).await
    }
}
