//! Bearer-token authentication: which tenant a request speaks for, or why it is refused.

use std::collections::HashMap;

use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};

use super::answer::Answer;
use super::config::token_of;

/// The sandbox's tokens, one per tenant, in configuration order.
pub(crate) struct Tokens {
    pairs: Vec<(String, String)>,
    tenant_of: HashMap<String, usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Missing,
    NotBearer,
    UnknownToken,
}

impl Refusal {
    /// The 401 answer. The token itself is never echoed: answers and logs get copied around.
    pub(crate) fn answer(self) -> Answer {
        let msg = match self {
            Refusal::Missing => {
                "missing Authorization header; expected \"Authorization: Bearer <token>\""
            }
            Refusal::NotBearer => {
                "Authorization header is not a Bearer token; expected \"Bearer <token>\""
            }
            Refusal::UnknownToken => {
                "unknown bearer token; sandbox tokens look like \"sandbox-token-<tenant>\""
            }
        };
        Answer::error(StatusCode::UNAUTHORIZED, msg)
            .with_header(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
    }
}

impl Tokens {
    pub(crate) fn new(tenants: &[String]) -> Tokens {
        let pairs: Vec<(String, String)> = tenants
            .iter()
            .map(|tenant| (tenant.clone(), token_of(tenant)))
            .collect();
        let tenant_of = pairs
            .iter()
            .enumerate()
            .map(|(index, (_, token))| (token.clone(), index))
            .collect();
        Tokens { pairs, tenant_of }
    }

    /// `(tenant, token)` in configuration order.
    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    pub(crate) fn tenant_name(&self, index: usize) -> Option<&str> {
        self.pairs.get(index).map(|(tenant, _)| tenant.as_str())
    }

    /// The index of the tenant the request's bearer token belongs to.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<usize, Refusal> {
        let value = headers.get(AUTHORIZATION).ok_or(Refusal::Missing)?;
        let value = value.to_str().map_err(|_| Refusal::NotBearer)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(Refusal::NotBearer)?;
        // The scheme is case-insensitive (RFC 9110 section 11.1); the token is not.
        let token = token.trim();
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Err(Refusal::NotBearer);
        }
        self.tenant_of
            .get(token)
            .copied()
            .ok_or(Refusal::UnknownToken)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{send_body, start, TestClient};
    use crate::sandbox::SandboxConfig;
    use std::collections::HashSet;

    fn authenticate(value: Option<&str>) -> Result<usize, Refusal> {
        let tokens = Tokens::new(&["acme".into(), "globex".into()]);
        let mut headers = HeaderMap::new();
        if let Some(value) = value {
            headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        tokens.authenticate(&headers)
    }

    #[test]
    fn maps_each_token_to_its_tenant() {
        assert_eq!(authenticate(Some("Bearer sandbox-token-acme")), Ok(0));
        assert_eq!(authenticate(Some("bearer  sandbox-token-globex ")), Ok(1));
        assert_eq!(authenticate(None), Err(Refusal::Missing));
        for bad in [
            "sandbox-token-acme",
            "Basic YWNtZTp4",
            "Bearer",
            "Bearer   ",
            "Token x",
        ] {
            assert_eq!(authenticate(Some(bad)), Err(Refusal::NotBearer), "{bad}");
        }
        for unknown in ["Bearer sandbox-token-ACME", "Bearer sandbox-token-initech"] {
            assert_eq!(authenticate(Some(unknown)), Err(Refusal::UnknownToken));
        }
    }

    #[tokio::test]
    async fn refusals_are_401_with_a_reason_and_a_challenge() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let cases = [
            (None, "missing Authorization header"),
            (Some("Basic YWNtZTp4"), "not a Bearer token"),
            (Some("Bearer nope"), "unknown bearer token"),
        ];
        for path in ["/v1/chat/businessAccounts", "/v1/chat/businessPhoneNumber"] {
            for (authorization, reason) in cases {
                let reply = client.get_with_authorization(authorization, path).await;
                assert_eq!(reply.status, 401);
                assert_eq!(reply.json["code"], "401");
                let msg = reply.json["msg"].as_str().unwrap();
                assert!(msg.contains(reason), "{msg}");
                assert!(!msg.contains("nope"), "{msg}");
                assert_eq!(reply.header("www-authenticate").as_deref(), Some("Bearer"));
            }
        }
        let body = send_body("8613800000000", "8613800000001");
        let reply = client
            .send_with_authorization(Some("Bearer nope"), &body)
            .await;
        assert_eq!(reply.status, 401);
        assert!(sandbox
            .sent_messages()
            .iter()
            .all(|r| r.status == 401 && r.tenant.is_none()));
    }

    #[tokio::test]
    async fn tenants_see_and_send_from_only_their_own_numbers() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let tokens = sandbox.tenant_tokens();
        assert_eq!(
            tokens,
            vec![
                ("acme".to_owned(), "sandbox-token-acme".to_owned()),
                ("globex".to_owned(), "sandbox-token-globex".to_owned())
            ]
        );
        assert_eq!(sandbox.token(), "sandbox-token-acme");

        let ids = |reply: &crate::sandbox::testing::Reply, field: &str| -> HashSet<String> {
            let data = reply.json["data"].as_array().unwrap();
            data.iter()
                .map(|item| item[field].as_str().unwrap().to_owned())
                .collect()
        };
        let path = "/v1/chat/businessPhoneNumber?pageSize=1000";
        let acme = client.get_as(Some("sandbox-token-acme"), path).await;
        let globex = client.get_as(Some("sandbox-token-globex"), path).await;
        let acme_numbers = ids(&acme, "phoneNumberId");
        assert!(!acme_numbers.is_empty());
        assert!(acme_numbers.is_disjoint(&ids(&globex, "phoneNumberId")));
        let accounts = "/v1/chat/businessAccounts?pageSize=1000";
        let acme_accounts = ids(
            &client.get_as(Some("sandbox-token-acme"), accounts).await,
            "bizAccountId",
        );
        let globex_accounts = ids(
            &client.get_as(Some("sandbox-token-globex"), accounts).await,
            "bizAccountId",
        );
        assert_eq!(acme_accounts.len(), 3);
        assert!(acme_accounts.is_disjoint(&globex_accounts));
        assert_eq!(ids(&acme, "bizAccountId"), acme_accounts);

        // globex's first number is CONNECTED, yet acme may not send from it.
        let globex_first = globex.json["data"][0]["displayPhoneNumber"]
            .as_str()
            .unwrap();
        let digits: String = globex_first.chars().filter(char::is_ascii_digit).collect();
        let reply = client
            .send_with_authorization(
                Some("Bearer sandbox-token-acme"),
                &send_body(&digits, "8613800000001"),
            )
            .await;
        assert_eq!(reply.json["code"], "1002");
        let reply = client
            .send_with_authorization(
                Some("Bearer sandbox-token-globex"),
                &send_body(&digits, "8613800000001"),
            )
            .await;
        assert_eq!(reply.json["code"], "0");
        let tenants: Vec<_> = sandbox
            .sent_messages()
            .into_iter()
            .map(|r| r.tenant)
            .collect();
        assert_eq!(
            tenants,
            vec![Some("acme".to_owned()), Some("globex".to_owned())]
        );
    }
}
