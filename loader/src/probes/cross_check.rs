//! The kernel's own DMA and IOMMU trace events, counted beside the probes (`record --cross-check`,
//! `diagnose`; ebpf/progs/crosscheck.bpf.c): each program attached to the first of its events the
//! kernel has, and their counts read per device.

use crate::abi::{
    iommutop_dev_name, iommutop_kernel_event as event, iommutop_kernel_events,
    IOMMUTOP_MAX_EVENT_DEVICES,
};
use crate::maps::convert::name_from_kernel;
use crate::object::load::{program, ProgramLookup};
use crate::object::verifier_log::describe;
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuHashMap};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf};
use iommutop_model::sample::{KernelEvent, KernelEventCounts};
use std::collections::BTreeMap;

/// A cross-check program and the events it is attached to, the first the kernel has (a kernel
/// renamed some: dma_map_page became dma_map_phys in 6.18).
pub struct CrossCheckHook {
    pub program: &'static str,
    /// The trace system and its events, in the order they are tried.
    pub system: &'static str,
    pub events: &'static [&'static str],
    /// Not attached on kernels that have this function (an era whose code path does not emit the
    /// event), with why.
    pub unless: Option<(&'static str, &'static str)>,
}

pub const HOOKS: &[CrossCheckHook] = &[
    hook(
        "crosscheck__dma_map__tp",
        "dma",
        &["dma_map_phys", "dma_map_page"],
    ),
    hook(
        "crosscheck__dma_unmap__tp",
        "dma",
        &["dma_unmap_phys", "dma_unmap_page"],
    ),
    hook("crosscheck__dma_map_sg__tp", "dma", &["dma_map_sg"]),
    hook("crosscheck__dma_map_sg_err__tp", "dma", &["dma_map_sg_err"]),
    hook("crosscheck__dma_unmap_sg__tp", "dma", &["dma_unmap_sg"]),
    hook(
        "crosscheck__dma_map_resource__tp",
        "dma",
        &["dma_map_resource"],
    ),
    hook(
        "crosscheck__dma_unmap_resource__tp",
        "dma",
        &["dma_unmap_resource"],
    ),
    hook("crosscheck__iommu_map__tp", "iommu", &["map"])
        .unless(VTD_OWN_DMA_OPS.0, VTD_OWN_DMA_OPS.1),
    hook("crosscheck__iommu_unmap__tp", "iommu", &["unmap"])
        .unless(VTD_OWN_DMA_OPS.0, VTD_OWN_DMA_OPS.1),
];

/// Before 5.11 VT-d maps a DMA API call's pages with its own DMA ops (`intel_map_page`,
/// `__domain_mapping`), which never go through iommu_map: iommu:map would count none of them.
const VTD_OWN_DMA_OPS: (&str, &str) = (
    "intel_map_page",
    "VT-d's own DMA ops (before 5.11) map and unmap pages without iommu_map and iommu_unmap, which emit the events",
);

const fn hook(
    program: &'static str,
    system: &'static str,
    events: &'static [&'static str],
) -> CrossCheckHook {
    CrossCheckHook {
        program,
        system,
        events,
        unless: None,
    }
}

impl CrossCheckHook {
    const fn unless(self, function: &'static str, why: &'static str) -> CrossCheckHook {
        CrossCheckHook {
            unless: Some((function, why)),
            ..self
        }
    }
}

/// Every event name a cross-check program may be attached to, for the kernel's BTF index.
pub fn event_names() -> impl Iterator<Item = &'static str> {
    HOOKS.iter().flat_map(|hook| hook.events.iter().copied())
}

/// What attaching the cross-check found: each program's event (`system:event`), or why none.
pub type Attached = BTreeMap<&'static str, Result<String, CrossCheckError>>;

