//! The probe table's own rules: what a new row must keep true.

use super::*;
use std::collections::HashSet;

#[test]
fn point_names_are_unique() {
    let mut seen = HashSet::new();
    for p in POINTS {
        assert!(seen.insert(p.name), "duplicate point {}", p.name);
    }
}

#[test]
fn every_point_has_a_hook() {
    for p in POINTS {
        assert!(
            !p.functions.is_empty() || !p.tracepoints.is_empty(),
            "{} has no hook",
            p.name
        );
    }
}

/// fentry/fexit programs are bound to one function when loaded: sharing one would make the
/// second attach fail at run time.
#[test]
fn fentry_programs_are_not_shared() {
    let mut seen = HashSet::new();
    for p in POINTS {
        for name in p
            .functions
            .iter()
            .filter_map(|f| f.fentry)
            .flat_map(|f| f.names())
        {
            assert!(seen.insert(name), "{name} shared");
        }
    }
}

#[test]
fn program_names_follow_family_hook_tier() {
    for p in POINTS {
        for f in p.functions {
            let suffixed = |programs: Programs, entry: &'static str, exit: &'static str| {
                let entry = programs.entry.map(|name| (name, entry));
                entry.into_iter().chain([(programs.exit, exit)])
            };
            let fentry = f
                .fentry
                .into_iter()
                .flat_map(|p| suffixed(p, "__fentry", "__fexit"));
            let kprobe = suffixed(f.kprobe, "__kprobe", "__kretprobe");
            for (name, suffix) in fentry.chain(kprobe) {
                assert!(name.ends_with(suffix), "{name} should end with {suffix}");
                assert_eq!(
                    name.matches("__").count(),
                    2,
                    "{name} is not family__hook__tier"
                );
            }
        }
        for t in p.tracepoints {
            assert!(t.program.ends_with("__tp"), "{}", t.program);
        }
    }
}

/// Each vendor driver's function is tagged with its vendor, and the DMA API's and the IOMMU
/// core's with none: a wrong tag leaves a function out on the machines that call it.
#[test]
fn vendor_driver_functions_are_tagged_with_their_vendor() {
    use iommutop_model::facts::IommuVendor;
    let expected = |symbol: &str| {
        let unprefixed = symbol.trim_start_matches('_');
        if unprefixed.starts_with("amd_") {
            Some(IommuVendor::Amd)
        } else if unprefixed.starts_with("intel_")
            || unprefixed.starts_with("qi_")
            || unprefixed.starts_with("domain_")
        {
            Some(IommuVendor::Intel)
        } else if unprefixed.starts_with("viommu_") {
            Some(IommuVendor::Virtio)
        } else if unprefixed.starts_with("arm_smmu_") {
            Some(IommuVendor::SmmuV3)
        } else {
            None
        }
    };
    let mut tagged = 0;
    for hook in POINTS.iter().flat_map(|p| p.functions) {
        assert_eq!(hook.vendor, expected(hook.symbol), "{}", hook.symbol);
        tagged += usize::from(hook.vendor.is_some());
    }
    assert_eq!(tagged, 16, "vendor functions in the table");
}

/// Each function is hooked by one row: the loader keeps each function's fentry outcome by its
/// name (fentry_jobs.rs), so a second row would find the first one's taken.
#[test]
fn every_function_is_hooked_by_one_row() {
    let mut seen = HashSet::new();
    for hook in POINTS.iter().flat_map(|p| p.functions) {
        assert!(seen.insert(hook.symbol), "{} hooked twice", hook.symbol);
    }
}
