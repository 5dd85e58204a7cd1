//! Detaching behind the process that printed the report. The kernel unregisters a tracing link
//! with RCU-tasks grace periods, one link after the other: seconds for the probes' links under
//! emulation (docs/measurements.md, "Attach time"), and the user would wait for the shell through
//! all of them. The
//! programs detach on the last close of their files, whoever makes it; so a grandchild takes a
//! reference on every BPF file (fork duplicates them), waits until this process has let go of
//! its own, and exits: the last close, and the waiting, are its. It holds no terminal, pipe or
//! file of ours (stdio on /dev/null, every other file that is not a BPF object closed), so
//! nothing it does is seen or waited for; the kernel finishes the detach even if it is killed.
//!
//! While it detaches, the grandchild holds a shared lock on [`lock_path`]; the next run's probes
//! wait for it before attaching ([`wait_for_earlier_detaches`]): programs still attached to the
//! same functions would run inside every call the new ones time.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock every process detaching our probes holds (shared) for as long as it lives.
pub fn lock_path() -> PathBuf {
    Path::new(crate::RUN_DIR).join("detaching.lock")
}

/// How an attach waited for earlier runs' probes to detach.
#[derive(Debug, PartialEq)]
pub(crate) enum EarlierDetaches {
    /// None was under way (or the lock could not be used: said at -vv).
    None,
    /// They were, and ended after this long.
    Waited(Duration),
    /// They were still under way after the limit: their programs may run inside calls ours
    /// time.
    StillDetaching(Duration),
}

/// Waits, at most `limit`, until no process holds [`lock_path`]: until earlier runs' probes have
/// detached.
pub(crate) fn wait_for_earlier_detaches(lock_path: &Path, limit: Duration) -> EarlierDetaches {
    let lock = match open_lock(lock_path) {
        Ok(lock) => lock,
        Err(e) => {
            log::debug!(
                "{}: {e}: not waiting for earlier detaches",
                lock_path.display()
            );
            return EarlierDetaches::None;
        }
    };
    let started = Instant::now();
    let mut waited = false;
    loop {
        // SAFETY: flock on a descriptor we own; the lock goes with it when `lock` is dropped.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return if waited {
                EarlierDetaches::Waited(started.elapsed())
            } else {
                EarlierDetaches::None
            };
        }
        if started.elapsed() >= limit {
            return EarlierDetaches::StillDetaching(started.elapsed());
        }
        if !waited {
            log::info!("waiting for an earlier run's probes to detach");
            waited = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn open_lock(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    Ok(file)
}

/// The lock a detaching process holds, shared; `None` where it cannot be had (said at -vv).
fn detaching_lock(path: &Path) -> Option<File> {
    let lock = open_lock(path)
        .inspect_err(|e| log::debug!("{}: {e}: detaching unannounced", path.display()))
        .ok()?;
    // SAFETY: flock on a descriptor we own. Blocks only while a starting run holds it
    // exclusively, which it does for an instant.
    (unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_SH) } == 0).then_some(lock)
}

