//! How the sandbox pages list results: the `pageNo`/`pageSize` query parameters, the window they
//! select, and the page envelope.

use axum::http::Uri;
use serde::Serialize;

const DEFAULT_PAGE_NO: u64 = 1;
const DEFAULT_PAGE_SIZE: u64 = 20;
const MAX_PAGE_SIZE: u64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageRequest {
    pub(crate) page_no: u64,
    pub(crate) page_size: u64,
}

/// The envelope of both list operations, fields in the spec's order.
#[derive(Debug, Serialize)]
pub(crate) struct Envelope<T> {
    pub(crate) data: Vec<T>,
    pub(crate) total: usize,
    pub(crate) size: u64,
    pub(crate) current: u64,
    pub(crate) pages: u64,
}

impl PageRequest {
    /// Reads `pageNo` and `pageSize` from a request URI; other parameters are ignored and the
    /// first occurrence of a repeated one wins. `Err` carries the 400 message.
    pub(crate) fn from_uri(uri: &Uri) -> Result<PageRequest, String> {
        let pairs: Vec<(String, String)> =
            axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
                .map(|query| query.0)
                .map_err(|error| format!("query string is not valid: {error}"))?;
        let first = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        Ok(PageRequest {
            page_no: parameter("pageNo", first("pageNo"), DEFAULT_PAGE_NO, u64::MAX)?,
            page_size: parameter(
                "pageSize",
                first("pageSize"),
                DEFAULT_PAGE_SIZE,
                MAX_PAGE_SIZE,
            )?,
        })
    }

    /// The page of `items` this request selects; empty beyond the last page.
    pub(crate) fn window<'a, T>(&self, items: &'a [T]) -> &'a [T] {
        let start = self
            .page_no
            .saturating_sub(1)
            .checked_mul(self.page_size)
            .and_then(|start| usize::try_from(start).ok());
        let Some(start) = start.filter(|start| *start < items.len()) else {
            return &[];
        };
        let size = usize::try_from(self.page_size).unwrap_or(usize::MAX);
        let end = start.saturating_add(size).min(items.len());
        items.get(start..end).unwrap_or_default()
    }

    pub(crate) fn envelope<T>(&self, data: Vec<T>, total: usize) -> Envelope<T> {
        Envelope {
            data,
            total,
            size: self.page_size,
            current: self.page_no,
            pages: match self.page_size {
                0 => 0,
                size => (total as u64).div_ceil(size),
            },
        }
    }
}

