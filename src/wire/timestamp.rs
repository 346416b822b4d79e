//! Timestamps: ISO 8601 with milliseconds and a numeric UTC offset per the spec. Services differ
//! in the offset form, so `+08:00`, `+0800`, `+08` and `Z` are all accepted.

use chrono::{DateTime, Datelike, FixedOffset};

/// Parses a service timestamp; `None` when it is not one (the caller keeps the original text).
/// Years 1 to 9999 only: what Python's `datetime` (and any sane service) can hold.
pub fn parse_timestamp(text: &str) -> Option<DateTime<FixedOffset>> {
    let text = text.trim();
    // The spec's form ends in `+0800` (no colon), which chrono's fast RFC 3339 parser does not
    // take: written as `+08:00` it does, which spares the slow format-string parser for every
    // timestamp of a page.
    let with_colon = offset_with_colon(text);
    let fast = DateTime::parse_from_rfc3339(with_colon.as_deref().unwrap_or(text));
    let parsed = fast.ok().or_else(|| {
        // `%z` accepts `+0800` and `+08:00`; `%#z` also accepts a bare hour `+08`.
        [
            "%Y-%m-%dT%H:%M:%S%.f%z",
            "%Y-%m-%dT%H:%M:%S%.f%#z",
            "%Y-%m-%d %H:%M:%S%.f%z",
        ]
        .iter()
        .find_map(|format| DateTime::parse_from_str(text, format).ok())
    })?;
    let year = parsed.naive_local().year();
    (1..=9999).contains(&year).then_some(parsed)
}

/// `...+0800` as `...+08:00`, `...+08` as `...+08:00`; `None` when the text does not end in
/// such an offset. (A wrong guess only makes the fast parse fail; the slow ones still run.)
fn offset_with_colon(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let offset = |sign: usize, digits: usize| {
        matches!(bytes.get(sign), Some(b'+' | b'-'))
            && bytes
                .get(sign + 1..sign + 1 + digits)
                .is_some_and(|digits| digits.iter().all(u8::is_ascii_digit))
    };
    let length = bytes.len();
    if length > 5 && offset(length - 5, 4) {
        let (head, minutes) = text.split_at(length - 2);
        return Some(format!("{head}:{minutes}"));
    }
    if length > 3 && offset(length - 3, 2) {
        return Some(format!("{text}:00"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_offset_form() {
        let forms = [
            "2024-03-05T10:15:30.123+08:00",
            "2024-03-05T10:15:30.123+0800",
            "2024-03-05T10:15:30.123+08",
        ];
        for form in forms {
            let parsed = parse_timestamp(form);
            assert_eq!(
                parsed.map(|p| p.to_rfc3339()),
                Some("2024-03-05T10:15:30.123+08:00".to_owned()),
                "{form}"
            );
        }
        let zulu = parse_timestamp("2024-03-05T02:15:30.123Z").map(|p| p.timestamp_millis());
        let offset = parse_timestamp("2024-03-05T10:15:30.123+0800").map(|p| p.timestamp_millis());
        assert_eq!(zulu, offset);
        assert_eq!(
            parse_timestamp("2024-03-05T10:15:30-0500").map(|p| p.offset().local_minus_utc()),
            Some(-5 * 3600)
        );
    }

    #[test]
    fn refuses_what_is_not_a_timestamp() {
        for bad in [
            "",
            "yesterday",
            "2024-13-05T10:15:30.123+0800",
            "1709604930",
            // Regression: parseable, but Python's datetime cannot hold year 0.
            "0000-01-01T00:00:00.000Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
