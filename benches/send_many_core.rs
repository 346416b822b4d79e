//! The campaign engine without Python: the job of `benches/run.py`'s send_many scenario
//! (messages made one by one, `concurrency` 64, outcomes dropped as they arrive) driven from
//! Rust, so the Python driver's share of a campaign's cost can be read off against it.
//!
//! ```sh
//! cargo bench --bench send_many_core --no-run          # builds target/release/deps/send_many_core-*
//! taskset -c 0 target/release/deps/send_many_core-<hash> http://127.0.0.1:PORT 200000
//! ```
//!
//! Like the Python client, the engine runs on one worker thread and the driver on the calling
//! thread; pin the process to one core as the benchmark suite does.

use std::time::Instant;

use bizmsg::api::SendMessage;
use bizmsg::campaign::{Campaign, Event, Input, Options, Prepared};
use bizmsg::client::{ClientConfig, TokenSource};
use bizmsg::Client;

/// The extension's allocator (see `src/python/mod.rs`), so that this measures what Python runs.
/// (With the `python` feature the library declares it already.)
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let url = args
        .next()
        .ok_or("usage: send_many_core BASE_URL [MESSAGES]")?;
    let total: u64 = args
        .next()
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(200_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let client = Client::new(ClientConfig::new(
        url,
        TokenSource::Static("sandbox-token-acme".into()),
    ))?;
    let options = Options {
        call: bizmsg::CallOptions {
            max_retries: Some(0),
            ..Default::default()
        },
        ..Options::default()
    };
    let started = Instant::now();
    let (sent, other) = runtime.block_on(async {
        let mut campaign = Campaign::start(client, options, runtime.handle())?;
        let (mut next, mut sent, mut other) = (0u64, 0u64, 0u64);
        while let Some(event) = campaign.next_event().await {
            match event {
                Event::NeedInput(wanted) => {
                    let end = (next + wanted as u64).min(total);
                    if next == end {
                        campaign.end_input();
                        continue;
                    }
                    let chunk = (next..end)
                        .map(|index| {
                            let message = SendMessage {
                                to: format!("86138{:08}", index % 100_000_000),
                                from: "8617771459397".into(),
                                template_name: "order_update".into(),
                                parameters: serde_json::json!(["A-1042"]),
                                language: "en_US".into(),
                            };
                            Input {
                                index,
                                payload: (),
                                message: Prepared::new(&message, None),
                            }
                        })
                        .collect();
                    next = end;
                    campaign.feed(chunk);
                }
                Event::Outcomes(batch) => {
                    for outcome in batch {
                        if outcome.status == bizmsg::campaign::Status::Sent {
                            sent += 1;
                        } else {
                            other += 1;
                        }
                    }
                }
                Event::Warning(_) => {}
                Event::Done(_) => break,
            }
        }
        Ok::<_, bizmsg::Error>((sent, other))
    })?;
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "send_many_core: {} messages in {elapsed:.2} s: {:.0} messages/s ({other} not sent)",
        sent + other,
        (sent + other) as f64 / elapsed
    );
    Ok(())
}