/// Runs `let_go` (which closes this process's references on the BPF files: it is given their
/// descriptors) once a detached grandchild holds its own, so that the detach's waits happen in
/// the grandchild. Returns the grandchild's pid; on an error nothing was handed over and
/// `let_go` has not run.
pub(crate) fn hand_over(lock_path: &Path, let_go: impl FnOnce(&[RawFd])) -> io::Result<u32> {
    let dev_null = File::options().read(true).write(true).open("/dev/null")?;
    // The lock's open file is shared with the grandchild, whose copy keeps it locked: ours is
    // only closed, never unlocked (that would unlock both).
    let lock = detaching_lock(lock_path);
    let (wait_end, release_end) = cloexec_pipe()?;
    let (pid_in, pid_out) = cloexec_pipe()?;
    // Listed last, so that no number in the list is reused by a file opened after it.
    let kept = [
        Some(wait_end.as_raw_fd()),
        Some(dev_null.as_raw_fd()),
        lock.as_ref().map(AsRawFd::as_raw_fd),
    ];
    let (bpf_objects, mut to_close) = open_files_by_kind()?;
    to_close.retain(|fd| !kept.contains(&Some(*fd)));
    // SAFETY: fork() in a process that may have other threads: the child only makes
    // async-signal-safe calls (setsid, fork, write, dup2, close, read, _exit) on values made
    // before.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        // SAFETY: as above; neither branch returns.
        unsafe {
            libc::setsid();
            match libc::fork() {
                0 => hold_until_released(
                    wait_end.as_raw_fd(),
                    dev_null.as_raw_fd(),
                    &to_close,
                    &bpf_objects,
                    lock.as_ref().map(AsRawFd::as_raw_fd),
                ),
                grandchild if grandchild > 0 => {
                    let pid = grandchild.to_ne_bytes();
                    libc::write(pid_out.as_raw_fd(), pid.as_ptr().cast(), pid.len());
                    libc::_exit(0)
                }
                _ => libc::_exit(1),
            }
        }
    }
    drop(wait_end);
    drop(pid_out);
    let grandchild_started = reap(child)?;
    if !grandchild_started {
        return Err(io::Error::other("the detaching process could not fork"));
    }
    let mut pid = [0u8; 4];
    let grandchild = File::from(pid_in)
        .read_exact(&mut pid)
        .map_or(0, |()| u32::from_ne_bytes(pid));
    let_go(&bpf_objects);
    // The grandchild's read ends here: every reference but its own is gone.
    drop(release_end);
    drop(lock);
    Ok(grandchild)
}

