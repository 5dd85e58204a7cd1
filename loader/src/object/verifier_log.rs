//! Aya's errors in one line: the syscall's answer, and the verifier's verdict read from its log,
//! in plain words where the kernel's are terse.

use crate::settings::debug_verifier;

/// One line for an aya error and its causes: the syscall's answer, and the verifier's last word
/// when it said one (the whole log is printed with IOMMUTOP_DEBUG_VERIFIER=1).
pub(crate) fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if debug_verifier() {
        eprintln!("{text}");
    }
    one_line(&text)
}

/// The same line for a syscall's answer and a verifier log of our own loads (the syscall's
/// words, then "Verifier output:" and the log).
pub(crate) fn describe_text(text: &str) -> String {
    if debug_verifier() {
        eprintln!("{text}");
    }
    one_line(text)
}

fn one_line(text: &str) -> String {
    let line = plain_words(&raw_line(text));
    const LIMIT: usize = 240;
    if line.len() <= LIMIT {
        return line;
    }
    let mut cut = LIMIT;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &line[..cut])
}

/// What the kernel's terse answers mean, where it is known.
fn plain_words(line: &str) -> String {
    if line.contains("/sys/bus/event_source/devices/kprobe/type") {
        return "this kernel has no kprobe PMU (kprobe events not built in, or hidden by a \
                sandbox): No such file or directory"
            .into();
    }
    if line.contains("Operation not permitted") && line.contains("(empty verifier log)") {
        return format!("{line}: refused before verification (lockdown, an LSM or a sandbox)");
    }
    line.to_string()
}

fn raw_line(text: &str) -> String {
    match text.split_once("Verifier output:") {
        Some((syscall, log)) => {
            let syscall = syscall.trim().trim_end_matches('.');
            match verifier_verdict(log) {
                Some(verdict) => format!("{syscall}; verifier: {verdict}"),
                None => format!("{syscall} (empty verifier log)"),
            }
        }
        None => text.lines().next().unwrap_or("").to_string(),
    }
}

/// The verifier's reason: the last log line that is not a statistic.
fn verifier_verdict(log: &str) -> Option<&str> {
    log.lines().map(str::trim).rev().find(|l| {
        !l.is_empty()
            && !l.starts_with("verification time")
            && !l.starts_with("processed ")
            && !l.starts_with("stack depth")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_verifier_log_is_said_in_words() {
        let text = "the BPF_PROG_LOAD syscall returned Operation not permitted (os error 1). Verifier output: ";
        let line = one_line(text);
        assert!(
            line.starts_with(
                "the BPF_PROG_LOAD syscall returned Operation not permitted (os error 1) (empty verifier log): refused before verification"
            ),
            "{line}"
        );
        assert!(line.contains("lockdown"), "{line}");
    }

    #[test]
    fn verifier_rejection_keeps_the_reason_line() {
        let text = "the BPF_PROG_LOAD syscall returned Permission denied (os error 13). Verifier output: 0: R1=ctx()\n25: (79) r1 = *(u64 *)(r0 +32)\nR0 unbounded memory access\nverification time 389 usec\nstack depth 24\n";
        assert_eq!(
            one_line(text),
            "the BPF_PROG_LOAD syscall returned Permission denied (os error 13); verifier: R0 unbounded memory access"
        );
    }
}
