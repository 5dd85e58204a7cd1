//! Checks that the running kernel computes what user space assumes, by running test programs
//! (`ebpf/selftest/`) with `BPF_PROG_TEST_RUN`: the histogram slot the probes file a latency in
//! must be the one `iommutop_model::hist` reads it back from, for every value.

use crate::object::load::{program, ProgramLookup};
use crate::object::verifier_log::describe;
use aya::programs::{RawTracePoint, RawTracePointRunOptions, TestRun};
use aya::{Ebpf, EbpfLoader};
use iommutop_model::hist::{slot_lower_bound, slot_of, SLOT_VECTORS};
use iommutop_model::sample::HIST_SLOTS;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/selftest.bpf.o"));

/// A value the kernel filed in another slot than user space reads it from.
#[derive(Debug, PartialEq)]
pub struct SlotMismatch {
    pub value: u64,
    pub kernel: u32,
    pub user_space: usize,
}

/// What the slot check found: how many values were tried and the ones that disagree.
#[derive(Debug)]
pub struct SlotCheck {
    pub values: usize,
    pub mismatches: Vec<SlotMismatch>,
}

/// The values tried: the shared vectors, every slot's lower bound with its neighbours (each
/// slot's edges), and every power of two with its neighbours (past the last slot too).
pub fn slot_test_values() -> Vec<u64> {
    let slot_edges = (0..HIST_SLOTS).flat_map(|slot| {
        let lower = slot_lower_bound(slot);
        [lower.saturating_sub(1), lower, lower + 1]
    });
    let powers = (0..64u32).flat_map(|bit| {
        let power = 1u64 << bit;
        [power - 1, power, power.saturating_add(1)]
    });
    let mut values: Vec<u64> = SLOT_VECTORS
        .iter()
        .map(|&(value, _)| value)
        .chain(slot_edges)
        .chain(powers)
        .chain([u64::MAX])
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// Why the test programs did not run; each names the step and carries the kernel's answer.
#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("loading the selftest object: {0}")]
    Object(String),
    #[error(transparent)]
    Program(#[from] ProgramLookup),
    #[error("loading selftest__hist_slot: {0}")]
    Load(String),
    #[error("BPF_PROG_TEST_RUN of selftest__hist_slot: {0}")]
    TestRun(String),
}

/// Runs the kernel's slot function on every test value and compares it with user space's.
pub fn check_hist_slots() -> Result<SlotCheck, SelftestError> {
    let mut ebpf: Ebpf = EbpfLoader::new()
        .load(OBJECT)
        .map_err(|e| SelftestError::Object(describe(&e)))?;
    let slot: &mut RawTracePoint = program(&mut ebpf, "selftest__hist_slot")?;
    slot.load().map_err(|e| SelftestError::Load(describe(&e)))?;
    let values = slot_test_values();
    let mut mismatches = Vec::new();
    for &value in &values {
        let mut options = RawTracePointRunOptions::new();
        options.args[0] = value;
        let kernel = slot
            .test_run(options)
            .map_err(|e| SelftestError::TestRun(describe(&e)))?
            .return_value;
        let user_space = slot_of(value);
        if kernel as usize != user_space {
            mismatches.push(SlotMismatch {
                value,
                kernel,
                user_space,
            });
        }
    }
    Ok(SlotCheck {
        values: values.len(),
        mismatches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_values_cover_every_slot_edge_once() {
        let values = slot_test_values();
        assert!(values.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        for bit in 0..64u32 {
            assert!(values.contains(&(1u64 << bit)), "2^{bit}");
        }
        for slot in 0..HIST_SLOTS {
            let lower = slot_lower_bound(slot);
            assert!(values.contains(&lower), "slot {slot} starts at {lower}");
            if lower > 0 {
                assert!(values.contains(&(lower - 1)), "below slot {slot}");
            }
        }
        assert!(values.contains(&0) && values.contains(&u64::MAX));
    }
}
