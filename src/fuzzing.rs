//! The entry points of the cargo-fuzz targets in `fuzz/`. Above `wire` and `client`, whose
//! decoders it drives, so neither imports the other for it.
//!
//! Every response decoder on arbitrary bytes (the JSON models, and the HTTP/1.1 framing they
//! arrive in): the `decoders` target (long runs, coverage-guided) and a time-bounded property
//! pass in `cargo test` (CI) both call [`decode_everything`]. The `differential` target's
//! [`read_alike`] comes with the `fuzzing` feature, which brings hyper's client.
//!
//! What must hold for any input: no panic (a panic here would be one across the FFI in the
//! bindings); every refusal is a [`DecodeError`] (by its type) that says why and quotes at
//! most the body's first 200 characters; what decodes keeps only bytes of the input (each
//! model's raw JSON is a slice of what was read).

use bytes::Bytes;

use crate::wire::{BusinessAccount, BusinessPhoneNumber, DecodeError, FromWire, Page, SendResult};

#[cfg(feature = "fuzzing")]
pub use crate::client::http1::differential::read_alike;

/// Runs the send-result, account-page, number-page, account, number and error-body decoders on
/// `data`, and checks what must hold; panics (the fuzzer's signal) when it does not.
pub fn decode_everything(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    let within = |raw: &[u8]| {
        // A model's raw JSON is a slice of the body: same bytes, found in it.
        raw.is_empty() || data.windows(raw.len()).any(|window| window == raw)
    };
    let refused = |result: &Result<(), DecodeError>, decoder: &str| {
        if let Err(error) = result {
            assert!(
                !error.message.is_empty(),
                "{decoder} refused without a reason"
            );
            // Cut at 200 characters, plus the mark that says it was cut.
            assert!(
                error.snippet.chars().count() <= 201,
                "{decoder} quoted more than the body's start"
            );
        }
    };
    let send = SendResult::from_json(body.clone()).map(|result| {
        assert!(
            within(result.wire.as_bytes()),
            "send result wire not in body"
        );
        // A result is a success only with a success code.
        if result.ok {
            assert_eq!(result.code_string().as_deref(), Some("0"));
        }
    });
    refused(&send, "send result");
    let accounts = Page::<BusinessAccount>::from_json(body.clone(), (1, 20)).map(|page| {
        assert_eq!(
            page.wire.as_bytes(),
            data.trim_ascii(),
            "page wire is the body"
        );
        for account in &page.data {
            assert!(within(account.wire.as_bytes()), "account wire not in body");
            for number in &account.business_phone_numbers {
                assert!(
                    within(number.wire.as_bytes()),
                    "nested number wire not in body"
                );
            }
        }
    });
    refused(&accounts, "account page");
    let numbers = Page::<BusinessPhoneNumber>::from_json(body.clone(), (1, 20)).map(|page| {
        for number in &page.data {
            assert!(within(number.wire.as_bytes()), "number wire not in body");
        }
    });
    refused(&numbers, "number page");
    refused(
        &BusinessAccount::from_json(body.clone()).map(drop),
        "account",
    );
    refused(&BusinessPhoneNumber::from_json(body).map(drop), "number");
    let (_, message) = crate::client::error_body(data);
    assert!(message.chars().count() <= 501, "error message not bounded");
    // The same bytes as an HTTP/1.1 answer off the wire (the HTTP/1.1 transport's parser).
    crate::client::check_any_answer(data);
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    use std::time::{Duration, Instant};

    /// Keys the decoders know, so generated objects reach every field's code.
    const KEYS: &[&str] = &[
        "smsId",
        "status",
        "code",
        "msg",
        "data",
        "total",
        "size",
        "current",
        "pages",
        "bizAccountId",
        "name",
        "businessPhoneNumbers",
        "phoneNumberId",
        "displayPhoneNumber",
        "createTime",
        "updateTime",
        "qualityRating",
        "message",
        "error",
    ];

    const HEADS: &[&str] = &[
        "HTTP/1.1 200 OK",
        "HTTP/1.0 200 OK",
        "HTTP/1.1 100 Continue",
        "HTTP/1.1 204 No Content",
        "HTTP/1.1 429 ",
        "HTTP/1.1 99999 x",
    ];
    const FIELDS: &[&str] = &[
        "Content-Length: 5\r\n",
        "Content-Length: 18446744073709551616\r\n",
        "Transfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Connection: close\r\n",
        "Retry-After: 1\r\n",
        "X-Request-Id: \u{e9}t\u{e9}\r\n",
        "Bad Header\r\n",
    ];
    const CHUNKED: &[&str] = &[
        "",
        "5\r\nhello\r\n",
        "ffffffffffffffffff\r\n",
        "0\r\n\r\n",
        "3;x=y\r\n",
    ];

    /// JSON text of values shaped like the service's, and of everything around them.
    fn json_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("-0".to_owned()),
            Just("1e400".to_owned()),
            Just("123456789012345678901234567890".to_owned()),
            Just("\"2024-03-05T10:15:30.123+0800\"".to_owned()),
            Just("\"0000-01-01T00:00:00Z\"".to_owned()),
            Just("\"\\ud800\"".to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| serde_json::to_string(&f).unwrap_or_default()),
            ".{0,12}".prop_map(|s| serde_json::Value::String(s).to_string()),
        ];
        leaf.prop_recursive(5, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec(
                    (prop::sample::select(KEYS).prop_map(str::to_owned), inner),
                    0..8
                )
                .prop_map(|fields| {
                    let fields: Vec<String> = fields
                        .into_iter()
                        .map(|(key, value)| format!("\"{key}\":{value}"))
                        .collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
    }

    /// Well-formed JSON, JSON cut or damaged at a random place, and plain bytes.
    fn inputs() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            json_text().prop_map(String::into_bytes),
            (json_text(), any::<prop::sample::Index>()).prop_map(|(text, at)| {
                let bytes = text.into_bytes();
                let cut = at.index(bytes.len() + 1);
                bytes.get(..cut).unwrap_or_default().to_vec()
            }),
            (json_text(), any::<prop::sample::Index>(), any::<u8>()).prop_map(
                |(text, at, byte)| {
                    let mut bytes = text.into_bytes();
                    if !bytes.is_empty() {
                        let at = at.index(bytes.len());
                        if let Some(slot) = bytes.get_mut(at) {
                            *slot = byte;
                        }
                    }
                    bytes
                }
            ),
            prop::collection::vec(any::<u8>(), 0..512),
            // An answer head with framing headers, then a body that may be chunked.
            (
                prop::sample::select(HEADS),
                prop::collection::vec(prop::sample::select(FIELDS), 0..4),
                prop::sample::select(CHUNKED),
                json_text(),
            )
                .prop_map(|(head, fields, chunked, body)| {
                    format!("{head}\r\n{}\r\n{chunked}{body}", fields.concat()).into_bytes()
                }),
        ]
    }

    /// The bounded pass: `BIZMSG_FUZZ_SECONDS` (default 2) of generated inputs.
    #[test]
    fn decoders_survive_any_input() {
        let seconds: u64 = std::env::var("BIZMSG_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let runs = std::cell::Cell::new(0u64);
        let mut round: u64 = 0;
        while Instant::now() < deadline {
            // A new seed per round: every round draws new inputs (a failure is reproducible
            // from the round number it reports).
            round += 1;
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&round.to_le_bytes());
            let mut runner = TestRunner::new_with_rng(
                Config {
                    cases: 256,
                    failure_persistence: None,
                    ..Config::default()
                },
                TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
            );
            runner
                .run(&inputs(), |input| {
                    runs.set(runs.get() + 1);
                    decode_everything(&input);
                    Ok(())
                })
                .unwrap_or_else(|failure| panic!("round {round}: {failure}"));
        }
        eprintln!("decoders fuzzed with {} inputs in {seconds} s", runs.get());
    }

    #[test]
    fn the_seed_corpus_decodes() {
        for sample in [
            &br#"{"smsId":"sms_1","status":"ACCEPTED","code":"0","msg":"success"}"#[..],
            br#"{"data":[{"phoneNumberId":"1","createTime":"2024-03-05T10:15:30.123+0800"}],"total":1,"size":20,"current":1,"pages":1}"#,
            br#"{"data":[{"bizAccountId":"1","businessPhoneNumbers":[{"phoneNumberId":"2"}]}]}"#,
            br#"{"code":"401","msg":"no"}"#,
        ] {
            decode_everything(sample);
        }
    }
}
