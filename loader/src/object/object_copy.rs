//! The object aya loaded, parsed and relocated again for programs aya 0.14 cannot load: each
//! program is loaded by aya once, for one function. Our own loader ([`super::bpf_syscalls`]) loads
//! from this copy the multi-function programs ([`crate::links::multi`]), which serve many functions, and
//! the understudies ([`crate::calibration::understudy`]), second copies of the timed programs: the programs
//! wanted are relocated against the same BTF as aya's and linked to the maps aya created, and
//! loaded with the attach type and target each needs, in the role it plays.

use super::bpf_syscalls::{load_btf, load_tracing, TracingProgram};
use super::verifier_log::describe_text;
use crate::calibration::role::{cast_as_understudy, Role};
use crate::links::multi_cast::{self, CastError, CastIds};
use crate::timing::{log_walked, timed};
use aya::maps::{Map, MapData};
use aya::{Btf, Ebpf};
use aya_obj::btf::BtfFeatures;
use aya_obj::Object;
use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// Why our own loader has no copy of the object, or did not load or link one of its programs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    #[error("parsing the object: {0}")]
    Parse(String),
    #[error("the object has no program `{0}` (rebuild)")]
    NoProgram(&'static str),
    #[error("the object's BTF: {0}")]
    Btf(String),
    #[error("the object has no BTF (rebuild)")]
    NoBtf,
    #[error("loading the object's BTF: {0}")]
    LoadBtf(String),
    #[error("relocating against the kernel's BTF: {0}")]
    Relocate(String),
    #[error("map `{0}` was not created")]
    NoMap(String),
    #[error("relocating maps: {0}")]
    RelocateMaps(String),
    #[error("relocating calls: {0}")]
    RelocateCalls(String),
    #[error("no program for our own loader to load")]
    NothingWanted,
    /// A program not completed (its casts, its role) or refused by the kernel, under the name
    /// it is shown by.
    #[error("{program}: {reason}")]
    Program { program: String, reason: String },
    /// A program's function not in the kernel's BTF.
    #[error("{program}: {function} in the kernel's BTF: {reason}")]
    NoFunction {
        program: String,
        function: String,
        reason: String,
    },
    /// A loaded program the kernel would not link to its function (`functions`: the function's
    /// name, or how many functions).
    #[error("{program}: linking {functions}: {reason}")]
    Link {
        program: String,
        functions: String,
        reason: String,
    },
}

