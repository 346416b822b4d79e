//! What an API call asks the attempt loop to do (an [`Operation`]: method, URL, body, and for a
//! send the key and message), how safe it is to repeat, and the request each attempt builds
//! from it.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

use super::body::{BodyWatch, OutgoingBody};
use super::request::Outgoing;
use crate::error::{Error, UnknownOutcome};

/// How safe it is to repeat a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Safety {
    /// Reads: repeating is harmless.
    Idempotent,
    /// A send: repeating may message a person twice.
    SendOnce,
}

pub(crate) struct Operation {
    pub method: Method,
    /// Absolute: the transport sends it in origin form on direct connections.
    pub url: Uri,
    pub body: Option<Bytes>,
    /// Sends only: the key, the recipient and the template, for `Idempotency-Key` and for
    /// reconciling an unknown outcome.
    pub send: Option<SendContext>,
    /// Told of each attempt's body, for a caller that may give the call up midway.
    pub progress: Option<std::sync::Arc<super::body::SendProgress>>,
}

pub(crate) struct SendContext {
    pub idempotency_key: String,
    /// Shared with the caller (a campaign sends it again without copying it).
    pub request: Arc<crate::wire::SendRequest>,
}

impl SendContext {
    /// `cause` happened after the request may have reached the service; `request_id` is the
    /// service's, when an answer arrived.
    pub(crate) fn unknown(&self, cause: Error, request_id: Option<String>) -> Error {
        Error::SendOutcomeUnknown(Box::new(UnknownOutcome {
            idempotency_key: self.idempotency_key.clone(),
            to: self.request.to.clone(),
            template_name: self.request.template.name.clone(),
            request_id,
            cause: Box::new(cause),
        }))
    }
}

static APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
pub(crate) static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The headers every request of a client carries besides its own.
pub(crate) struct Headers<'a> {
    pub authorization: &'a HeaderValue,
    pub user_agent: &'a HeaderValue,
    /// The client's extra headers (`default_headers`, `with_options(headers=)`).
    pub extra: &'a HeaderMap,
}

impl Operation {
    pub(crate) fn safety(&self) -> Safety {
        if self.send.is_some() {
            Safety::SendOnce
        } else {
            Safety::Idempotent
        }
    }

    /// The request of one attempt, and the watch on its body (a request without a body, a
    /// GET, is a read and is retried anyway, so it has none).
    pub(crate) fn request(
        &self,
        headers: &Headers<'_>,
        idempotency_key: Option<&HeaderValue>,
    ) -> (Outgoing, Option<BodyWatch>) {
        let (body, watch) = match &self.body {
            Some(data) => {
                let (body, watch) = OutgoingBody::watched(data.clone(), self.progress.clone());
                (body, Some(watch))
            }
            None => (OutgoingBody::empty(), None),
        };
        let mut lines = Vec::with_capacity(5 + headers.extra.len());
        lines.push((AUTHORIZATION, headers.authorization.clone()));
        lines.push((ACCEPT, APPLICATION_JSON.clone()));
        lines.push((USER_AGENT, headers.user_agent.clone()));
        if self.body.is_some() {
            lines.push((CONTENT_TYPE, APPLICATION_JSON.clone()));
        }
        if let Some(key) = idempotency_key {
            lines.push((IDEMPOTENCY_KEY.clone(), key.clone()));
        }
        // The client's own headers; one of ours with the same name (accept, user-agent: the
        // others are refused as options) takes its value, in its place.
        for (name, value) in headers.extra {
            match lines.iter_mut().find(|(ours, _)| ours == name) {
                Some(ours) => ours.1 = value.clone(),
                None => lines.push((name.clone(), value.clone())),
            }
        }
        let request = Outgoing {
            method: self.method.clone(),
            url: self.url.clone(),
            headers: lines,
            body,
            fresh_connection: false,
            timed: false,
        };
        (request, watch)
    }
}
