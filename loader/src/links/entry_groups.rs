//! Which entry programs serve which operations, grouped so that each operation is in one group
//! ([`EntryGroup`]): the shape the kernel's per-program count of skipped runs has to be read in to
//! say how many calls no program saw. A per-function entry program serves one operation; a
//! multi-function family ([`super::multi_shapes`]) or a kprobe program that several functions share
//! may serve several, and joins their groups; a count-only tracepoint program is an entry program
//! of its own.

use crate::points::table::{Point, POINTS};
use iommutop_model::sample::{EntryGroup, Op};
use std::collections::{BTreeMap, BTreeSet};

/// The groups of the programs that are loaded (`loaded`, by name), each with the runs of its
/// programs the kernel skipped (`misses`, by program; absent is 0). `stand_ins` names the
/// multi-function program that runs in place of a per-function one. Programs that are not loaded
/// (another tier's, another kernel's) are in no group; an operation none of whose entry
/// programs is loaded is in none either.
pub(crate) fn entry_groups(
    loaded: &BTreeSet<&str>,
    stand_ins: &BTreeMap<&str, &str>,
    misses: &BTreeMap<String, u64>,
) -> Vec<EntryGroup> {
    entry_groups_of(POINTS, loaded, stand_ins, misses)
}

fn entry_groups_of(
    points: &[Point],
    loaded: &BTreeSet<&str>,
    stand_ins: &BTreeMap<&str, &str>,
    misses: &BTreeMap<String, u64>,
) -> Vec<EntryGroup> {
    let running = |name: &'static str| stand_ins.get(name).copied().unwrap_or(name);
    let mut serves: BTreeMap<&str, BTreeSet<Op>> = BTreeMap::new();
    for point in points {
        let entries = point.functions.iter().flat_map(|hook| {
            let fentry = hook.fentry.and_then(|p| p.entry).map(running);
            fentry.into_iter().chain(hook.kprobe.entry)
        });
        let counts_only = point.tracepoints.iter().map(|t| t.program);
        for program in entries.chain(counts_only) {
            if loaded.contains(program) {
                serves.entry(program).or_default().insert(point.op);
            }
        }
    }
    // Join the programs that share an operation, until no two groups share one.
    let mut groups: Vec<(BTreeSet<&str>, BTreeSet<Op>)> = Vec::new();
    for (program, ops) in serves {
        let mut merged = (BTreeSet::from([program]), ops);
        groups.retain(|(programs, ops)| {
            if ops.is_disjoint(&merged.1) {
                return true;
            }
            merged.0.extend(programs.iter().copied());
            merged.1.extend(ops.iter().copied());
            false
        });
        groups.push(merged);
    }
    let mut groups: Vec<EntryGroup> = groups
        .into_iter()
        .map(|(programs, ops)| EntryGroup {
            skipped: programs
                .iter()
                .map(|p| misses.get(*p).copied().unwrap_or(0))
                .fold(0, u64::saturating_add),
            programs: programs.into_iter().map(str::to_string).collect(),
            ops: ops.into_iter().collect(),
        })
        .collect();
    groups.sort_by(|a, b| a.ops.cmp(&b.ops));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(names: &[&'static str]) -> BTreeSet<&'static str> {
        names.iter().copied().collect()
    }

    fn group(groups: &[EntryGroup], op: Op) -> &EntryGroup {
        groups
            .iter()
            .find(|g| g.ops.contains(&op))
            .unwrap_or_else(|| panic!("no group serves {op:?}: {groups:?}"))
    }

    #[test]
    fn each_per_function_entry_program_is_its_operation_s() {
        let misses = BTreeMap::from([
            ("dma__map_phys__fentry".to_string(), 7),
            ("dma__map_sg__fentry".to_string(), 2),
            ("dma__unmap_phys__fentry".to_string(), 1),
        ]);
        let groups = entry_groups(
            &loaded(&[
                "dma__map_phys__fentry",
                "dma__map_sg__fentry",
                "dma__unmap_phys__fentry",
                "completion__block_rq__tp",
            ]),
            &BTreeMap::new(),
            &misses,
        );
        let map = group(&groups, Op::DmaMap);
        assert_eq!(map.ops, vec![Op::DmaMap]);
        assert_eq!(map.skipped, 9, "both map functions' entries");
        assert_eq!(group(&groups, Op::DmaUnmap).skipped, 1);
        assert_eq!(group(&groups, Op::Completion).skipped, 0);
        assert_eq!(groups.len(), 3);
    }

    #[test]
    fn a_family_serving_several_operations_makes_them_one_group() {
        let stand_ins = BTreeMap::from([
            ("iova__alloc_fast__fentry", "multi__mapping__fentry"),
            ("iommu__map_nosync__fentry", "multi__mapping__fentry"),
            ("iotlb__intel_sync_map__fentry", "multi__mapping__fentry"),
            ("dma__map_sg__fentry", "multi__device__fentry"),
            ("dma__unmap_sg__fentry", "multi__device__fentry"),
        ]);
        let misses = BTreeMap::from([
            ("multi__mapping__fentry".to_string(), 40),
            ("multi__device__fentry".to_string(), 3),
            ("dma__map_phys__fentry".to_string(), 5),
        ]);
        let groups = entry_groups(
            &loaded(&[
                "multi__mapping__fentry",
                "multi__device__fentry",
                "dma__map_phys__fentry",
                "dma__unmap_phys__fentry",
            ]),
            &stand_ins,
            &misses,
        );
        let mapping = group(&groups, Op::IommuMap);
        assert_eq!(
            mapping.ops,
            vec![Op::IommuMap, Op::IovaAlloc, Op::IotlbSync],
            "{groups:?}"
        );
        assert_eq!(mapping.skipped, 40, "the family's runs, counted once");
        let dma = group(&groups, Op::DmaMap);
        assert_eq!(
            dma.ops,
            vec![Op::DmaMap, Op::DmaUnmap],
            "joined by the family"
        );
        assert_eq!(dma.skipped, 8);
        assert_eq!(
            dma.programs,
            vec![
                "dma__map_phys__fentry",
                "dma__unmap_phys__fentry",
                "multi__device__fentry"
            ]
        );
    }

    #[test]
    fn programs_not_loaded_are_in_no_group() {
        let groups = entry_groups(
            &loaded(&["dma__map_page__kprobe"]),
            &BTreeMap::new(),
            &BTreeMap::from([("dma__map_phys__fentry".to_string(), 9)]),
        );
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].ops, vec![Op::DmaMap]);
        assert_eq!(groups[0].skipped, 0);
    }
}
