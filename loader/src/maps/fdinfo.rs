//! A BPF program's `/proc/self/fdinfo` fields: its run count and time, the runs the kernel
//! skipped, how much the verifier walked.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The fdinfo text of the program (or any file) `fd`.
pub(crate) fn read(fd: BorrowedFd<'_>) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()
}

/// A numeric `name:\tvalue` line of a /proc fdinfo file.
pub(crate) fn field(info: &str, name: &str) -> Option<u64> {
    info.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_by_name() {
        let info = "prog_type:\t26\nrun_time_ns:\t120\nrun_cnt:\t3\nrecursion_misses:\t7\n";
        assert_eq!(field(info, "recursion_misses"), Some(7));
        assert_eq!(field(info, "run_cnt"), Some(3));
        assert_eq!(field(info, "verified_insns"), None);
    }
}
