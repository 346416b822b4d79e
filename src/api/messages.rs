//! `POST /v1/chat/messages/send`: how the send request is built, validated and judged.

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use crate::client::{CallOptions, Client, Operation, Response, SendContext};
use crate::error::{Error, Rejected, Result};
use crate::validate;
use crate::wire::{fields, FromWire, SendRequest, SendResult, TemplateRequest};

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
            TemplateRequest {
                name: validate::template_name(&self.template_name)?,
                parameters: validate::parameters(&self.parameters)?,
                language: validate::language(&self.language)?,
            },
        ))
    }
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
        validate::idempotency_key(&idempotency_key)?;
        let body = serde_json::to_vec(&request)
            .map_err(|e| Error::Internal(format!("cannot encode the send request: {e}")))?;
        let send = SendContext {
            idempotency_key,
            to: request.to,
            template_name: request.template.name,
        };
        let operation = Operation {
            method: Method::POST,
            url: self.endpoints().send.clone(),
            body: Some(Bytes::from(body)),
            send: Some(send),
        };
        let answer = self.execute(&operation, call).await?;
        let Some(send) = &operation.send else {
            return Err(Error::Internal("a send without its context".to_owned()));
        };
        let Value::Object(object) = answer.body else {
            return Err(Error::Internal(
                "a 2xx body that is not an object".to_owned(),
            ));
        };
        let mut result = SendResult::from_wire(object)?;
        if result.code.is_none() {
            // Without a code the commit cannot be judged: the message may have gone out.
            return Err(send.unknown(
                Error::Decode {
                    message: "the send result has no `code`, so whether the message was \
                              committed is unknown"
                        .to_owned(),
                    snippet: fields::snippet(&Value::Object(result.wire)),
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
