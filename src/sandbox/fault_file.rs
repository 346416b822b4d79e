//! Faults written in a file (`bizmsg sandbox --faults FILE`, `Sandbox(faults="file.json")`), so
//! any client, in any language, can be pointed at a misbehaving service. See docs/sandbox.md
//! "Fault files".
//!
//! ```json
//! {"seed": 7,
//!  "faults": {"send": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 2},
//!                      {"cut_connection": true, "probability": 0.05, "times": null}],
//!             "business_phone_numbers": {"delay": 1.5, "every": 10, "times": null}}}
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::faults::{Fault, Route};

/// Faults to queue, in file order, and the seed of their draws.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    pub seed: Option<u64>,
    pub faults: Vec<(Route, Fault)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    seed: Option<u64>,
    /// Routes in file order (serde_json keeps object order here): faults queue as written.
    faults: serde_json::Map<String, serde_json::Value>,
}

/// `times`: absent is 1, `null` is "every matching request".
#[derive(Deserialize)]
#[serde(untagged)]
enum Times {
    Count(usize),
    Unlimited(()),
}

fn once() -> Option<Times> {
    Some(Times::Count(1))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    status: Option<u16>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    body: Option<String>,
    body_bytes: Option<usize>,
    #[serde(default)]
    chunked: bool,
    #[serde(default)]
    delay: f64,
    #[serde(default)]
    cut_connection: bool,
    #[serde(default = "once")]
    times: Option<Times>,
    #[serde(default = "one")]
    every: usize,
    #[serde(default = "certain")]
    probability: f64,
}

fn one() -> usize {
    1
}

fn certain() -> f64 {
    1.0
}

impl FaultPlan {
    /// Reads a fault file; a refusal names the route and the fault's position.
    pub fn from_json(text: &str) -> Result<FaultPlan, String> {
        let file: File = serde_json::from_str(text).map_err(|e| {
            format!(
                "fault file: {e} (expected {{\"seed\": N, \"faults\": {{\"<route>\": [<fault>, \
                 ...]}}}}, see docs/sandbox.md)"
            )
        })?;
        let mut faults = Vec::new();
        for (route_name, specs) in file.faults {
            let route: Route = route_name.parse()?;
            // One fault or a list of them; each read on its own, so a refusal names its place
            // and the field (an unknown one is named with the fields there are).
            let specs = match specs {
                serde_json::Value::Array(specs) => specs,
                one => vec![one],
            };
            for (position, spec) in specs.into_iter().enumerate() {
                let at = format!("faults.{route_name}[{position}]");
                let spec: Spec =
                    serde_json::from_value(spec).map_err(|e| format!("fault file: {at}: {e}"))?;
                if !spec.delay.is_finite() || spec.delay < 0.0 {
                    return Err(format!("{at}: delay must be 0 or more seconds"));
                }
                let fault = Fault {
                    times: match spec.times {
                        None | Some(Times::Unlimited(())) => None,
                        Some(Times::Count(count)) => Some(count),
                    },
                    every: spec.every,
                    probability: spec.probability,
                    status: spec.status,
                    headers: spec.headers.into_iter().collect(),
                    body: spec.body,
                    body_bytes: spec.body_bytes,
                    chunked: spec.chunked,
                    delay: Duration::try_from_secs_f64(spec.delay)
                        .map_err(|_| format!("{at}: delay is out of range"))?,
                    cut_connection: spec.cut_connection,
                };
                fault.check().map_err(|why| format!("{at}: {why}"))?;
                faults.push((route, fault));
            }
        }
        Ok(FaultPlan {
            seed: file.seed,
            faults,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_fault_file_reads_into_faults() {
        let plan = FaultPlan::from_json(
            r#"{"seed": 7, "faults": {
                "send": [{"status": 503, "headers": {"Retry-After": "1"}, "times": 2},
                         {"cut_connection": true, "probability": 0.05, "times": null}],
                "business_phone_numbers": {"delay": 1.5, "every": 10, "body_bytes": 100, "chunked": true}
            }}"#,
        )
        .unwrap();
        assert_eq!(plan.seed, Some(7));
        assert_eq!(plan.faults.len(), 3);
        // In file order: the send faults first, as written.
        assert_eq!(plan.faults[0].0, Route::Send);
        let (route, numbers) = &plan.faults[2];
        assert_eq!(*route, Route::BusinessPhoneNumbers);
        assert_eq!(numbers.every, 10);
        assert_eq!(numbers.times, Some(1));
        assert_eq!(numbers.delay, Duration::from_millis(1500));
        assert!(numbers.chunked && numbers.body_bytes == Some(100));
        assert_eq!(plan.faults[0].1.times, Some(2));
        assert_eq!(
            plan.faults[0].1.headers,
            vec![("Retry-After".into(), "1".into())]
        );
        assert_eq!(plan.faults[1].1.times, None);
        assert!((plan.faults[1].1.probability - 0.05).abs() < 1e-12);
    }

    #[test]
    fn refusals_say_what_and_where() {
        for (text, says) in [
            ("{}", "missing field `faults`"),
            (
                r#"{"faults": {"sms": {"status": 500}}}"#,
                "unknown sandbox route \"sms\"",
            ),
            (
                r#"{"faults": {"send": {"status": 700}}}"#,
                "faults.send[0]: status 700",
            ),
            (
                r#"{"faults": {"send": {"every": 0}}}"#,
                "faults.send[0]: every must be 1",
            ),
            (
                r#"{"faults": {"send": {"delay": -1}}}"#,
                "faults.send[0]: delay must be 0",
            ),
            (
                r#"{"faults": {"send": [{"status": 500}, {"statuss": 500}]}}"#,
                "fault file: faults.send[1]: unknown field `statuss`",
            ),
        ] {
            let error = FaultPlan::from_json(text).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }
}
