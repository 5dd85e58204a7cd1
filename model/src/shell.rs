//! Command lines shown to people: each word quoted as a POSIX shell reads it back (`shlex`), so
//! that `sh -c 'exit 7'` shows as typed and not as `sh -c exit 7`.

/// Characters a shell takes literally in an argument: words made of them need no quotes.
/// `=` is one of them after the first word (in the first it would read as an assignment).
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-./=:,+@%^".contains(c)
}

/// `argv` as one line a shell would split into the same words.
pub fn join<S: AsRef<str>>(argv: &[S]) -> String {
    let words: Vec<String> = argv
        .iter()
        .enumerate()
        .map(|(i, word)| {
            let word = word.as_ref();
            if i > 0 && !word.is_empty() && word.chars().all(is_plain) {
                word.to_string()
            } else {
                // Only a NUL byte cannot be quoted, and no argument of a process holds one.
                shlex::try_quote(word).map_or_else(|_| word.to_string(), |q| q.into_owned())
            }
        })
        .collect();
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_spaces_and_quotes_are_quoted_as_a_shell_reads_them() {
        assert_eq!(
            join(&["dd", "if=/dev/zero", "bs=4k"]),
            "dd if=/dev/zero bs=4k"
        );
        let argv = ["sh", "-c", "exit 7"];
        let line = join(&argv);
        assert_eq!(line, "sh -c 'exit 7'");
        assert_eq!(shlex::split(&line).expect("splits"), argv);
        for tricky in [
            &["echo", "it's \"quoted\" $HOME `id` \\ * ;\nsecond line"][..],
            &["A=1", "", "x"][..],
        ] {
            assert_eq!(shlex::split(&join(tricky)).expect("splits"), tricky);
        }
        assert_eq!(join(&["A=1", "cmd"]), "'A=1' cmd", "not an assignment");
        assert_eq!(join::<&str>(&[]), "");
    }
}