impl CopyError {
    fn program(program: &str, reason: impl std::fmt::Display) -> CopyError {
        CopyError::Program {
            program: program.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Programs of the object, relocated and ready to load, and the object's BTF in the kernel.
pub(crate) struct ObjectCopy {
    programs: HashMap<&'static str, TracingProgram>,
    license: CString,
    btf_fd: OwnedFd,
    /// The kernel's ids the programs' casts need ([`multi_cast`]), found at the first load that
    /// has any.
    casts: OnceLock<Result<CastIds, CastError>>,
}

impl ObjectCopy {
    /// Parses `object` (the bytes aya loaded into `ebpf`) again and relocates the programs
    /// `wanted` against `target`, linked to `ebpf`'s maps. Before the maps are taken from it.
    pub(crate) fn prepare(
        object: &[u8],
        ebpf: &Ebpf,
        target: &Btf,
        wanted: &BTreeSet<&'static str>,
    ) -> Result<ObjectCopy, CopyError> {
        let mut obj = Object::parse(object).map_err(|e| CopyError::Parse(e.to_string()))?;
        obj.programs
            .retain(|name, _| wanted.contains(name.as_str()));
        if let Some(absent) = wanted
            .iter()
            .find(|name| !obj.programs.contains_key(**name))
        {
            return Err(CopyError::NoProgram(absent));
        }
        let btf = obj
            .fixup_and_sanitize_btf(&every_btf_feature())
            .map_err(|e| CopyError::Btf(e.to_string()))?
            .ok_or(CopyError::NoBtf)?
            .to_bytes();
        let btf_fd = load_btf(&btf).map_err(|e| CopyError::LoadBtf(e.to_string()))?;
        obj.relocate_btf(target)
            .map_err(|e| CopyError::Relocate(e.to_string()))?;
        let fds = map_fds(ebpf);
        let object_maps = std::mem::take(&mut obj.maps);
        let maps = object_maps
            .iter()
            .map(|(name, map)| {
                fds.get(name.as_str())
                    .map(|fd| (name.as_str(), *fd, map))
                    .ok_or_else(|| CopyError::NoMap(name.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let text_sections = obj.functions.keys().map(|(section, _)| *section).collect();
        obj.relocate_maps(maps.into_iter(), &text_sections)
            .map_err(|e| CopyError::RelocateMaps(e.to_string()))?;
        obj.relocate_calls(&text_sections)
            .map_err(|e| CopyError::RelocateCalls(e.to_string()))?;
        let programs = wanted
            .iter()
            .map(|&name| {
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
        Ok(ObjectCopy {
            programs,
            license: obj.license.clone(),
            btf_fd,
            casts: OnceLock::new(),
        })
    }

    /// Loads the program `name` in `role` as `attach_type` for the function of BTF id
    /// `attach_btf_id` (0: none, a multi-function program), timed, and says how much the verifier
    /// walked (-vv), under the name of the copy (`shown`).
    pub(crate) fn load_timed(
        &self,
        btf: &Btf,
        name: &'static str,
        role: Role,
        attach_type: u32,
        attach_btf_id: u32,
    ) -> Result<OwnedFd, CopyError> {
        let shown = role.program_name(name);
        let fd = timed(&shown, "verified", || {
            self.load(btf, name, role, attach_type, attach_btf_id)
        })?;
        log_walked(&shown, fd.as_fd());
        Ok(fd)
    }

    /// Loads the program `name` in `role` as `attach_type` (for the function of BTF id
    /// `attach_btf_id`, or none) and lets it go: the verifier's verdict.
    pub(crate) fn verify(
        &self,
        btf: &Btf,
        name: &'static str,
        role: Role,
        attach_type: u32,
        attach_btf_id: u32,
    ) -> Result<(), CopyError> {
        self.load(btf, name, role, attach_type, attach_btf_id)
            .map(drop)
    }

    /// The program `name` in `role`, its casts given the kernel's ids from `btf`.
    fn completed(
        &self,
        btf: &Btf,
        name: &'static str,
        role: Role,
    ) -> Result<TracingProgram, CopyError> {
        let mut program = self.programs[name].clone();
        if multi_cast::casts_in(&program.instructions) {
            let ids = self
                .casts
                .get_or_init(|| CastIds::find(btf))
                .as_ref()
                .map_err(|e| CopyError::program(name, e))?;
            multi_cast::complete(&mut program.instructions, ids)
                .map_err(|e| CopyError::program(name, e))?;
        }
        if role == Role::Understudy {
            cast_as_understudy(&mut program.instructions)
                .map_err(|e| CopyError::program(name, e))?;
        }
        Ok(program)
    }

    /// Loads the program `name` in `role` as `attach_type` (for the function of BTF id
    /// `attach_btf_id`, or none); refused, again with the verifier's log, for its verdict.
    fn load(
        &self,
        btf: &Btf,
        name: &'static str,
        role: Role,
        attach_type: u32,
        attach_btf_id: u32,
    ) -> Result<OwnedFd, CopyError> {
        let program = &self.completed(btf, name, role)?;
        let load = |log: Option<&mut [u8]>| {
            load_tracing(
                program,
                &self.license,
                &self.btf_fd,
                attach_type,
                attach_btf_id,
                log,
            )
        };
        load(None)
            .or_else(|_| {
                let mut log = vec![0u8; 1 << 20];
                load(Some(&mut log)).map_err(|e| {
                    let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                    describe_text(&format!(
                        "the BPF_PROG_LOAD syscall returned {e}. Verifier output: {}",
                        String::from_utf8_lossy(&log[..end])
                    ))
                })
            })
            .map_err(|e| CopyError::program(&role.program_name(name), e))
    }
}

/// The BTF features of the kernels our own loader is used on (multi-function links are 7.x's,
/// understudies are for preemptible kernels, all 6.x or later): every one.
fn every_btf_feature() -> BtfFeatures {
    BtfFeatures::new(true, true, true, true, true, true, true, true)
}

/// The descriptor of each map aya created, by the name the object gives it.
fn map_fds(ebpf: &Ebpf) -> HashMap<&str, RawFd> {
    ebpf.maps()
        .map(|(name, map)| (name, map_data(map).fd().as_fd().as_raw_fd()))
        .collect()
}

/// The map's data whatever its type (every variant holds one).
pub(crate) fn map_data(map: &Map) -> &MapData {
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
