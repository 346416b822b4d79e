//! What both list operations share: the page request, and fetching one page of any model.

use http::Method;

use crate::client::{CallOptions, Client, Operation, Response};
use crate::error::{Error, Result};
use crate::validate;
use crate::wire::{FromWire, Page, RawObject};

/// `pageNo` and `pageSize`, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    pub page_no: i64,
    pub page_size: i64,
}

impl PageRequest {
    pub fn new(page_no: i64, page_size: i64) -> Result<Self> {
        Ok(PageRequest {
            page_no: validate::page_no(page_no)?,
            page_size: validate::page_size(page_size)?,
        })
    }
}

/// Which listing to page through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pager {
    BusinessAccounts,
    BusinessPhoneNumbers,
}

impl Client {
    /// One page of either listing with its items left as the JSON they were (see
    /// [`RawObject`]): the envelope is checked, the items' fields are not decoded.
    pub async fn list_raw(
        &self,
        pager: Pager,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<Response<Page<RawObject>>> {
        self.list_page(pager, page, call).await
    }

    pub(crate) async fn list_page<T: FromWire>(
        &self,
        pager: Pager,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<Response<Page<T>>> {
        let endpoint = match pager {
            Pager::BusinessAccounts => &self.endpoints().business_accounts,
            Pager::BusinessPhoneNumbers => &self.endpoints().business_phone_numbers,
        };
        let url = format!(
            "{endpoint}?pageNo={}&pageSize={}",
            page.page_no, page.page_size
        )
        .parse::<http::Uri>()
        .map_err(|e| Error::Internal(format!("cannot build the page URL: {e}")))?;
        let answer = self
            .execute(
                &Operation {
                    method: Method::GET,
                    url,
                    body: None,
                    send: None,
                },
                call,
            )
            .await?;
        let source = format!("GET {}", endpoint.path());
        Ok(Response {
            value: Page::from_answer(answer.body, (page.page_no, page.page_size), &source)?,
            meta: answer.meta,
        })
    }
}
