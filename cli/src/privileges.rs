//! Checks for what loading BPF programs needs, so the error says what to do.

use crate::exit::{Failure, Outcome};

/// BPF tracing needs root (or CAP_BPF + CAP_PERFMON); say so before trying.
pub fn require_bpf_privileges() -> Outcome {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 || has_bpf_capabilities() {
        Ok(())
    } else {
        Err(Failure::environment(anyhow::anyhow!(
            "loading BPF programs needs root, or CAP_BPF and CAP_PERFMON: run with sudo"
        )))
    }
}

/// CAP_BPF (39) and CAP_PERFMON (38) in the effective set, read from /proc/self/status.
fn has_bpf_capabilities() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let Some(hex) = status.lines().find_map(|l| l.strip_prefix("CapEff:")) else {
        return false;
    };
    let Ok(caps) = u64::from_str_radix(hex.trim(), 16) else {
        return false;
    };
    let needed = (1u64 << 39) | (1u64 << 38);
    caps & needed == needed
}
