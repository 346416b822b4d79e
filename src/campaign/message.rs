//! A campaign's messages as the engine takes them: in input order, each validated (or with the
//! reason it is not) and fingerprinted by its content.

use std::sync::Arc;

use bytes::Bytes;
use xxhash_rust::xxh3::Xxh3;

use crate::api::SendMessage;
use crate::error::{Error, Result};
use crate::validate;
use crate::wire::{SendRequest, TemplateRequest};

/// One item of the input, converted by the caller (a binding) and handed to the engine.
/// `payload` is whatever the caller wants back with the outcome (the Python object as given).
pub struct Input<P> {
    /// Position in the input, from 0.
    pub index: u64,
    pub payload: P,
    /// The message, or why the item is not a sendable message (a per-message failure).
    pub message: Result<Prepared>,
}

/// A validated message, encoded once for all its attempts.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub request: Arc<SendRequest>,
    /// The JSON body of its requests.
    pub body: Bytes,
    /// The caller's `Idempotency-Key` for this message, checked.
    pub key: Option<String>,
    pub fingerprint: Fingerprint,
}

impl Prepared {
    /// Validates `message` (the same checks as a single send) and the caller's key.
    pub fn new(message: &SendMessage, key: Option<String>) -> Result<Self> {
        Self::of(message.validate()?, key)
    }

    /// [`Prepared::new`] for a message whose template was validated already (a campaign's
    /// messages usually share one): `template` is that validation's result. The numbers are
    /// checked first, so the first error is the one a single send would report.
    pub fn with_template(
        to: &str,
        from: &str,
        template: Result<EncodedTemplate>,
        key: Option<String>,
    ) -> Result<Self> {
        let to = validate::phone_number("to", to)?;
        let from = validate::phone_number("from_", from)?;
        let EncodedTemplate { request, json } = template?;
        Self::of_encoded(SendRequest::template(to, from, request), key, Some(&json))
    }

    fn of(request: SendRequest, key: Option<String>) -> Result<Self> {
        Self::of_encoded(request, key, None)
    }

    /// `template_json`: the template's JSON when it was encoded already.
    fn of_encoded(
        request: SendRequest,
        key: Option<String>,
        template_json: Option<&[u8]>,
    ) -> Result<Self> {
        if let Some(key) = &key {
            validate::idempotency_key(key)?;
        }
        let body = match template_json {
            Some(json) => encode_with(&request.to, &request.from, json)?,
            None => crate::api::encode(&request)?,
        };
        Ok(Prepared {
            fingerprint: Fingerprint::of(&request),
            body,
            request: Arc::new(request),
            key,
        })
    }

    /// The recipient's digits as a number (E.164 digits fit in 64 bits).
    pub fn recipient(&self) -> u64 {
        self.request.to.parse().unwrap_or(u64::MAX)
    }
}

/// A validated template and its JSON, encoded once for every message that shares it.
#[derive(Clone, Debug)]
pub struct EncodedTemplate {
    pub request: TemplateRequest,
    json: Bytes,
}

impl EncodedTemplate {
    pub fn new(request: TemplateRequest) -> Result<Self> {
        let json = serde_json::to_vec(&request)
            .map_err(|e| Error::Internal(format!("cannot encode the template: {e}")))?;
        Ok(EncodedTemplate {
            request,
            json: Bytes::from(json),
        })
    }
}

