//! A request as the transports take it: what the attempt loop builds once per attempt.
//!
//! A plain list of header lines rather than an `http::Request` and its `HeaderMap`: the HTTP/1.1
//! transport only writes the lines out, in order, so the map's hashing and its two allocations
//! per request bought nothing (a campaign builds one request per message). The HTTP/2
//! transport makes its `http::Request` from this one.

use http::{HeaderName, HeaderValue, Method, Uri};

use super::body::OutgoingBody;
use crate::error::{Error, Result};

pub(crate) struct Outgoing {
    pub(crate) method: Method,
    /// Absolute (`http://host:port/v1/...?...`).
    pub(crate) url: Uri,
    /// In the order they are written; each name once. `host` and the body's framing are the
    /// transport's to add.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) body: OutgoingBody,
    /// Not on a pooled connection (the HTTP/1.1 transport): the request is sent again because
    /// its reused connection ended without an answer.
    pub(crate) fresh_connection: bool,
    /// The attempt is traced: the transport notes when the answer's head was read
    /// ([`Reply::head_read`](super::reply::Reply)); an untraced one reads no clock for it.
    pub(crate) timed: bool,
}

impl Outgoing {
    /// The request line's target: the path and query (origin form, as HTTP/1.1 servers expect
    /// from a client that is not talking to a proxy).
    pub(crate) fn target(&self) -> &str {
        self.url
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str)
    }

    /// The same request again (see [`OutgoingBody::again`]).
    pub(crate) fn again(&self) -> Self {
        Outgoing {
            method: self.method.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            body: self.body.again(),
            fresh_connection: self.fresh_connection,
            timed: self.timed,
        }
    }

    /// The same request as an `http::Request`, for a client that takes one (reqwest).
    pub(crate) fn into_http(self) -> Result<http::Request<OutgoingBody>> {
        let mut request = http::Request::new(self.body);
        *request.method_mut() = self.method;
        *request.uri_mut() = self.url;
        let headers = request.headers_mut();
        headers.reserve(self.headers.len());
        for (name, value) in self.headers {
            if headers.insert(name, value).is_some() {
                return Err(Error::Internal("a header was given twice".to_owned()));
            }
        }
        Ok(request)
    }
}
