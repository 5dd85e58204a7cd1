//! Launching the real tools (netperf, netserver, fio): found in PATH before anything changes,
//! started in their own process group (so the terminal's Ctrl-C reaches iommutop, which then
//! stops them in order), their stdout read line by line while they run, and never left behind.

use crate::control::RunControl;
use crate::error::WorkloadError;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How often a waiting workload looks at its tool and at the cancel flag.
pub const POLL: Duration = Duration::from_millis(100);

/// The executable `tool` in PATH, if any.
pub fn find_in_path(tool: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(tool))
        .find(|path| {
            path.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `tool` from PATH, or the one-line error that says how to install it.
pub fn require_tool(tool: &str, install: &str) -> Result<PathBuf, WorkloadError> {
    find_in_path(tool).ok_or_else(|| WorkloadError::MissingTool {
        tool: tool.to_string(),
        install: install.to_string(),
    })
}

/// A command line as one string, for messages and reports.
pub fn show_command(argv: &[String]) -> String {
    iommutop_model::shell::join(argv)
}

/// A launched tool. Dropping it stops the tool (SIGTERM, then SIGKILL) and reaps it.
pub struct Launched {
    tool: String,
    child: Child,
    lines: Option<Receiver<String>>,
    /// Sends stderr once the pipe closes (a channel, so that a grandchild holding the pipe open
    /// cannot make us wait forever).
    stderr_text: Option<Receiver<String>>,
    status: Option<ExitStatus>,
}

/// How a tool's run ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    /// Its standard error (the first 64 KiB).
    pub stderr: String,
    /// It was stopped because the run was cancelled.
    pub cancelled: bool,
}

impl Finished {
    /// The tool's own words about a failure: the last non-empty lines of stderr, on one line.
    pub fn failure(&self, tool: &str) -> WorkloadError {
        let said: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let tail = said[said.len().saturating_sub(3)..].join(" / ");
        let how = match (self.status.code(), self.status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "ended".to_string(),
        };
        let message = if tail.is_empty() {
            how
        } else {
            format!("{how}: {tail}")
        };
        WorkloadError::tool(tool, message)
    }
}

impl Launched {
    /// Starts `argv` in its own process group with stdin closed; stdout is read line by line if
    /// `read_stdout` (else discarded), stderr is kept.
    pub fn spawn(argv: &[String], read_stdout: bool) -> Result<Launched, WorkloadError> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| WorkloadError::tool("(none)", "empty command"))?;
        let tool = std::path::Path::new(program)
            .file_name()
            .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(if read_stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and only calls prctl()
        // and signal(), which are async-signal-safe. The tool gets SIGTERM if iommutop dies
        // without stopping it (SIGKILL): no netperf or netserver is left running. It survives
        // the exec of `ip netns exec` and of the tool. SIGINT and SIGTERM get their default
        // action back: iommutop started in the background by a shell inherits them ignored, and
        // a tool that ignored them could only be stopped by SIGKILL, without cleaning up.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for signal in [libc::SIGINT, libc::SIGTERM] {
                    if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| WorkloadError::tool(&tool, format!("cannot start `{program}`: {e}")))?;
        let lines = child.stdout.take().map(|stdout| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        let stderr_text = child.stderr.take().map(|stderr| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.take(64 << 10).read_to_string(&mut text);
                let _ = tx.send(text);
            });
            rx
        });
        Ok(Launched {
            tool,
            child,
            lines,
            stderr_text,
            status: None,
        })
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and then reaps it).
    pub fn has_exited(&mut self) -> bool {
        if self.status.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
            }
        }
        self.status.is_some()
    }

    /// Waits for the tool to finish, handing each stdout line to `on_line` as it comes. When the
    /// run is cancelled the tool gets `stop_signal` (fio and netperf write what they have on
    /// SIGINT), then SIGKILL after `grace`.
    pub fn wait(
        &mut self,
        ctl: &mut dyn RunControl,
        stop_signal: i32,
        grace: Duration,
        mut on_line: impl FnMut(&str, &mut dyn RunControl),
    ) -> Result<Finished, WorkloadError> {
        let mut stopping: Option<Instant> = None;
        let mut stdout_done = self.lines.is_none();
        let mut exited_at: Option<Instant> = None;
        loop {
            match &self.lines {
                Some(lines) if !stdout_done => match lines.recv_timeout(POLL) {
                    Ok(line) => on_line(&line, ctl),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => stdout_done = true,
                },
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
            if self.has_exited() {
                // A grandchild may keep the pipe open: stop reading a while after the exit.
                let since = *exited_at.get_or_insert_with(Instant::now);
                if stdout_done || since.elapsed() > Duration::from_secs(2) {
                    break;
                }
            }
            if ctl.cancelled() {
                match stopping {
                    None => {
                        self.signal(stop_signal);
                        stopping = Some(Instant::now());
                    }
                    Some(since) if since.elapsed() > grace => {
                        self.signal(libc::SIGKILL);
                    }
                    Some(_) => {}
                }
            }
        }
        let status = self
            .status
            .ok_or_else(|| WorkloadError::tool(&self.tool, "exit status lost"))?;
        Ok(Finished {
            status,
            stderr: self.take_stderr(),
            cancelled: stopping.is_some(),
        })
    }

    /// Stops the tool if it still runs (signal, then SIGKILL after `grace`) and reaps it; returns
    /// its stderr.
    pub fn stop(&mut self, signal: i32, grace: Duration) -> String {
        if !self.has_exited() {
            self.signal(signal);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline && !self.has_exited() {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !self.has_exited() {
                self.signal(libc::SIGKILL);
                if let Ok(status) = self.child.wait() {
                    self.status = Some(status);
                }
            }
        }
        self.take_stderr()
    }

    /// Sends `signal` to the tool's process group (it may have forked: netserver, `ip netns exec`).
    fn signal(&self, signal: i32) {
        if self.status.is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill() only sends a signal; the group is the one our child leads (it was
            // started with process_group(0)) and the child is not reaped yet, so the id is ours.
            unsafe { libc::kill(-pid, signal) };
        }
    }

    fn take_stderr(&mut self) -> String {
        self.stderr_text
            .take()
            .and_then(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
            .unwrap_or_default()
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if !self.has_exited() {
            // Dropping the receiver first lets the stdout thread end once the pipe closes.
            self.lines = None;
            self.stop(libc::SIGTERM, Duration::from_secs(2));
        }
    }
}

/// Runs a short command to completion and returns its stdout; its failure is an error naming
/// the command and what it said.
pub fn run_quiet(argv: &[&str]) -> Result<String, WorkloadError> {
    iommutop_host::command::run_quiet(argv).map_err(WorkloadError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::BasicControl;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn lines_arrive_as_they_are_written_and_the_status_is_kept() {
        let cancel = AtomicBool::new(false);
        let mut ctl = BasicControl::new(&cancel);
        let argv: Vec<String> = ["sh", "-c", "echo one; echo two; echo oops >&2; exit 3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut launched = Launched::spawn(&argv, true).unwrap();
        let mut seen = Vec::new();
        let finished = launched
            .wait(&mut ctl, libc::SIGINT, POLL, |line, _| {
                seen.push(line.to_string())
            })
            .unwrap();
        assert_eq!(seen, ["one", "two"]);
        assert_eq!(finished.status.code(), Some(3));
        assert!(!finished.cancelled);
        assert_eq!(
            finished.failure("sh").to_string(),
            "sh failed: exit status 3: oops"
        );
    }

    #[test]
    fn a_cancelled_run_stops_the_tool() {
        let cancel = AtomicBool::new(true);
        let mut ctl = BasicControl::new(&cancel);
        let argv: Vec<String> = ["sleep", "30"].iter().map(|s| s.to_string()).collect();
        let mut launched = Launched::spawn(&argv, false).unwrap();
        let finished = launched
            .wait(&mut ctl, libc::SIGINT, POLL, |_, _| {})
            .unwrap();
        assert!(finished.cancelled);
        // Killed by the SIGINT, so not waited out: the 30 s sleep never ended on its own.
        assert_eq!(finished.status.signal(), Some(libc::SIGINT));
    }

    #[test]
    fn missing_tools_say_how_to_install_them() {
        let err = require_tool("iommutop-no-such-tool", "apt-get install nothing").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`iommutop-no-such-tool` not found in PATH: apt-get install nothing"
        );
    }
}