/// The send request's JSON, exactly as serde_json writes a [`SendRequest`] (fields in their
/// order, no spaces), around a template encoded beforehand: a campaign's messages share one
/// template, and encoding it again per message was a measurable part of feeding them.
fn encode_with(to: &str, from: &str, template_json: &[u8]) -> Result<Bytes> {
    let mut body = Vec::with_capacity(48 + to.len() + from.len() + template_json.len());
    let text = |body: &mut Vec<u8>, text: &str| {
        serde_json::to_writer(body, text)
            .map_err(|e| Error::Internal(format!("cannot encode the send request: {e}")))
    };
    body.extend_from_slice(br#"{"to":"#);
    text(&mut body, to)?;
    body.extend_from_slice(br#","from":"#);
    text(&mut body, from)?;
    body.extend_from_slice(br#","type":"template","template":"#);
    body.extend_from_slice(template_json);
    body.push(b'}');
    Ok(Bytes::from(body))
}

/// A message's content: recipient, sender, template name, parameters and language, as sent.
/// Two messages with the same fingerprint are the same message: one is skipped as a duplicate
/// of the other, and a key derived from it is the other's. So it is a cryptographic hash
/// (SHA-256, its first 128 bits): nobody can craft a recipient or a parameter that collides
/// with another message. Journals made before it know their messages by xxh3
/// (`FingerprintKind::Xxh3`), and keep them so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u128);

/// How a campaign's fingerprints are computed: recorded by its journal when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FingerprintKind {
    Sha256,
    /// A non-cryptographic hash, of journals made before the fingerprint was SHA-256: their
    /// campaigns resume with the identities (and the derived keys) they began with.
    Xxh3,
}

impl FingerprintKind {
    /// As a journal records it.
    pub fn name(self) -> &'static str {
        match self {
            FingerprintKind::Sha256 => "sha256",
            FingerprintKind::Xxh3 => "xxh3",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "sha256" => Some(FingerprintKind::Sha256),
            "xxh3" => Some(FingerprintKind::Xxh3),
            _ => None,
        }
    }
}

impl Fingerprint {
    pub fn of(request: &SendRequest) -> Self {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        for part in Self::parts(request) {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        let digest = hasher.finalize();
        // Its first 128 bits (a SHA-256 digest has 256: the zip never runs short).
        let mut first = [0u8; 16];
        for (byte, digested) in first.iter_mut().zip(digest.iter()) {
            *byte = *digested;
        }
        Fingerprint(u128::from_be_bytes(first))
    }

    /// The fingerprint `kind` computes.
    pub fn of_kind(request: &SendRequest, kind: FingerprintKind) -> Self {
        match kind {
            FingerprintKind::Sha256 => Self::of(request),
            FingerprintKind::Xxh3 => {
                let mut hasher = Xxh3::new();
                for part in Self::parts(request) {
                    hasher.update(part.as_bytes());
                    hasher.update(&[0]);
                }
                Fingerprint(hasher.digest128())
            }
        }
    }

    /// What a fingerprint covers, each part followed by a separator no part can contain
    /// (validated text has no NUL), so ("ab", "c") and ("a", "bc") differ.
    fn parts(request: &SendRequest) -> [&str; 5] {
        [
            request.to.as_str(),
            request.from.as_str(),
            request.template.name.as_str(),
            request.template.parameters.as_str(),
            request.template.language.as_str(),
        ]
    }

    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        u128::from_str_radix(text, 16).ok().map(Fingerprint)
    }
}

/// A map keyed by fingerprints, which are hashes already: hashing them again (SipHash, the
/// default) was a measurable part of taking each message of a large campaign.
pub type FingerprintMap<V> =
    std::collections::HashMap<Fingerprint, V, std::hash::BuildHasherDefault<FingerprintHasher>>;

/// Hashes a [`Fingerprint`] to its low 64 bits, which its hash already spread evenly.
#[derive(Default)]
pub struct FingerprintHasher(u64);

impl std::hash::Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u128(&mut self, value: u128) {
        let [low @ .., _, _, _, _, _, _, _, _] = value.to_le_bytes();
        self.0 ^= u64::from_le_bytes(low);
    }

    /// Not used by `Fingerprint`'s `Hash`; any other input is folded in, byte by byte.
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }
}

