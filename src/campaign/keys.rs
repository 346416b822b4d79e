//! Idempotency keys of a campaign's messages.
//!
//! Without a campaign id every message gets a random key (its retries reuse it). With one (or
//! with a journal, which keeps an id of its own), keys are derived: a UUIDv5 of the campaign
//! id and the message's identity (its content, and its occurrence when repeats are sent), never
//! its position. So a job queue that re-runs a failed task, or a campaign sharded across
//! processes however it is cut, sends each message with the same key every time, and a service
//! that honours keys answers a repeat with the original result.

use uuid::Uuid;

use super::journal::Identity;

/// The namespace of campaign ids (a fixed, random UUID of bizmsg's).
const CAMPAIGNS: Uuid = Uuid::from_u128(0x6c1f_5a2e_9b47_4d0a_8e31_f2c4_b7a9_0d15);

#[derive(Clone, Debug)]
pub enum KeySource {
    Random,
    Derived(Uuid),
}

impl KeySource {
    pub fn for_campaign(campaign_id: &str) -> Self {
        KeySource::Derived(Uuid::new_v5(&CAMPAIGNS, campaign_id.as_bytes()))
    }

    /// The key of the message `identity`.
    pub fn key(&self, identity: Identity) -> String {
        match self {
            KeySource::Random => {
                // Encoded into a stack buffer: `to_string` goes through the formatter.
                let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
                Uuid::new_v4()
                    .hyphenated()
                    .encode_lower(&mut text)
                    .to_owned()
            }
            KeySource::Derived(namespace) => {
                let name = format!("{}:{}", identity.fingerprint.to_hex(), identity.occurrence);
                Uuid::new_v5(namespace, name.as_bytes()).to_string()
            }
        }
    }
}

/// The key of the `retry`-th new attempt of a message whose earlier attempt the service
/// rejected (a failed commit sent nothing, so a new key is safe, and needed: a service that
/// remembers keys would answer the old one with the old failure).
pub fn retry_key(base: &str, retry: u32) -> String {
    format!("{base}.r{retry}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(fingerprint: u128, occurrence: u32) -> Identity {
        Identity {
            fingerprint: super::super::message::Fingerprint(fingerprint),
            occurrence,
        }
    }

    #[test]
    fn derived_keys_depend_on_campaign_and_identity_only() {
        let a = KeySource::for_campaign("spring-sale");
        let b = KeySource::for_campaign("spring-sale");
        let other = KeySource::for_campaign("summer-sale");
        let message = identity(42, 0);
        assert_eq!(a.key(message), b.key(message));
        assert_ne!(a.key(message), a.key(identity(42, 1)));
        assert_ne!(a.key(message), a.key(identity(43, 0)));
        assert_ne!(a.key(message), other.key(message));
        assert_ne!(
            KeySource::Random.key(message),
            KeySource::Random.key(message)
        );
        assert!(crate::validate::idempotency_key(&retry_key(&a.key(message), 3)).is_ok());
    }
}
