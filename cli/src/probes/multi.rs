//! Multi-function links (issue 30): where the kernel links one tracing program to many functions
//! (`BPF_TRACE_FENTRY_MULTI` and `BPF_TRACE_FEXIT_MULTI`, 7.x), one entry and one exit program
//! of ebpf/progs/multi.bpf.c stand in for the fentry and fexit programs of every function of a
//! family, each function told by its cookie ([`super::multi_shapes`]). The verifier walks each
//! program once, where it walks a per-function program once for every function: on 7.3, the
//! 53 per-function programs' verification took 11-12 s of CPU.
//!
//! aya 0.14 loads tracing programs for one function only, so these are loaded here, on the BPF
//! syscalls: the object aya loaded is parsed again (aya-obj), its multi-function programs
//! relocated against the same BTF and linked to the maps aya created, then loaded with the
//! multi-function attach types and linked to their functions. Their links are plain descriptors,
//! kept for as long as the probes live: the detach ([`super::detach`]) hands them on with every
//! other BPF file.

use super::bpf_syscalls::{
    link_tracing_multi, load_btf, load_tracing, TracingProgram, BPF_TRACE_FENTRY_MULTI,
    BPF_TRACE_FEXIT_MULTI,
};
use super::multi_cast::{self, CastIds};
use super::multi_shapes::Family;
use super::timing::{log_walked, timed};
use super::verifier_log::describe_text;
use aya::maps::{Map, MapData};
use aya::{Btf, Ebpf};
use aya_obj::btf::BtfFeatures;
use aya_obj::Object;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// A kernel function that exists where the kernel has multi-function tracing links.
pub(super) const KERNEL_MARKER: &str = "bpf_tracing_multi_attach";

/// The multi-function programs, relocated and ready to load, and the object's BTF in the kernel.
pub(super) struct MultiObject {
    programs: HashMap<&'static str, TracingProgram>,
    license: CString,
    btf_fd: OwnedFd,
    /// The kernel's ids the programs' casts need ([`multi_cast`]), found at the first load.
    casts: OnceLock<Result<CastIds, String>>,
}

/// A family's programs attached: their links (the programs live as long as the links).
pub(super) struct MultiLinks {
    #[expect(
        dead_code,
        reason = "held: the functions stay linked while the links are open"
    )]
    pub links: Vec<OwnedFd>,
    /// Each program's file, for its statistics (recursion misses), by name.
    pub programs: Vec<(&'static str, OwnedFd)>,
}

/// A function a multi-function program serves: its own fentry and fexit programs, which its
/// family's stand in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Served {
    pub own_entry: Option<&'static str>,
    pub own_exit: &'static str,
    pub family: Family,
}

/// What the multi-function programs attached: their links and programs, and the functions they
/// serve.
#[derive(Default)]
pub(super) struct MultiAttached {
    pub links: Vec<MultiLinks>,
    pub served: Vec<Served>,
}

impl MultiAttached {
    /// Each multi-function program, by name.
    pub(super) fn programs(&self) -> impl Iterator<Item = (&'static str, BorrowedFd<'_>)> {
        self.links
            .iter()
            .flat_map(|links| links.programs.iter())
            .map(|(name, fd)| (*name, fd.as_fd()))
    }

    /// The multi-function program that runs in place of each per-function program it stands in
    /// for, by the per-function program's name.
    pub(super) fn stand_ins(&self) -> BTreeMap<&'static str, &'static str> {
        self.served
            .iter()
            .flat_map(|served| {
                let (entry, exit) = served.family.programs();
                served
                    .own_entry
                    .map(|own| (own, entry))
                    .into_iter()
                    .chain([(served.own_exit, exit)])
            })
            .collect()
    }
}

