//! `POST /v1/chat/messages/send`: how the send request is built, validated and judged.

use bytes::Bytes;
use reqwest::Method;
use serde_json::Value;

use crate::client::{CallOptions, Client, Operation, Response, Safety};
use crate::error::{Error, Result};
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
            TemplateRequest {
                name: validate::template_name(&self.template_name)?,
                parameters: validate::parameters(&self.parameters)?,
                language: validate::language(&self.language)?,
            },
        ))
    }
}

impl Client {
    /// Sends a template message. A failed commit is an error ([`Error::SendRejected`]),
    /// never a quiet result; a send that may have reached the service and then failed is
    /// [`Error::SendOutcomeUnknown`] and is not retried.
    pub async fn send_message(
        &self,
        message: &SendMessage,
        call: &CallOptions,
    ) -> Result<Response<SendResult>> {
        let request = message.validate()?;
        let idempotency_key = match &call.idempotency_key {
            Some(key) => {
                validate::header_value("idempotency_key", key)
                    .map_err(|e| Error::validation("idempotency_key", e.to_string()))?;
                key.clone()
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        let body = serde_json::to_vec(&request)
            .map_err(|e| Error::Internal(format!("cannot encode the send request: {e}")))?;
        let answer = self
            .execute(
                Operation {
                    method: Method::POST,
                    url: self.endpoints().send.clone(),
                    body: Some(Bytes::from(body)),
                    safety: Safety::SendOnce,
                    send: Some(crate::client::SendContext {
                        idempotency_key,
                        to: request.to,
                        template_name: request.template.name,
                    }),
                },
                call,
            )
            .await?;
        let Value::Object(object) = answer.body else {
            return Err(Error::Internal(
                "a 2xx body that is not an object".to_owned(),
            ));
        };
        let mut result = SendResult::from_wire(object)?;
        result.judge(self.success_codes());
        if !result.ok {
            return Err(Error::SendRejected(Box::new(result)));
        }
        Ok(Response {
            value: result,
            meta: answer.meta,
        })
    }
}
