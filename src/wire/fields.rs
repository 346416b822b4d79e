//! Small text helpers shared by the decoders and error messages.

/// `text` cut to `max_chars` characters, with an ellipsis when cut.
pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or(text)),
        None => text.to_owned(),
    }
}
