//! What logs, error messages and reprs may show of a value: phone numbers masked, so that a log
//! line never carries a whole number of a person; URLs without their password; long text cut
//! short. A leaf: it imports nothing of the crate, so every module may use it.

/// A phone number as logs may show it: `8613800000000` -> `8613****0000`.
pub fn mask_phone(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    if chars.len() <= 8 {
        let tail: String = chars.iter().skip(chars.len().saturating_sub(2)).collect();
        return format!("****{tail}");
    }
    let head: String = chars.iter().take(4).collect();
    let tail: String = chars.iter().skip(chars.len() - 4).collect();
    format!("{head}****{tail}")
}

/// Masks phone numbers in a log line: a run of 8 to 15 digits, possibly written with `+`,
/// spaces, dashes, dots or parentheses between them, that is not part of a longer token (an
/// ASCII word, or a hyphenated one such as a UUID request id). Letters of other scripts are
/// not glue: `号码8613800000000` is masked.
pub fn mask_phone_numbers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_');
    let at = |i: usize| chars.get(i);
    // Glued to the token on the left: a word character, or a hyphen right after one.
    let glued_left = |start: usize| {
        let before = start.checked_sub(1).and_then(&at);
        word(before) || (before == Some(&'-') && word(start.checked_sub(2).and_then(&at)))
    };
    let glued_right = |end: usize| word(at(end)) || (at(end) == Some(&'-') && word(at(end + 1)));
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while let Some(&c) = at(index) {
        let opens = c == '+' || c == '(';
        let starts =
            c.is_ascii_digit() || (opens && at(index + 1).is_some_and(char::is_ascii_digit));
        if !starts || glued_left(index) {
            out.push(c);
            index += 1;
            continue;
        }
        // Extend over digits and short runs of separators that sit between digits.
        let separator = |c: Option<&char>| matches!(c, Some(' ' | '-' | '.' | '(' | ')'));
        let mut end = index + usize::from(opens);
        let mut digits = String::new();
        while let Some(&next) = at(end) {
            if next.is_ascii_digit() {
                digits.push(next);
                end += 1;
                continue;
            }
            let gap = (end..end + 3).take_while(|i| separator(at(*i))).count();
            if gap == 0 || !at(end + gap).is_some_and(char::is_ascii_digit) {
                break;
            }
            end += gap;
        }
        if (8..=15).contains(&digits.len()) && !glued_right(end) {
            out.push_str(&mask_phone(&digits));
            index = end;
        } else {
            // Not a phone number: copy this character and keep scanning after it.
            out.push(c);
            index += 1;
        }
    }
    out
}

/// `url` with its password replaced by `***`: how errors, logs and reprs name a store.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        // Not a URL with a host (`user:password@host`, read as the scheme `user`; a typo):
        // what comes before the last '@' may be a credential, and is not shown.
        _ => match url.rsplit_once('@') {
            Some((before, host)) => {
                let scheme = before
                    .split_once("://")
                    .map_or(String::new(), |(scheme, _)| format!("{scheme}://"));
                format!("{scheme}***@{host}")
            }
            None => url.to_owned(),
        },
    }
}

/// `text` cut to `max_chars` characters, with an ellipsis when cut: a body, a value or a repr
/// quoted in an error message stays one readable line.
pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or(text)),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_keeps_its_first_and_last_four_digits() {
        assert_eq!(mask_phone("8613800000000"), "8613****0000");
        assert_eq!(mask_phone("1234"), "****34");
    }

    #[test]
    fn log_lines_mask_phone_numbers() {
        for (line, masked) in [
            (
                "from \"8613900000000\" to +14155550100 on port 8080",
                "from \"8613****0000\" to 1415****0100 on port 8080",
            ),
            ("to +86 138 0000 0000; done", "to 8613****0000; done"),
            ("call (415) 555-0100 now", "call 4155****0100 now"),
            ("号码8613800000000限流", "号码8613****0000限流"),
            // Not phone numbers: part of a longer token, or too short or long.
            (
                "req_83b7b28ee1494e0abf48349a21734145",
                "req_83b7b28ee1494e0abf48349a21734145",
            ),
            (
                "rid 4d5f6c1e-1234-5678-9abc-012345678901",
                "rid 4d5f6c1e-1234-5678-9abc-012345678901",
            ),
            ("1234567890123456 digits", "1234567890123456 digits"),
            ("page 12 of 1234567", "page 12 of 1234567"),
        ] {
            assert_eq!(mask_phone_numbers(line), masked, "{line}");
        }
    }

    #[test]
    fn a_url_is_shown_without_its_password_however_it_is_mistyped() {
        for (url, shown) in [
            (
                "redis://:s3cret@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            (
                "postgresql://u:s3cret@db:5432/x",
                "postgresql://u:***@db:5432/x",
            ),
            // No scheme: `u` would be taken for one, the rest for a path.
            ("u:s3cret@127.0.0.1:6379", "***@127.0.0.1:6379"),
            (":s3cret@127.0.0.1:6379", "***@127.0.0.1:6379"),
            ("redis:s3cret@host", "***@host"),
            ("redis://:s3cret@/0", "redis://***@/0"),
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("localhost", "localhost"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
