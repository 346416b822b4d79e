//! `POST /v1/chat/messages/send`: how the send request is built, validated and judged.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use crate::client::{CallOptions, Client, Operation, Response, SendContext, SendProgress, Timeout};
use crate::error::{Error, Rejected, Result};
use crate::validate;
use crate::wire::{FromWire, SendRequest, SendResult, TemplateRequest};

/// A template message as the caller gave it, before validation.
#[derive(Clone, Debug)]
pub struct SendMessage {
    pub to: String,
    pub from: String,
    pub template_name: String,
    /// A string, or a list/mapping of strings (encoded as compact JSON).
    pub parameters: Value,
    pub language: String,
}

impl SendMessage {
    /// The wire request, or the first argument that is wrong.
    pub fn validate(&self) -> Result<SendRequest> {
        Ok(SendRequest::template(
            validate::phone_number("to", &self.to)?,
            validate::phone_number("from_", &self.from)?,
            validate_template(&self.template_name, &self.parameters, &self.language)?,
        ))
    }
}

/// The template part of a send, checked and encoded as it goes on the wire.
pub fn validate_template(
    name: &str,
    parameters: &Value,
    language: &str,
) -> Result<TemplateRequest> {
    Ok(TemplateRequest {
        name: validate::template_name(name)?,
        parameters: validate::parameters(parameters)?,
        language: validate::language(language)?,
    })
}

/// What errors about a send's answer name.
const SEND_SOURCE: &str = "POST /v1/chat/messages/send";

/// What is left of a call's `total` timeout, begun at `started`; none left is the call's
/// timeout, before anything was sent.
fn total_left(
    total: std::time::Duration,
    started: std::time::Instant,
) -> Result<std::time::Duration> {
    match total.checked_sub(started.elapsed()) {
        Some(left) if !left.is_zero() => Ok(left),
        _ => Err(Error::Timeout(format!(
            "the send waited for its shared slot past the total timeout of {:.3}s; nothing was \
             sent",
            total.as_secs_f64()
        ))),
    }
}

/// The JSON body of a send request.
pub(crate) fn encode(request: &SendRequest) -> Result<Bytes> {
    serde_json::to_vec(request)
        .map(Bytes::from)
        .map_err(|e| Error::Internal(format!("cannot encode the send request: {e}")))
}

/// The caller's idempotency key after checking it, or a fresh one.
pub fn idempotency_key(chosen: Option<&str>) -> Result<String> {
    match chosen {
        Some(key) => validate::idempotency_key(key).map(str::to_owned),
        None => Ok(uuid::Uuid::new_v4().to_string()),
    }
}

impl Client {
    /// Validates and sends a template message; see [`Client::send_request`].
    pub async fn send_message(
        &self,
        message: &SendMessage,
        call: &CallOptions,
    ) -> Result<Response<SendResult>> {
        let key = idempotency_key(call.idempotency_key.as_deref())?;
        self.send_request(message.validate()?, key, call).await
    }

    /// Sends a validated request with `idempotency_key`. A failed commit is an error
    /// ([`Error::SendRejected`]), never a quiet result. A send that may have reached the
    /// service and then failed, or whose answer cannot be judged, is
    /// [`Error::SendOutcomeUnknown`] and is not retried.
    pub async fn send_request(
        &self,
        request: SendRequest,
        idempotency_key: String,
        call: &CallOptions,
    ) -> Result<Response<SendResult>> {
        let body = encode(&request)?;
        let started = std::time::Instant::now();
        // A connection is opened when none is idle before the shared slot, not after it (late
        // for it).
        if self.shared_limits().is_some() {
            self.warm_connection(call).await;
        }
        let shared = self.take_shared_slot(&request.from, call).await?;
        // The total timeout bounds the whole call: the attempts have what the wait for the
        // slot left of it.
        let left = match (&shared, self.total_timeout(call)) {
            (Some(_), Some(total)) => Some(total_left(total, started)?),
            _ => None,
        };
        let call = match left {
            Some(left) => std::borrow::Cow::Owned(CallOptions {
                timeout: Some(
                    call.timeout
                        .map_or(Timeout::total(left), |timeout| Timeout {
                            total: Some(left),
                            ..timeout
                        }),
                ),
                ..call.clone()
            }),
            None => std::borrow::Cow::Borrowed(call),
        };
        let request = Arc::new(request);
        // Its retries are paced as its first attempt was.
        let progress = shared
            .as_ref()
            .map(|shared| Arc::new(shared.progress_of(&request)));
        let sent = self
            .send_encoded(&request, body, idempotency_key, &call, progress.as_ref())
            .await;
        // Sent, or perhaps sent: counted (a count too many only warns early).
        if matches!(
            sent,
            Ok(_) | Err(crate::error::Error::SendOutcomeUnknown(_))
        ) {
            if let Some(shared) = shared {
                self.count_recipient(shared, &request.to).await;
            }
        }
        sent
    }

    /// [`Client::send_request`] for a request already encoded (`body`): a message sent
    /// several times (a campaign's retries) is encoded once and never copied.
    pub(crate) async fn send_encoded(
        &self,
        request: &Arc<SendRequest>,
        body: Bytes,
        idempotency_key: String,
        call: &CallOptions,
        progress: Option<&Arc<SendProgress>>,
    ) -> Result<Response<SendResult>> {
        validate::idempotency_key(&idempotency_key)?;
        let send = SendContext {
            idempotency_key,
            request: Arc::clone(request),
        };
        let operation = Operation {
            method: Method::POST,
            url: self.endpoints().send.clone(),
            body: Some(body),
            send: Some(send),
            progress: progress.cloned(),
        };
        let answer = self.execute(&operation, call).await?;
        let Some(send) = &operation.send else {
            return Err(Error::Internal("a send without its context".to_owned()));
        };
        // An answer that cannot be read says nothing about the message: it may have gone out.
        let mut result = match SendResult::from_answer(answer.body, SEND_SOURCE) {
            Ok(result) => result,
            Err(error) => return Err(send.unknown(error.into(), answer.meta.request_id)),
        };
        if result.code.is_none() {
            // Without a code the commit cannot be judged: the message may have gone out.
            return Err(send.unknown(
                Error::Decode {
                    message: "the send result has no `code`, so whether the message was \
                              committed is unknown"
                        .to_owned(),
                    snippet: result.wire.snippet(),
                },
                answer.meta.request_id,
            ));
        }
        result.judge(self.success_codes());
        if !result.ok {
            return Err(Error::SendRejected(Box::new(Rejected {
                result,
                meta: answer.meta,
            })));
        }
        Ok(Response {
            value: result,
            meta: answer.meta,
        })
    }
}