/// Why an item that is not a message failed, as a per-message validation error.
pub fn not_a_message(what: &str) -> Error {
    Error::validation(
        "message",
        format!(
            "is not a message: expected bizmsg.Message or a mapping with to, from and a \
             template, got {what}"
        ),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn request() -> SendRequest {
        message("8613800000000", json!(["a"])).validate().unwrap()
    }

    #[test]
    fn a_fingerprint_is_the_first_128_bits_of_the_sha256_of_the_parts() {
        // The same digest as any SHA-256 gives: Python's hashlib.sha256(parts).hexdigest()
        // begins f16ce44ca5b692bd86ebba8a626b37c1.
        let request = request();
        let mut parts = Vec::new();
        for part in Fingerprint::parts(&request) {
            parts.extend_from_slice(part.as_bytes());
            parts.push(0);
        }
        use sha2::Digest;
        let digest = sha2::Sha256::digest(&parts);
        let expected = u128::from_be_bytes(digest.get(..16).unwrap().try_into().unwrap());
        assert_eq!(Fingerprint::of(&request), Fingerprint(expected));
        assert_eq!(
            Fingerprint::of(&request).to_hex(),
            "f16ce44ca5b692bd86ebba8a626b37c1"
        );
        assert_eq!(
            Fingerprint::of_kind(&request, FingerprintKind::Sha256),
            Fingerprint::of(&request)
        );
    }

    #[test]
    fn an_xxh3_fingerprint_never_changes() {
        // Journals made before SHA-256 know their messages by these: a change would make
        // every resumed message look new and send it again.
        let fingerprint = Fingerprint::of_kind(&request(), FingerprintKind::Xxh3);
        assert_eq!(fingerprint.to_hex(), XXH3_OF_REQUEST);
    }

    /// What the xxh3 fingerprint of `request()` was before SHA-256, and what the `xxhash`
    /// package of PyPI computes for its parts (`xxh3_128_hexdigest`).
    const XXH3_OF_REQUEST: &str = "fd4f18c75f3850979f5a1758ca65e9fc";

    proptest::proptest! {
        /// The body built around a template encoded beforehand is byte for byte what
        /// serde_json writes for the whole request, whatever the text (quotes, escapes,
        /// control characters, any Unicode).
        #[test]
        fn a_body_around_an_encoded_template_is_the_serde_body(
            to in ".*", from in ".*", name in ".*", parameters in ".*", language in ".*",
        ) {
            let template = TemplateRequest { name, parameters, language };
            let encoded = EncodedTemplate::new(template.clone()).unwrap();
            let request = SendRequest::template(to.clone(), from.clone(), template);
            let whole = serde_json::to_vec(&request).unwrap();
            let built = encode_with(&to, &from, &encoded.json).unwrap();
            proptest::prop_assert_eq!(built.as_ref(), whole.as_slice());
        }
    }

    #[test]
    fn a_fingerprint_map_tells_apart_fingerprints_whose_low_bits_are_equal() {
        let mut map = FingerprintMap::default();
        let low = 0x1234_5678_9abc_def0_u128;
        for high in 0..1000_u128 {
            map.insert(Fingerprint(high << 64 | low), high);
        }
        assert_eq!(map.len(), 1000);
        assert_eq!(map.get(&Fingerprint(7 << 64 | low)), Some(&7));
        assert_eq!(map.get(&Fingerprint(1000 << 64 | low)), None);
        let real = Fingerprint::of(&message("8613800000000", json!(["a"])).validate().unwrap());
        map.insert(real, 1);
        assert_eq!(map.get(&real), Some(&1));
    }

    fn message(to: &str, parameters: serde_json::Value) -> SendMessage {
        SendMessage {
            to: to.into(),
            from: "8613900000000".into(),
            template_name: "order_update".into(),
            parameters,
            language: "en-US".into(),
        }
    }

    #[test]
    fn the_same_content_however_written_has_one_fingerprint() {
        let a = Prepared::new(&message("+86 138 0013 8000", json!(["A"])), None).unwrap();
        let b = Prepared::new(&message("8613800138000", json!("[\"A\"]")), None).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        let c = Prepared::new(&message("8613800138000", json!(["B"])), None).unwrap();
        assert_ne!(a.fingerprint, c.fingerprint);
        assert_eq!(
            Fingerprint::from_hex(&a.fingerprint.to_hex()),
            Some(a.fingerprint)
        );
        assert_eq!(a.recipient(), 8613800138000);
    }

    #[test]
    fn a_shared_template_gives_the_same_message_and_the_same_first_error() {
        let of = |m: &SendMessage| {
            crate::api::validate_template(&m.template_name, &m.parameters, &m.language)
                .and_then(EncodedTemplate::new)
        };
        let one = message("+86 138 0013 8000", json!(["A"]));
        let template = of(&one);
        let shared = Prepared::with_template(&one.to, &one.from, template, None).unwrap();
        let alone = Prepared::new(&one, None).unwrap();
        assert_eq!(
            (shared.body, shared.fingerprint),
            (alone.body, alone.fingerprint)
        );
        let bad = message("12", json!([1]));
        let bad_template = of(&bad);
        assert!(bad_template.is_err());
        let shared = Prepared::with_template(&bad.to, &bad.from, bad_template, None);
        let alone = Prepared::new(&bad, None);
        assert_eq!(
            shared.map(|p| p.body).map_err(|e| e.to_string()),
            alone.map(|p| p.body).map_err(|e| e.to_string())
        );
    }

    #[test]
    fn a_bad_message_or_key_is_refused() {
        assert!(Prepared::new(&message("12", json!("p")), None).is_err());
        assert!(Prepared::new(&message("8613800138000", json!("p")), Some("a b".into())).is_err());
    }
}