/// The grandchild: stdio on /dev/null, `to_close` closed, then holds the BPF files (and the
/// lock) until the pipe's last writer (this process, once it has let go) is gone. Then it closes
/// them one by one, each detached before its close returns (the kernel releases a file's last
/// reference on the way back to user mode), and the lock last: at exit the lock could go
/// before the links, whose release the kernel defers there.
///
/// # Safety
/// Only in a child of `fork()`: it never returns.
unsafe fn hold_until_released(
    wait_end: RawFd,
    dev_null: RawFd,
    to_close: &[RawFd],
    bpf_objects: &[RawFd],
    lock: Option<RawFd>,
) -> ! {
    // SAFETY: async-signal-safe calls on descriptors this process owns.
    unsafe {
        for stdio in 0..3 {
            libc::dup2(dev_null, stdio);
        }
        for &fd in to_close {
            if fd > 2 && fd != wait_end {
                libc::close(fd);
            }
        }
        libc::close(dev_null);
        let mut byte = 0u8;
        loop {
            let read = libc::read(wait_end, std::ptr::addr_of_mut!(byte).cast(), 1);
            if read == 0 || (read < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        for &fd in bpf_objects {
            libc::close(fd);
        }
        if let Some(lock) = lock {
            libc::close(lock);
        }
        libc::_exit(0)
    }
}

/// Waits for the intermediate child; whether it forked the grandchild.
fn reap(child: libc::pid_t) -> io::Result<bool> {
    let mut status = 0;
    loop {
        // SAFETY: waits only for the child forked above.
        if unsafe { libc::waitpid(child, &mut status, 0) } == child {
            return Ok(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The file descriptors open now: those of BPF objects (links, programs, maps and the
/// statistics' file are anonymous inodes; perf events behind kprobes too), which the grandchild
/// keeps, and the others, which it closes, so that a pipe, socket or output file of ours is not
/// held open by it.
fn open_files_by_kind() -> io::Result<(Vec<RawFd>, Vec<RawFd>)> {
    let mut bpf = Vec::new();
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let entry = entry?;
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        if is_bpf_object(&target.to_string_lossy()) {
            bpf.push(fd);
        } else {
            fds.push(fd);
        }
    }
    Ok((bpf, fds))
}

/// Whether a `/proc/self/fd` link names a BPF object or a perf event: `anon_inode:bpf-link`,
/// `anon_inode:bpf-prog`, `anon_inode:bpf-map`, `anon_inode:[perf_event]`, ...
fn is_bpf_object(target: &str) -> bool {
    target.starts_with("anon_inode:bpf") || target == "anon_inode:[perf_event]"
}

fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `ends`, which we then own.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether PID exists and has not exited (a zombie waits for init to reap it).
    fn running(pid: u32) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state is the first field after the command name, which ends at the last `)`.
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z")
    }

    #[test]
    fn an_attach_waits_while_a_detaching_process_holds_the_lock_and_not_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/detaching.lock");
        assert_eq!(
            wait_for_earlier_detaches(&path, Duration::ZERO),
            EarlierDetaches::None
        );
        let detaching = detaching_lock(&path).expect("shared lock");
        let waited = wait_for_earlier_detaches(&path, Duration::from_millis(120));
        assert!(
            matches!(waited, EarlierDetaches::StillDetaching(d) if d >= Duration::from_millis(120)),
            "{waited:?}"
        );
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(detaching);
        });
        let waited = wait_for_earlier_detaches(&path, Duration::from_secs(10));
        release.join().expect("released");
        assert!(matches!(waited, EarlierDetaches::Waited(_)), "{waited:?}");
    }

    /// The grandchild's copy of the lock keeps it held after this process has let go, until it
    /// is released and exits.
    #[test]
    fn the_grandchild_holds_the_lock_until_it_exits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("detaching.lock");
        let (mut reader, writer) = std::io::pipe().expect("pipe");
        let mut writer = Some(writer);
        // let_go runs while the grandchild lives: the lock must be held then.
        let grandchild = hand_over(&path, |_| {
            let held = wait_for_earlier_detaches(&path, Duration::ZERO);
            let line = format!("{}\n", matches!(held, EarlierDetaches::StillDetaching(_)));
            if let Some(mut w) = writer.take() {
                std::io::Write::write_all(&mut w, line.as_bytes()).expect("write");
            }
        })
        .expect("handed over");
        let mut line = String::new();
        std::io::Read::read_to_string(&mut reader, &mut line).expect("read");
        assert_eq!(line.trim(), "true", "the lock was held while letting go");
        let after = wait_for_earlier_detaches(&path, Duration::from_secs(10));
        assert!(
            !matches!(after, EarlierDetaches::StillDetaching(_)),
            "released once the grandchild {grandchild} exited: {after:?}"
        );
    }

    #[test]
    fn bpf_objects_and_perf_events_are_kept_and_other_files_are_not() {
        for kept in [
            "anon_inode:bpf-link",
            "anon_inode:bpf-prog",
            "anon_inode:bpf-map",
            "anon_inode:bpf_link",
            "anon_inode:[perf_event]",
        ] {
            assert!(is_bpf_object(kept), "{kept}");
        }
        for closed in [
            "/dev/pts/0",
            "pipe:[1234]",
            "socket:[99]",
            "/tmp/report.json",
            "anon_inode:[eventfd]",
        ] {
            assert!(!is_bpf_object(closed), "{closed}");
        }
    }

    /// A pipe this process writes to is not held open by the grandchild: the reader sees its
    /// end as soon as this process closes it, though the grandchild lives until released.
    #[test]
    fn the_grandchild_holds_no_pipe_of_ours_and_lives_until_released() {
        let (mut reader, writer) = std::io::pipe().expect("pipe");
        // The writer without O_CLOEXEC, as a shell's pipe to us would be.
        let raw = writer.as_raw_fd();
        // SAFETY: clears the close-on-exec flag of a descriptor we own.
        unsafe { libc::fcntl(raw, libc::F_SETFD, 0) };
        let dir = tempfile::tempdir().expect("tempdir");
        let lock = dir.path().join("detaching.lock");
        let grandchild = hand_over(&lock, |_| {}).expect("handed over");
        assert!(
            grandchild > 0,
            "the intermediate child passes on the grandchild's pid"
        );
        drop(writer);
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut rest).expect("the pipe ends");
        assert!(rest.is_empty());
        // The grandchild is released (hand_over closed its end) and exits on its own.
        let gone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !running(grandchild)
        });
        assert!(gone, "the grandchild {grandchild} exited once released");
    }
}
