//! The bearer token: a fixed string, or a provider asked for the current token when a call
//! needs one and asked again (refresh) after a 401.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use reqwest::header::HeaderValue;

use crate::error::{Error, Result};
use crate::validate;

/// Supplies tokens; `refresh` is true after the service answered 401 to the last one.
pub trait TokenProvider: Send + Sync {
    fn token(&self, refresh: bool) -> BoxFuture<'static, Result<String>>;
}

#[derive(Clone)]
pub enum TokenSource {
    Static(String),
    Provider(Arc<dyn TokenProvider>),
}

// The token never appears in a Debug rendering.
impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Static(_) => f.write_str("TokenSource::Static(<redacted>)"),
            TokenSource::Provider(_) => f.write_str("TokenSource::Provider(..)"),
        }
    }
}

pub(crate) enum Token {
    Static(HeaderValue),
    Provider(Arc<dyn TokenProvider>),
}

impl Token {
    pub(crate) fn new(source: TokenSource) -> Result<Self> {
        match source {
            TokenSource::Static(token) => Ok(Token::Static(authorization(&token)?)),
            TokenSource::Provider(provider) => Ok(Token::Provider(provider)),
        }
    }

    /// The `Authorization` header value to send.
    pub(crate) async fn header(&self, refresh: bool) -> Result<HeaderValue> {
        match self {
            Token::Static(value) => Ok(value.clone()),
            Token::Provider(provider) => authorization(&provider.token(refresh).await?),
        }
    }

    /// The header value when it needs no asking (a static token).
    pub(crate) fn at_hand(&self) -> Option<HeaderValue> {
        match self {
            Token::Static(value) => Some(value.clone()),
            Token::Provider(_) => None,
        }
    }

    pub(crate) fn can_refresh(&self) -> bool {
        matches!(self, Token::Provider(_))
    }
}

fn authorization(token: &str) -> Result<HeaderValue> {
    validate::header_value("the token", token)?;
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| Error::Configuration("the token is not a valid header value".to_owned()))?;
    // Keeps the value out of HTTP/2 header compression tables and hyper's debug output.
    value.set_sensitive(true);
    Ok(value)
}
