//! Text from a report (device names, call-path frames, commands, warnings) made safe to place in
//! HTML text and attribute values.

/// `text` with the five characters HTML gives a meaning replaced by their entities, so that it
/// reads back as the same text in an element or a quoted attribute and can never open a tag.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
