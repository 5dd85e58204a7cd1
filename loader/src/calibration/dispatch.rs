//! Calibrates the kernel's dispatch around probe programs, which the programs cannot time from
//! inside (`ebpf/selftest/dispatch.bpf.c`), on functions that `BPF_PROG_TEST_RUN` of a tracing
//! program calls: the gap between a call's entry program's end and its exit program's start
//! (a fentry/fexit pair on `bpf_fentry_test6`), and what such a pair costs the call around it
//! beyond what its programs time (the test run, `bpf_prog_test_run_tracing`, timed without and
//! with the pair). The medians are what the probes take out of a call's time
//! (`iommutop_dispatch_ns`, `iommutop_nested_dispatch_ns`, ebpf/lib/track.bpf.h).

use crate::object::load::{program, ProgramLookup};
use crate::object::verifier_log::describe;
use aya::maps::{Array, MapData};
use aya::programs::{FEntry, FExit, TestRun};
use aya::{Btf, Ebpf, EbpfLoader};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/dispatch.bpf.o"));

/// The function the pair is attached to (net/bpf/test_run.c).
const TEST_FUNCTION: &str = "bpf_fentry_test6";

/// The function that calls it in a test run.
const ENCLOSING_FUNCTION: &str = "bpf_prog_test_run_tracing";

/// Test runs per measurement; the rings in the BPF object hold 256.
const RUNS: usize = 200;

/// A fingerprint of the calibration programs (FNV-1a over their object): a kept calibration
/// ([`super::dispatch_cache`]) is one these programs made.
pub fn object_fingerprint() -> u64 {
    crate::boot_cache::fingerprint(OBJECT)
}

/// The kernel's dispatch around probe programs, in ns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Between a call's entry program's end and its exit program's start.
    pub gap_ns: u64,
    /// What a probed call nested in another costs that call beyond its programs' own runs, or
    /// why it was not measured (the probes then count two gaps).
    pub nested_ns: Result<u64, CalibrationError>,
}