impl MultiObject {
    /// Parses `object` (the bytes aya loaded into `ebpf`) again and relocates its multi-function
    /// programs against `target`, linked to `ebpf`'s maps. Before the maps are taken from it.
    pub(super) fn prepare(object: &[u8], ebpf: &Ebpf, target: &Btf) -> Result<MultiObject, String> {
        let mut obj = Object::parse(object).map_err(|e| format!("parsing the object: {e}"))?;
        let wanted: HashSet<&str> = Family::every_program().collect();
        obj.programs
            .retain(|name, _| wanted.contains(name.as_str()));
        if obj.programs.len() != wanted.len() {
            return Err("the object lacks its multi-function programs (rebuild)".into());
        }
        let btf = obj
            .fixup_and_sanitize_btf(&every_btf_feature())
            .map_err(|e| format!("the object's BTF: {e}"))?
            .ok_or("the object has no BTF (rebuild)")?
            .to_bytes();
        let btf_fd = load_btf(&btf).map_err(|e| format!("loading the object's BTF: {e}"))?;
        obj.relocate_btf(target)
            .map_err(|e| format!("relocating against the kernel's BTF: {e}"))?;
        let fds = map_fds(ebpf);
        let object_maps = std::mem::take(&mut obj.maps);
        let maps = object_maps
            .iter()
            .map(|(name, map)| {
                fds.get(name.as_str())
                    .map(|fd| (name.as_str(), *fd, map))
                    .ok_or_else(|| format!("map `{name}` was not created"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let text_sections = obj.functions.keys().map(|(section, _)| *section).collect();
        obj.relocate_maps(maps.into_iter(), &text_sections)
            .map_err(|e| format!("relocating maps: {e}"))?;
        obj.relocate_calls(&text_sections)
            .map_err(|e| format!("relocating calls: {e}"))?;
        let programs = Family::every_program()
            .map(|name| {
                let program = &obj.programs[name];
                let function = &obj.functions[&program.function_key()];
                let relocated = TracingProgram {
                    name,
                    instructions: function.instructions.clone(),
                    func_info: function.func_info.func_info.clone(),
                    func_info_rec_size: function.func_info_rec_size,
                    line_info: function.line_info.line_info.clone(),
                    line_info_rec_size: function.line_info_rec_size,
                };
                (name, relocated)
            })
            .collect();
        Ok(MultiObject {
            programs,
            license: obj.license.clone(),
            btf_fd,
            casts: OnceLock::new(),
        })
    }

    /// Loads `family`'s programs and links them to `functions` (their ids in the kernel's BTF,
    /// each with its cookie): the exit first, so that no entry runs without its exit. `btf` has
    /// the kernel's names at their ids.
    pub(super) fn attach(
        &self,
        btf: &Btf,
        family: Family,
        functions: &[(u32, u64)],
    ) -> Result<MultiLinks, String> {
        let (entry, exit) = family.programs();
        let (ids, cookies): (Vec<u32>, Vec<u64>) = functions.iter().copied().unzip();
        let exit_fd = self.load_timed(btf, exit, BPF_TRACE_FEXIT_MULTI)?;
        let exit_link = timed(exit, "attached", || {
            link_tracing_multi(&exit_fd, BPF_TRACE_FEXIT_MULTI, &ids, &cookies)
        })
        .map_err(|e| format!("{exit}: linking {} functions: {e}", ids.len()))?;
        let entry_fd = self.load_timed(btf, entry, BPF_TRACE_FENTRY_MULTI)?;
        let entry_link = timed(entry, "attached", || {
            link_tracing_multi(&entry_fd, BPF_TRACE_FENTRY_MULTI, &ids, &cookies)
        })
        .map_err(|e| format!("{entry}: linking {} functions: {e}", ids.len()))?;
        Ok(MultiLinks {
            links: vec![exit_link, entry_link],
            programs: vec![(exit, exit_fd), (entry, entry_fd)],
        })
    }

    /// Loads the program `name` as `attach_type`, timed, and says how much the verifier walked
    /// (-vv).
    fn load_timed(
        &self,
        btf: &Btf,
        name: &'static str,
        attach_type: u32,
    ) -> Result<OwnedFd, String> {
        let fd = timed(name, "verified", || self.load(btf, name, attach_type))?;
        log_walked(name, fd.as_fd());
        Ok(fd)
    }

    /// Loads the program `name` as `attach_type` and lets it go: the verifier's verdict.
    pub(super) fn verify(
        &self,
        btf: &Btf,
        name: &'static str,
        attach_type: u32,
    ) -> Result<(), String> {
        self.load(btf, name, attach_type).map(drop)
    }

    /// The program `name` with its casts given the kernel's ids from `btf`.
    fn completed(&self, btf: &Btf, name: &'static str) -> Result<TracingProgram, String> {
        let ids = self
            .casts
            .get_or_init(|| CastIds::find(btf).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| format!("{name}: {e}"))?;
        let mut program = self.programs[name].clone();
        multi_cast::complete(&mut program.instructions, ids).map_err(|e| format!("{name}: {e}"))?;
        Ok(program)
    }

    /// Loads the program `name` as `attach_type`; refused, again with the verifier's log, for
    /// its verdict.
    fn load(&self, btf: &Btf, name: &'static str, attach_type: u32) -> Result<OwnedFd, String> {
        let program = &self.completed(btf, name)?;
        load_tracing(program, &self.license, &self.btf_fd, attach_type, None)
            .or_else(|_| {
                let mut log = vec![0u8; 1 << 20];
                load_tracing(
                    program,
                    &self.license,
                    &self.btf_fd,
                    attach_type,
                    Some(&mut log),
                )
                .map_err(|e| {
                    let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                    describe_text(&format!(
                        "the BPF_PROG_LOAD syscall returned {e}. Verifier output: {}",
                        String::from_utf8_lossy(&log[..end])
                    ))
                })
            })
            .map_err(|e| format!("{name}: {e}"))
    }
}

/// The BTF features of every kernel that has multi-function links.
fn every_btf_feature() -> BtfFeatures {
    BtfFeatures::new(true, true, true, true, true, true, true, true)
}

/// The descriptor of each map aya created, by the name the object gives it.
fn map_fds(ebpf: &Ebpf) -> HashMap<&str, RawFd> {
    ebpf.maps()
        .map(|(name, map)| (name, map_data(map).fd().as_fd().as_raw_fd()))
        .collect()
}

fn map_data(map: &Map) -> &MapData {
    match map {
        Map::Array(data)
        | Map::ArrayOfMaps(data)
        | Map::BloomFilter(data)
        | Map::CgroupArray(data)
        | Map::CgroupStorage(data)
        | Map::CgrpStorage(data)
        | Map::CpuMap(data)
        | Map::DevMap(data)
        | Map::DevMapHash(data)
        | Map::HashMap(data)
        | Map::HashOfMaps(data)
        | Map::InodeStorage(data)
        | Map::LpmTrie(data)
        | Map::LruHashMap(data)
        | Map::PerCpuArray(data)
        | Map::PerCpuCgroupStorage(data)
        | Map::PerCpuHashMap(data)
        | Map::PerCpuLruHashMap(data)
        | Map::PerfEventArray(data)
        | Map::ProgramArray(data)
        | Map::Queue(data)
        | Map::ReusePortSockArray(data)
        | Map::RingBuf(data)
        | Map::SockHash(data)
        | Map::SockMap(data)
        | Map::SkStorage(data)
        | Map::Stack(data)
        | Map::StackTraceMap(data)
        | Map::Unsupported(data)
        | Map::XskMap(data) => data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_function_s_own_programs_name_their_family_s() {
        let served = MultiAttached {
            links: Vec::new(),
            served: vec![
                Served {
                    own_entry: Some("dma__map_sg__fentry"),
                    own_exit: "dma__map_sg__fexit",
                    family: Family::Device,
                },
                Served {
                    own_entry: Some("iova__alloc_fast__fentry"),
                    own_exit: "iova__alloc_fast__fexit",
                    family: Family::Mapping,
                },
            ],
        };
        assert_eq!(
            served.stand_ins(),
            BTreeMap::from([
                ("dma__map_sg__fentry", "multi__device__fentry"),
                ("dma__map_sg__fexit", "multi__device__fexit"),
                ("iova__alloc_fast__fentry", "multi__mapping__fentry"),
                ("iova__alloc_fast__fexit", "multi__mapping__fexit"),
            ])
        );
        assert_eq!(
            served.programs().count(),
            0,
            "no family attached, no program"
        );
    }
}
