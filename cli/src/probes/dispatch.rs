//! Calibrates the kernel's dispatch around a probe program, which the programs cannot time from
//! inside (`ebpf/selftest/dispatch.bpf.c`): a fentry/fexit pair on `bpf_fentry_test6`, a function
//! that only adds its six arguments, run by `BPF_PROG_TEST_RUN`, measures the gap between the end
//! of its entry program and the start of its exit program. The median of [`RUNS`] gaps is what the
//! probes take out of a call's time per nested probe (`iommutop_dispatch_ns`,
//! ebpf/lib/track.bpf.h).

use super::loader::{describe, program};
use aya::maps::{Array, MapData};
use aya::programs::{FEntry, FExit, TestRun};
use aya::{Btf, Ebpf, EbpfLoader};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/dispatch.bpf.o"));

/// The function the calibration pair is attached to (net/bpf/test_run.c).
const TEST_FUNCTION: &str = "bpf_fentry_test6";

/// Gaps measured; the ring in the BPF object holds 256.
const RUNS: usize = 200;

/// The median gap between an entry program's end and an exit program's start, in ns.
pub fn calibrate(btf: &Btf) -> Result<u64, String> {
    let mut ebpf: Ebpf = EbpfLoader::new()
        .btf(Some(btf))
        .load(OBJECT)
        .map_err(|e| format!("loading the dispatch calibration: {}", describe(&e)))?;
    let entry: &mut FEntry = program(&mut ebpf, "calibrate__entry")?;
    entry.load(TEST_FUNCTION, btf).map_err(|e| {
        format!(
            "loading a fentry program on {TEST_FUNCTION}: {}",
            describe(&e)
        )
    })?;
    entry
        .attach()
        .map_err(|e| format!("attaching to {TEST_FUNCTION}: {}", describe(&e)))?;
    let exit: &mut FExit = program(&mut ebpf, "calibrate__exit")?;
    exit.load(TEST_FUNCTION, btf).map_err(|e| {
        format!(
            "loading a fexit program on {TEST_FUNCTION}: {}",
            describe(&e)
        )
    })?;
    exit.attach()
        .map_err(|e| format!("attaching to {TEST_FUNCTION}: {}", describe(&e)))?;
    for _ in 0..RUNS {
        exit.test_run(())
            .map_err(|e| format!("BPF_PROG_TEST_RUN of {TEST_FUNCTION}: {}", describe(&e)))?;
    }
    let samples: Array<MapData, u64> = ebpf
        .take_map("dispatch_samples")
        .ok_or("the calibration object has no dispatch_samples map")?
        .try_into()
        .map_err(|e| format!("dispatch_samples: {}", describe(&e)))?;
    let ring = samples.len() as usize - 1;
    let taken = samples
        .get(&(ring as u32), 0)
        .map_err(|e| format!("dispatch_samples: {}", describe(&e)))? as usize;
    let gaps: Vec<u64> = (0..taken.min(ring) as u32)
        .map(|i| samples.get(&i, 0))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("dispatch_samples: {}", describe(&e)))?;
    median(gaps).ok_or_else(|| format!("{TEST_FUNCTION} ran {taken} times under its probes"))
}

fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_value_and_ignores_outliers() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![7]), Some(7));
        assert_eq!(median(vec![900, 40, 50, 60, 45]), Some(50));
    }
}