/// Why the dispatch, or a nested call's part of it, was not measured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CalibrationError {
    #[error("loading the dispatch calibration: {0}")]
    Load(String),
    #[error(transparent)]
    Program(#[from] ProgramLookup),
    #[error("loading a {kind} program on {function}: {reason}")]
    LoadProgram {
        kind: &'static str,
        function: String,
        reason: String,
    },
    #[error("attaching to {function}: {reason}")]
    Attach { function: String, reason: String },
    #[error("BPF_PROG_TEST_RUN of {program}: {reason}")]
    TestRun { program: String, reason: String },
    #[error("the calibration object has no {0} map")]
    NoMap(String),
    #[error("{map}: {reason}")]
    Map { map: String, reason: String },
    #[error("{0} ran no call under its probes")]
    NoCalls(&'static str),
    #[error("{0} ran no test under its probes")]
    NoTests(&'static str),
    #[error("{ATTEMPTS} measurements put it at no more than one gap (last:                              {last_ns} ns, one gap {gap_ns} ns)")]
    Disturbed { last_ns: u64, gap_ns: u64 },
    /// The kernel's BTF the calibration is loaded against could not be read.
    #[error("{0}")]
    Btf(String),
}

impl CalibrationError {
    fn program(kind: &'static str, function: &str, reason: String) -> CalibrationError {
        CalibrationError::LoadProgram {
            kind,
            function: function.to_string(),
            reason,
        }
    }

    fn attach(function: &str, reason: String) -> CalibrationError {
        CalibrationError::Attach {
            function: function.to_string(),
            reason,
        }
    }

    fn map(map: &str, reason: String) -> CalibrationError {
        CalibrationError::Map {
            map: map.to_string(),
            reason,
        }
    }
}

/// Times a measurement is made before a nested cost no larger than one gap is given up on.
const ATTEMPTS: usize = 3;

/// Measures both; the nested cost alone may fail, and says why. A nested call's dispatch holds
/// two programs' entering and leaving, so it costs more than one gap: a measurement that says
/// otherwise was disturbed (the two medians it subtracts are of runs seconds apart, on a machine
/// that may have been busy in between) and is made again, at most [`ATTEMPTS`] times, then
/// reported as not measured. Kept for the boot (dispatch_cache.rs), a disturbed figure would be
/// every later run's.
///
/// With `understudies`, the pair runs with stand-ins for its understudies after it
/// (ebpf/selftest/dispatch.bpf.c), as the probes' timed programs then do.
pub fn calibrate(btf: &Btf, understudies: bool) -> Result<Dispatch, CalibrationError> {
    let mut attempt = 1;
    loop {
        let measured = measure(btf, understudies)?;
        match measured.nested_ns {
            Ok(nested) if nested <= measured.gap_ns => {
                log::info!(
                    "dispatch calibration {attempt} of {ATTEMPTS}: a nested call {nested} ns,                      no more than one gap ({} ns): disturbed",
                    measured.gap_ns
                );
                if attempt == ATTEMPTS {
                    return Ok(Dispatch {
                        nested_ns: Err(CalibrationError::Disturbed {
                            last_ns: nested,
                            gap_ns: measured.gap_ns,
                        }),
                        ..measured
                    });
                }
                attempt += 1;
            }
            _ => return Ok(measured),
        }
    }
}

fn measure(btf: &Btf, understudies: bool) -> Result<Dispatch, CalibrationError> {
    let mut ebpf: Ebpf = EbpfLoader::new()
        .btf(Some(btf))
        .load(OBJECT)
        .map_err(|e| CalibrationError::Load(describe(&e)))?;
    let enclosing = attach_pair(
        &mut ebpf,
        "calibrate__enclosing_entry",
        "calibrate__enclosing_exit",
        ENCLOSING_FUNCTION,
        btf,
    );
    // Without the pair on the test function: the test run as it is, probed around.
    let alone = match enclosing {
        Ok(()) => {
            test_runs(&mut ebpf, "calibrate__enclosing_exit")?;
            Ok(take_ring(&mut ebpf, "enclosing_samples")?)
        }
        Err(e) => Err(e),
    };
    // Linked first, they run after the pair: the kernel runs a function's programs last linked
    // first.
    if understudies {
        attach_pair(
            &mut ebpf,
            "calibrate__understudy_entry",
            "calibrate__understudy_exit",
            TEST_FUNCTION,
            btf,
        )?;
    }
    attach_pair(
        &mut ebpf,
        "calibrate__entry",
        "calibrate__exit",
        TEST_FUNCTION,
        btf,
    )?;
    test_runs(&mut ebpf, "calibrate__exit")?;
    let gap_ns = median(read_ring(&ebpf, "dispatch_samples")?)
        .ok_or(CalibrationError::NoCalls(TEST_FUNCTION))?;
    let nested_ns = alone.and_then(|alone| {
        let with_pair = median(read_ring(&ebpf, "enclosing_samples")?);
        median(alone)
            .zip(with_pair)
            .map(|(alone, with_pair)| with_pair.saturating_sub(alone))
            .ok_or(CalibrationError::NoTests(ENCLOSING_FUNCTION))
    });
    Ok(Dispatch { gap_ns, nested_ns })
}

fn attach_pair(
    ebpf: &mut Ebpf,
    entry_name: &str,
    exit_name: &str,
    function: &str,
    btf: &Btf,
) -> Result<(), CalibrationError> {
    let entry: &mut FEntry = program(ebpf, entry_name)?;
    entry
        .load(function, btf)
        .map_err(|e| CalibrationError::program("fentry", function, describe(&e)))?;
    entry
        .attach()
        .map_err(|e| CalibrationError::attach(function, describe(&e)))?;
    let exit: &mut FExit = program(ebpf, exit_name)?;
    exit.load(function, btf)
        .map_err(|e| CalibrationError::program("fexit", function, describe(&e)))?;
    exit.attach()
        .map_err(|e| CalibrationError::attach(function, describe(&e)))?;
    Ok(())
}

/// [`RUNS`] test runs of a loaded tracing program: each calls the test functions.
fn test_runs(ebpf: &mut Ebpf, loaded: &str) -> Result<(), CalibrationError> {
    let runner: &mut FExit = program(ebpf, loaded)?;
    for _ in 0..RUNS {
        runner.test_run(()).map_err(|e| CalibrationError::TestRun {
            program: loaded.to_string(),
            reason: describe(&e),
        })?;
    }
    Ok(())
}

/// The values a ring holds.
fn read_ring(ebpf: &Ebpf, name: &str) -> Result<Vec<u64>, CalibrationError> {
    let map = ebpf
        .map(name)
        .ok_or_else(|| CalibrationError::NoMap(name.to_string()))?;
    let samples: Array<&MapData, u64> =
        Array::try_from(map).map_err(|e| CalibrationError::map(name, describe(&e)))?;
    let count_slot = samples.len() - 1;
    let taken = samples
        .get(&count_slot, 0)
        .map_err(|e| CalibrationError::map(name, describe(&e)))?;
    (0..taken.min(u64::from(count_slot)) as u32)
        .map(|i| samples.get(&i, 0))
        .collect::<Result<_, _>>()
        .map_err(|e| CalibrationError::map(name, describe(&e)))
}

/// The values a ring holds, emptying it.
fn take_ring(ebpf: &mut Ebpf, name: &str) -> Result<Vec<u64>, CalibrationError> {
    let values = read_ring(ebpf, name)?;
    let map = ebpf
        .map_mut(name)
        .ok_or_else(|| CalibrationError::NoMap(name.to_string()))?;
    let mut samples: Array<&mut MapData, u64> =
        Array::try_from(map).map_err(|e| CalibrationError::map(name, describe(&e)))?;
    let count_slot = samples.len() - 1;
    samples
        .set(count_slot, 0, 0)
        .map_err(|e| CalibrationError::map(name, describe(&e)))?;
    Ok(values)
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
