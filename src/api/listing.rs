//! What both list operations share: the page request, and fetching one page of any model.

use http::Method;

use crate::client::{Answer, CallOptions, Client, Operation, Response};
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
    /// One page of either listing as the body received, not read at all: for a caller that
    /// builds its own objects from the JSON in one pass (the Python `raw=True`), and asks
    /// [`UnreadPage::check`] for the error only when the body is not a page.
    pub async fn list_unread(
        &self,
        pager: Pager,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<Response<UnreadPage>> {
        let (answer, endpoint) = self.fetch_page(pager, page, call).await?;
        Ok(Response {
            value: UnreadPage {
                body: answer.body,
                requested: (page.page_no, page.page_size),
                endpoint: endpoint.clone(),
            },
            meta: answer.meta,
        })
    }

    pub(crate) async fn list_page<T: FromWire>(
        &self,
        pager: Pager,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<Response<Page<T>>> {
        let (answer, endpoint) = self.fetch_page(pager, page, call).await?;
        Ok(Response {
            value: Page::from_answer(
                answer.body,
                (page.page_no, page.page_size),
                &source(endpoint),
            )?,
            meta: answer.meta,
        })
    }

    /// The answer to a page request, and the endpoint asked.
    async fn fetch_page(
        &self,
        pager: Pager,
        page: PageRequest,
        call: &CallOptions,
    ) -> Result<(Answer, &http::Uri)> {
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
                    progress: None,
                },
                call,
            )
            .await?;
        Ok((answer, endpoint))
    }
}

/// A page request as errors name it (`GET /v1/...`).
fn source(endpoint: &http::Uri) -> String {
    format!("GET {}", endpoint.path())
}

/// A page's body as received (see [`Client::list_unread`]).
#[derive(Debug, Clone)]
pub struct UnreadPage {
    pub body: bytes::Bytes,
    /// `(page_no, page_size)` asked for.
    pub requested: (i64, i64),
    /// The endpoint asked (its path names the request in errors, formatted only for one).
    pub endpoint: http::Uri,
}

impl UnreadPage {
    /// The body read as a page of unread items: the error a listing reports for a body that is
    /// not a page (not JSON, not an object, `data` not a list of objects).
    pub fn check(&self) -> Result<Page<RawObject>> {
        Ok(Page::from_answer(
            self.body.clone(),
            self.requested,
            &self.source(),
        )?)
    }

    /// The request, as errors name it (`GET /v1/...`).
    pub fn source(&self) -> String {
        source(&self.endpoint)
    }
}