fn parameter(name: &str, raw: Option<&str>, default: u64, max: u64) -> Result<u64, String> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    let range = if max == u64::MAX {
        ">= 1".to_owned()
    } else {
        format!("from 1 to {max}")
    };
    // Only plain digits: `+5`, `1.0`, `1e3` and blanks are refused rather than guessed at.
    let parsed = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        raw.parse::<u64>().ok()
    } else {
        None
    };
    match parsed {
        Some(value) if (1..=max).contains(&value) => Ok(value),
        _ => Err(format!(
            "invalid {name} {raw:?}: must be a base-10 integer {range}"
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{start, TestClient};
    use crate::sandbox::SandboxConfig;
    use chrono::DateTime;
    use serde_json::{json, Value};

    fn request(query: &str) -> Result<PageRequest, String> {
        PageRequest::from_uri(
            &format!("/v1/chat/businessAccounts?{query}")
                .parse()
                .unwrap(),
        )
    }

    #[test]
    fn reads_parameters_with_defaults() {
        let page = |page_no, page_size| Ok(PageRequest { page_no, page_size });
        assert_eq!(request(""), page(1, 20));
        assert_eq!(request("pageNo=3&pageSize=1000&other=x"), page(3, 1000));
        assert_eq!(
            request("pageSize=1&pageNo=18446744073709551615"),
            page(u64::MAX, 1)
        );
        assert_eq!(request("pageNo=2&pageNo=9"), page(2, 20));
        assert_eq!(request("pageNo=%32"), page(2, 20));
    }

    #[test]
    fn refuses_bad_values_naming_parameter_value_and_range() {
        for bad in [
            "abc",
            "0",
            "-1",
            "1.5",
            "",
            "+2",
            " 1",
            "1e3",
            "18446744073709551616",
        ] {
            let error = request(&format!(
                "pageNo={}",
                bad.replace('+', "%2B").replace(' ', "%20")
            ))
            .unwrap_err();
            assert_eq!(
                error,
                format!("invalid pageNo {bad:?}: must be a base-10 integer >= 1")
            );
        }
        for bad in ["abc", "0", "-1", "1.5", "1001", ""] {
            let error = request(&format!("pageSize={bad}")).unwrap_err();
            assert_eq!(
                error,
                format!("invalid pageSize {bad:?}: must be a base-10 integer from 1 to 1000")
            );
        }
    }

    #[test]
    fn windows_and_envelope_maths() {
        let items: Vec<u32> = (0..45).collect();
        let at = |page_no, page_size| PageRequest { page_no, page_size };
        assert_eq!(at(1, 20).window(&items), &items[0..20]);
        assert_eq!(at(3, 20).window(&items), &items[40..45]);
        assert!(at(4, 20).window(&items).is_empty());
        assert!(at(u64::MAX, 1000).window(&items).is_empty());
        assert_eq!(at(1, 1000).window(&items).len(), 45);
        assert_eq!(at(45, 1).window(&items), &[44]);

        let envelope = at(4, 20).envelope(Vec::<u32>::new(), 45);
        assert_eq!(
            serde_json::to_value(envelope).unwrap(),
            json!({"data": [], "total": 45, "size": 20, "current": 4, "pages": 3})
        );
        assert_eq!(at(1, 15).envelope(vec![0], 45).pages, 3);
        assert_eq!(at(1, 20).envelope(Vec::<u32>::new(), 0).pages, 0);
    }

    fn millis(item: &Value) -> i64 {
        let text = item["createTime"].as_str().unwrap();
        DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.3f%z")
            .unwrap()
            .timestamp_millis()
    }

    #[tokio::test]
    async fn lists_page_through_everything_in_a_stable_order() {
        let sandbox = start(SandboxConfig {
            accounts_per_tenant: 7,
            numbers_per_account: (3, 5),
            ..SandboxConfig::default()
        })
        .await;
        let client = TestClient::new(&sandbox);
        for (path, id) in [
            ("/v1/chat/businessAccounts", "bizAccountId"),
            ("/v1/chat/businessPhoneNumber", "phoneNumberId"),
        ] {
            let all = client.get(&format!("{path}?pageSize=1000")).await.json;
            let total = all["total"].as_u64().unwrap();
            let everything = all["data"].as_array().unwrap().clone();
            assert_eq!(everything.len() as u64, total);
            let keys: Vec<(i64, String)> = everything
                .iter()
                .map(|item| (millis(item), item[id].as_str().unwrap().to_owned()))
                .collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, sorted, "{path} is ordered by createTime then id");

            let mut paged = Vec::new();
            for page_no in 1..=total.div_ceil(2) {
                let reply = client
                    .get(&format!("{path}?pageNo={page_no}&pageSize=2"))
                    .await;
                assert_eq!(reply.status, 200);
                let object = reply.json.as_object().unwrap();
                let fields: Vec<&str> = object.keys().map(String::as_str).collect();
                assert_eq!(fields, ["data", "total", "size", "current", "pages"]);
                assert_eq!(reply.json["total"], total);
                assert_eq!(reply.json["size"], 2);
                assert_eq!(reply.json["current"], page_no);
                assert_eq!(reply.json["pages"], total.div_ceil(2));
                paged.extend(reply.json["data"].as_array().unwrap().iter().cloned());
            }
            assert_eq!(paged, everything);

            let beyond = client.get(&format!("{path}?pageNo=999&pageSize=2")).await;
            assert_eq!(
                beyond.json,
                json!({"data": [], "total": total, "size": 2, "current": 999, "pages": total.div_ceil(2)})
            );
            let defaults = client.get(path).await.json;
            assert_eq!(defaults["size"], 20);
            assert_eq!(defaults["current"], 1);
        }
    }

    #[tokio::test]
    async fn empty_lists_have_zero_pages() {
        let sandbox = start(SandboxConfig {
            accounts_per_tenant: 0,
            ..SandboxConfig::default()
        })
        .await;
        let client = TestClient::new(&sandbox);
        for path in ["/v1/chat/businessAccounts", "/v1/chat/businessPhoneNumber"] {
            let reply = client.get(path).await;
            assert_eq!(
                reply.json,
                json!({"data": [], "total": 0, "size": 20, "current": 1, "pages": 0})
            );
        }
    }

    #[tokio::test]
    async fn bad_paging_is_a_400_naming_the_parameter() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let reply = client.get("/v1/chat/businessPhoneNumber?pageNo=abc").await;
        assert_eq!(reply.status, 400);
        assert_eq!(
            reply.json,
            json!({"code": "400", "msg": "invalid pageNo \"abc\": must be a base-10 integer >= 1"})
        );
        let reply = client
            .get("/v1/chat/businessAccounts?pageNo=1&pageSize=1001")
            .await;
        assert_eq!(reply.status, 400);
        assert_eq!(
            reply.json["msg"],
            "invalid pageSize \"1001\": must be a base-10 integer from 1 to 1000"
        );
        assert_eq!(
            reply.header("content-type").as_deref(),
            Some("application/json")
        );
    }
}
