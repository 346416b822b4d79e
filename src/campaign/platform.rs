//! What the platform's error codes in a send result ask a bulk sender to do
//! (shared/spec/platform-limits.md). Codes are compared as text; unknown codes are final for
//! their message, like any failed commit.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// The whole batch should pause, then send the message again: throughput (130429),
    /// account rate limit (80007), maintenance (131057), service unavailable (131016).
    PauseBatch,
    /// This recipient only, later (pair rate, 131056; waits grow 4^n seconds).
    RetryRecipientLater,
    /// Stop the campaign and tell a person: spam rate limit (131048), template classification
    /// (131064), policy block (368), account locked (131031).
    StopCampaign,
    /// Final for this message.
    Final,
}

pub fn advice(code: &str) -> Advice {
    match code.trim() {
        "130429" | "80007" | "131057" | "131016" => Advice::PauseBatch,
        "131056" => Advice::RetryRecipientLater,
        "131048" | "131064" | "368" | "131031" => Advice::StopCampaign,
        _ => Advice::Final,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_the_documented_advice() {
        assert_eq!(advice("130429"), Advice::PauseBatch);
        assert_eq!(advice(" 131056 "), Advice::RetryRecipientLater);
        assert_eq!(advice("368"), Advice::StopCampaign);
        assert_eq!(advice("1002"), Advice::Final);
        assert_eq!(advice(""), Advice::Final);
    }
}
