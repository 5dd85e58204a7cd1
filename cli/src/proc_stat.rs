//! `/proc/PID/stat` read by field, and the clock its times count in: the tool's own CPU (the live
//! view's footer), its start (when the first number was ready), a process's state.

/// The fields after the command name, field 3 (the state) first: the name is in parentheses and
/// may hold spaces and parentheses, so fields count from the last `)`.
pub fn fields_after_name(stat: &str) -> Option<Vec<&str>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace().collect())
}

/// Clock ticks per second, the unit of the times in `/proc/PID/stat`, if the kernel says.
pub fn ticks_per_second() -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then_some(ticks as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_count_from_after_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (iommu top (x)) S 1 4242";
        assert_eq!(fields_after_name(stat), Some(vec!["S", "1", "4242"]));
        assert_eq!(fields_after_name("garbage"), None);
    }
}
