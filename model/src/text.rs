//! Text for a terminal of a given width: tables whose free-text columns wrap, and prose whose long
//! lines wrap under their own indentation. Widths are counted in characters (the arrows and
//! multiplication signs the text uses are one column each).

/// How a table column is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
    /// Left, and the one kind of column whose cells wrap to fit a width (free text).
    Wrap,
}

/// The narrowest a wrapping column is made: narrower, its text would be a word a line.
const WRAP_MIN_WIDTH: u16 = 24;

/// Columns separated by two spaces, each as wide as its widest cell, no borders, no trailing
/// spaces (comfy-table). Given a width, the free-text columns wrap so that the table fits it where
/// it can; names and numbers never wrap.
pub struct Table {
    table: comfy_table::Table,
    wrapping: Vec<usize>,
}

impl Table {
    pub fn new(headers: &[(&str, Align)]) -> Table {
        let mut table = comfy_table::Table::new();
        table
            .load_preset(comfy_table::presets::NOTHING)
            .set_header(headers.iter().map(|(h, _)| h.to_string()));
        for (index, (_, align)) in headers.iter().enumerate() {
            if let Some(column) = table.column_mut(index) {
                // Two spaces between columns: one on each side, none before the first.
                column.set_padding((u16::from(index > 0), 1));
                column.set_cell_alignment(match align {
                    Align::Left | Align::Wrap => comfy_table::CellAlignment::Left,
                    Align::Right => comfy_table::CellAlignment::Right,
                });
                if *align != Align::Wrap {
                    column.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
                }
            }
        }
        let wrapping = headers
            .iter()
            .enumerate()
            .filter(|(_, (_, align))| *align == Align::Wrap)
            .map(|(index, _)| index)
            .collect();
        Table { table, wrapping }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.table.add_row(cells);
    }

    /// The table, fitted to `width` columns when one is given.
    pub fn render(self, width: Option<u16>) -> String {
        let mut table = self.table;
        match width {
            Some(width) => {
                for &index in &self.wrapping {
                    if let Some(column) = table.column_mut(index) {
                        column.set_constraint(comfy_table::ColumnConstraint::LowerBoundary(
                            comfy_table::Width::Fixed(WRAP_MIN_WIDTH),
                        ));
                    }
                }
                table
                    .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
                    .set_width(width)
            }
            None => table.set_content_arrangement(comfy_table::ContentArrangement::Disabled),
        };
        let mut out = String::new();
        for line in table.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The widest line of `text`, in characters.
pub fn widest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `text` with every line longer than `width` broken at spaces; the lines it continues on are
/// indented under the line's own text (past a `- ` or `1. ` that starts it, or by two more
/// spaces), so that lists and paragraphs keep their shape. A word longer than a line is cut.
/// Without a width, `text` as it is.
pub fn wrap(text: &str, width: Option<u16>) -> String {
    let Some(width) = width.map(usize::from).filter(|w| *w >= 20) else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        wrap_line(body, width, &mut out);
        out.push_str(newline);
    }
    out
}

fn wrap_line(line: &str, width: usize, out: &mut String) {
    if line.chars().count() <= width {
        out.push_str(line);
        return;
    }
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let marker = list_marker(rest).unwrap_or(2);
    let hanging = (indent + marker).min(width / 2);
    let mut current = " ".repeat(indent);
    let mut current_len = indent;
    let mut first_word = true;
    for word in rest.split(' ') {
        let word_len = word.chars().count();
        let sep = usize::from(!first_word);
        if !first_word && current_len + sep + word_len > width {
            out.push_str(current.trim_end());
            out.push('\n');
            current = " ".repeat(hanging);
            current_len = hanging;
        } else if !first_word {
            current.push(' ');
            current_len += 1;
        }
        // A word wider than what is left of an empty line is cut where the line ends.
        let mut word: Vec<char> = word.chars().collect();
        while current_len + word.len() > width && current_len < width {
            let take = width - current_len;
            current.extend(word.drain(..take));
            out.push_str(&current);
            out.push('\n');
            current = " ".repeat(hanging);
            current_len = hanging;
        }
        current_len += word.len();
        current.extend(word);
        first_word = false;
    }
    out.push_str(current.trim_end());
}

/// The width of a `- `, `* ` or `12. ` that starts a list item.
fn list_marker(text: &str) -> Option<usize> {
    if text.starts_with("- ") || text.starts_with("* ") {
        return Some(2);
    }
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    (digits > 0 && text[digits..].starts_with(". ")).then_some(digits + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_and_no_width_are_left_alone() {
        let text = "one line\n  two\n";
        assert_eq!(wrap(text, Some(80)), text);
        let long = "word ".repeat(40);
        assert_eq!(wrap(&long, None), long);
    }

    #[test]
    fn a_long_line_wraps_at_spaces_under_its_own_text() {
        let line = format!("  - {}", "abcd ".repeat(30).trim_end());
        let wrapped = wrap(&line, Some(40));
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines.len() > 3, "{wrapped}");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{wrapped}");
        assert!(lines[0].starts_with("  - abcd"));
        // Continued under the item's text, past the dash.
        assert!(lines[1].starts_with("    abcd"), "{wrapped}");
        assert_eq!(
            wrapped.split_whitespace().filter(|w| *w == "abcd").count(),
            30
        );
    }

    #[test]
    fn a_numbered_item_continues_past_its_number() {
        let line = format!("12. {}", "xy ".repeat(30).trim_end());
        let wrapped = wrap(&line, Some(30));
        assert!(
            wrapped
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("    xy")),
            "{wrapped}"
        );
    }

    #[test]
    fn a_word_wider_than_the_line_is_cut() {
        let line = format!("path {}", "x".repeat(70));
        let wrapped = wrap(&line, Some(30));
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 30),
            "{wrapped}"
        );
        assert_eq!(wrapped.chars().filter(|c| *c == 'x').count(), 70);
    }

    #[test]
    fn arrows_count_as_one_column() {
        let line = "a ← b ← c ← d ← e ← f ← g ← h ← i ← j ← k";
        assert_eq!(line.chars().count(), 41);
        assert_eq!(wrap(line, Some(41)), line);
    }
}
