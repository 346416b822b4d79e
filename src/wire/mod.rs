//! The service's JSON, exactly as the spec names it.
//!
//! Every decoded model keeps the object it was decoded from (`wire`), so a caller can always get
//! back what the service sent, unknown fields included. Decoding is tolerant where a real service
//! may differ from the spec's sample (numbers where strings were shown, missing optional fields,
//! timestamps in another offset form), and strict only where the value would be unusable.

mod account;
pub(crate) mod decode_error;
#[doc(hidden)]
mod json;
pub mod model;
mod page;
mod phone_number;
mod raw_object;
mod send;
mod timestamp;

pub use account::BusinessAccount;
pub use decode_error::{DecodeError, DecodeResult};
pub use json::{RawJson, Reader, Scalar};
pub use model::{FieldRef, WireModel};
pub use page::{has_next_page, Page};
pub use phone_number::BusinessPhoneNumber;
pub use raw_object::RawObject;
pub use send::{is_success, SendRequest, SendResult, TemplateRequest, DEFAULT_SUCCESS_CODES};
pub use timestamp::parse_timestamp;

/// A model that can be decoded from one JSON object of the service.
pub trait FromWire: Sized {
    /// What the model is called in error messages.
    const NAME: &'static str;

    /// Decodes the object the reader is at, keeping its text.
    fn read(reader: &mut Reader<'_>) -> crate::wire::DecodeResult<Self>;

    /// The text of the object it was decoded from.
    fn wire(&self) -> &RawJson;

    /// Decodes a whole body that holds one object (and nothing after it).
    fn from_json(body: bytes::Bytes) -> crate::wire::DecodeResult<Self> {
        Self::from_answer(body, "the answer")
    }

    /// [`FromWire::from_json`] for the answer of `source` (`POST /v1/...`), which errors name.
    fn from_answer(body: bytes::Bytes, source: &str) -> crate::wire::DecodeResult<Self> {
        let mut reader = Reader::from_source(&body, source);
        let decoded = Self::read(&mut reader)?;
        reader.finish(Self::NAME)?;
        Ok(decoded)
    }
}