/// Why a cross-check program is not attached, or its maps not read.
#[derive(Debug, thiserror::Error)]
pub enum CrossCheckError {
    /// The kernel has a function whose events the hook would count twice (its `unless`).
    #[error("{0}")]
    Unless(&'static str),
    /// The kernel has none of the hook's events; `events` lists them, `system:event nor ...`.
    #[error("the kernel has no {events} event")]
    NoEvent { events: String },
    #[error(transparent)]
    Program(#[from] ProgramLookup),
    /// The kernel refused the program, or a map: its answer in one line.
    #[error("{0}")]
    Refused(String),
    #[error("the object has no {0} map (rebuild)")]
    NoMap(&'static str),
}

/// Attaches every cross-check program to the first of its events this kernel has; `has` says
/// whether the kernel has a function (a hook's `unless`).
pub fn attach(ebpf: &mut Ebpf, btf: &Btf, has: impl Fn(&str) -> bool) -> Attached {
    HOOKS
        .iter()
        .map(|hook| {
            let outcome = match hook.unless {
                Some((function, why)) if has(function) => Err(CrossCheckError::Unless(why)),
                _ => attach_hook(ebpf, btf, hook),
            };
            (hook.program, outcome)
        })
        .collect()
}

fn attach_hook(
    ebpf: &mut Ebpf,
    btf: &Btf,
    hook: &CrossCheckHook,
) -> Result<String, CrossCheckError> {
    let Some(event) = hook.events.iter().find(|event| {
        btf.id_by_type_name_kind(
            &format!("btf_trace_{event}"),
            aya_obj::btf::BtfKind::Typedef,
        )
        .is_ok()
    }) else {
        return Err(CrossCheckError::NoEvent {
            events: hook
                .events
                .iter()
                .map(|e| format!("{}:{e}", hook.system))
                .collect::<Vec<_>>()
                .join(" nor "),
        });
    };
    let program: &mut BtfTracePoint = program(ebpf, hook.program)?;
    program.load(event, btf).map_err(refused)?;
    program.attach().map_err(refused)?;
    Ok(format!("{}:{event}", hook.system))
}

/// The kernel's answer to a program or map, in one line.
fn refused<E: std::error::Error + 'static>(error: E) -> CrossCheckError {
    CrossCheckError::Refused(describe(&error))
}

/// The cross-check's maps, taken from the object when it was attached.
pub struct CrossCheckMaps {
    counts: PerCpuHashMap<MapData, u64, iommutop_kernel_events>,
    names: BpfHashMap<MapData, u64, iommutop_dev_name>,
}

/// The key counts go to when the map has no room for another device (crosscheck.bpf.c).
const OVERFLOW: u64 = u64::MAX;

impl CrossCheckMaps {
    pub fn take(ebpf: &mut Ebpf) -> Result<CrossCheckMaps, CrossCheckError> {
        let counts = ebpf
            .take_map("iommutop_kernel_events")
            .ok_or(CrossCheckError::NoMap("iommutop_kernel_events"))?;
        let names = ebpf
            .take_map("iommutop_kernel_event_names")
            .ok_or(CrossCheckError::NoMap("iommutop_kernel_event_names"))?;
        Ok(CrossCheckMaps {
            counts: PerCpuHashMap::try_from(counts).map_err(refused)?,
            names: BpfHashMap::try_from(names).map_err(refused)?,
        })
    }

    /// Every key's counts so far, summed over CPUs: per device for the dma: events, under no
    /// device for iommu:map and iommu:unmap.
    pub fn read(&self) -> Result<Vec<KernelEventCounts>, CrossCheckError> {
        let mut read = Vec::new();
        for entry in self.counts.iter() {
            let (key, per_cpu) = entry.map_err(refused)?;
            let mut counts = BTreeMap::new();
            for (index, kernel_event) in KERNEL_EVENTS.iter().enumerate() {
                let n: u64 = per_cpu.iter().map(|cpu| cpu.counts[index]).sum();
                if n > 0 {
                    counts.insert(*kernel_event, n);
                }
            }
            let name = match key {
                0 | OVERFLOW => String::new(),
                id => self
                    .names
                    .get(&id, 0)
                    .map(|name| name_from_kernel(&name.name))
                    .unwrap_or_default(),
            };
            read.push(KernelEventCounts {
                device: (key != 0 && key != OVERFLOW).then_some(key),
                name,
                beyond_room: key == OVERFLOW,
                counts,
            });
        }
        read.sort_by(|a, b| (a.device, &a.name).cmp(&(b.device, &b.name)));
        Ok(read)
    }
}

/// Each `enum iommutop_kernel_event` as the model names it, in ABI order.
const KERNEL_EVENTS: [KernelEvent; event::IOMMUTOP_EVENT_COUNT as usize] = [
    KernelEvent::DmaMap,
    KernelEvent::DmaUnmap,
    KernelEvent::DmaMapSg,
    KernelEvent::DmaUnmapSg,
    KernelEvent::DmaMapResource,
    KernelEvent::DmaUnmapResource,
    KernelEvent::IommuMap,
    KernelEvent::IommuUnmap,
];
const _: () = assert!(event::IOMMUTOP_EVENT_DMA_MAP_SG as usize == 2);
const _: () = assert!(event::IOMMUTOP_EVENT_IOMMU_UNMAP as usize == 7);
const _: () = assert!(IOMMUTOP_MAX_EVENT_DEVICES > 2);
