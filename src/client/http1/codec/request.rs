//! A request as bizmsg writes it: one buffer, the client's own framing and host headers.

use http::{HeaderName, HeaderValue, Method};

/// Appends `method target HTTP/1.1`, `headers`, `host` and the body's framing to `out`.
/// Framing and host headers in `headers` are skipped: the client owns them (they are refused
/// as options too).
pub(crate) fn encode_request(
    out: &mut Vec<u8>,
    method: &Method,
    target: &str,
    headers: &[(HeaderName, HeaderValue)],
    host: &HeaderValue,
    proxy_authorization: Option<&HeaderValue>,
    body_len: usize,
) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        if name == http::header::CONTENT_LENGTH
            || name == http::header::TRANSFER_ENCODING
            || name == http::header::CONNECTION
            || name == http::header::HOST
        {
            continue;
        }
        header_line(out, name.as_str(), value);
    }
    header_line(out, http::header::HOST.as_str(), host);
    if let Some(credentials) = proxy_authorization {
        header_line(out, http::header::PROXY_AUTHORIZATION.as_str(), credentials);
    }
    // A GET or HEAD without a body says nothing; any other request states its length, even 0,
    // so the server never waits for a body that is not coming.
    if body_len > 0 || !(method == Method::GET || method == Method::HEAD) {
        // Written straight into the buffer: no String and no formatting machinery per request.
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn header_line(out: &mut Vec<u8>, name: &str, value: &HeaderValue) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_request_is_written_with_its_length() {
        let host = HeaderValue::from_static("example.com");
        let headers = [
            (http::header::ACCEPT, HeaderValue::from_static("*/*")),
            (http::header::HOST, HeaderValue::from_static("elsewhere")),
            (http::header::CONTENT_LENGTH, HeaderValue::from_static("99")),
        ];
        let mut out = Vec::new();
        encode_request(
            &mut out,
            &Method::POST,
            "/v1/x?a=1",
            &headers,
            &host,
            None,
            2,
        );
        assert_eq!(
            out,
            b"POST /v1/x?a=1 HTTP/1.1\r\naccept: */*\r\nhost: example.com\r\ncontent-length: 2\r\n\r\n"
        );
        out.clear();
        encode_request(&mut out, &Method::GET, "/", &[], &host, None, 0);
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: example.com\r\n\r\n");
        out.clear();
        encode_request(&mut out, &Method::DELETE, "/", &[], &host, None, 0);
        assert_eq!(
            out,
            b"DELETE / HTTP/1.1\r\nhost: example.com\r\ncontent-length: 0\r\n\r\n"
        );
    }
}
