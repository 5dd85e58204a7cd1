//! `--pid PID` and `--cgroup PATH` on `record`, `run`, `top` and `serve`: resolved before anything
//! attaches, so that a process or cgroup that is not there is a usage error (exit 2). The kernel
//! side compares the task's thread group id or cgroup v2 id (see `ebpf/lib/filter.bpf.h`).

use crate::exit::{Failure, Outcome};
use anyhow::anyhow;
use iommutop_model::TaskFilter;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `statfs(2)`'s f_type of the cgroup v2 file system (include/uapi/linux/magic.h).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// ... and of a cgroup v1 hierarchy.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

const PID_HELP: &str = "Count only the work process PID does in task context: its DMA API \
calls and what nests in them, and its IOMMU work outside the DMA API (VFIO maps). Interrupt-context \
work (completions, unmaps and flushes run from interrupts, deferred flushes) belongs to no task \
and is not counted";

const CGROUP_HELP: &str = "Count only the work that tasks directly in this cgroup v2 directory \
(/sys/fs/cgroup/...; not its descendants) do in task context, as --pid does for a process";

/// The `--pid` and `--cgroup` options every recording command takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TaskFilterArgs {
    #[arg(long, value_name = "PID", help = PID_HELP)]
    pub pid: Option<u32>,
    #[arg(long, value_name = "PATH", help = CGROUP_HELP)]
    pub cgroup: Option<PathBuf>,
}

/// The filter the options ask for, if any.
pub fn resolve(args: &TaskFilterArgs) -> Outcome<Option<TaskFilter>> {
    if args.pid.is_none() && args.cgroup.is_none() {
        return Ok(None);
    }
    let mut filter = TaskFilter::default();
    if let Some(pid) = args.pid {
        filter.comm = Some(process(Path::new("/proc"), pid).map_err(Failure::usage)?);
        filter.pid = Some(pid);
    }
    if let Some(path) = &args.cgroup {
        filter.cgroup_id = Some(cgroup_id(path).map_err(Failure::usage)?);
        filter.cgroup = Some(path.display().to_string());
    }
    Ok(Some(filter))
}

/// The name of process `pid` under `proc`; an error when there is none, or `pid` is one of its
/// threads (the kernel compares thread group ids).
fn process(proc: &Path, pid: u32) -> anyhow::Result<String> {
    let dir = proc.join(pid.to_string());
    let status = std::fs::read_to_string(dir.join("status"))
        .map_err(|_| anyhow!("--pid {pid}: no such process"))?;
    let tgid = status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|value| value.trim().parse::<u32>().ok());
    if let Some(tgid) = tgid.filter(|&tgid| tgid != pid) {
        return Err(anyhow!(
            "--pid {pid}: a thread of process {tgid}; give the process: --pid {tgid}"
        ));
    }
    let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    Ok(comm.trim_end().to_string())
}

/// The cgroup id of a cgroup v2 directory: its inode number, which is what
/// `bpf_get_current_cgroup_id()` returns for the tasks in it.
fn cgroup_id(path: &Path) -> anyhow::Result<u64> {
    let shown = path.display();
    let metadata =
        std::fs::metadata(path).map_err(|e| anyhow!("--cgroup {shown}: {}", plain(&e)))?;
    if !metadata.is_dir() {
        return Err(anyhow!(
            "--cgroup {shown}: not a cgroup v2 directory (not a directory)"
        ));
    }
    match file_system_type(path) {
        Some(CGROUP2_SUPER_MAGIC) => Ok(metadata.ino()),
        Some(CGROUP_SUPER_MAGIC) => Err(anyhow!(
            "--cgroup {shown}: a cgroup v1 directory; --cgroup needs cgroup v2 (the unified \
             hierarchy, usually /sys/fs/cgroup)"
        )),
        _ => Err(anyhow!(
            "--cgroup {shown}: not a cgroup v2 directory (cgroup v2 is mounted at /sys/fs/cgroup \
             on most systems)"
        )),
    }
}

/// The `f_type` statfs(2) reports for `path`.
fn file_system_type(path: &Path) -> Option<i64> {
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: all-zero is a valid statfs (plain integers), which the call overwrites.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string that outlives the call; `fs` is a valid,
    // exclusively borrowed statfs for the kernel to fill.
    let rc = unsafe { libc::statfs(path.as_ptr(), &mut fs) };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between libc targets
    let f_type = fs.f_type as i64;
    (rc == 0).then_some(f_type)
}

/// An I/O error without its `(os error N)` tail.
fn plain(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(pid: u32, tgid: u32, comm: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let process = dir.path().join(pid.to_string());
        std::fs::create_dir(&process).expect("mkdir");
        std::fs::write(
            process.join("status"),
            format!("Name:\t{comm}\nTgid:\t{tgid}\nPid:\t{pid}\n"),
        )
        .expect("status");
        std::fs::write(process.join("comm"), format!("{comm}\n")).expect("comm");
        dir
    }

    #[test]
    fn a_process_is_named_by_its_comm() {
        let proc = fake_proc(42, 42, "qemu-system-x86");
        assert_eq!(process(proc.path(), 42).expect("found"), "qemu-system-x86");
    }

    #[test]
    fn a_thread_or_nothing_is_refused_in_one_line() {
        let proc = fake_proc(43, 42, "worker");
        assert_eq!(
            process(proc.path(), 43).expect_err("a thread").to_string(),
            "--pid 43: a thread of process 42; give the process: --pid 42"
        );
        assert_eq!(
            process(proc.path(), 7).expect_err("absent").to_string(),
            "--pid 7: no such process"
        );
    }

    #[test]
    fn a_directory_of_another_file_system_is_not_a_cgroup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let error = cgroup_id(dir.path()).expect_err("not a cgroup").to_string();
        assert!(error.contains("not a cgroup v2 directory"), "{error}");
        let missing = cgroup_id(&dir.path().join("absent"))
            .expect_err("absent")
            .to_string();
        assert!(missing.ends_with("No such file or directory"), "{missing}");
    }
}
