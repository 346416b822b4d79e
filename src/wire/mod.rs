//! The service's JSON, exactly as the spec names it.
//!
//! Every decoded model keeps the object it was decoded from (`wire`), so a caller can always get
//! back what the service sent, unknown fields included. Decoding is tolerant where a real service
//! may differ from the spec's sample (numbers where strings were shown, missing optional fields,
//! timestamps in another offset form), and strict only where the value would be unusable.

mod account;
pub(crate) mod fields;
mod page;
mod phone_number;
mod send;
mod timestamp;

pub use account::BusinessAccount;
pub use page::{has_next_page, Page};
pub use phone_number::BusinessPhoneNumber;
pub use send::{is_success, SendRequest, SendResult, TemplateRequest, DEFAULT_SUCCESS_CODES};
pub use timestamp::parse_timestamp;

/// A model that can be decoded from one JSON object of the service.
pub trait FromWire: Sized {
    /// What the model is called in error messages.
    const NAME: &'static str;
    fn from_wire(object: serde_json::Map<String, serde_json::Value>) -> crate::Result<Self>;
    /// The object it was decoded from.
    fn wire(&self) -> &serde_json::Map<String, serde_json::Value>;
}
