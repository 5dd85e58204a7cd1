//! `--pid PID` and `--cgroup PATH`: only the work of the tasks that map. The kernel side decides
//! it where a context's outermost probed call opens (see `ebpf/lib/track.bpf.h`); this is how a
//! run records and says it.

use serde::{Deserialize, Serialize};

/// The filter `--pid`/`--cgroup` asked for, as the report records it (`run.task_filter`). With
/// both, a task must match both.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TaskFilter {
    /// `--pid`: the process (thread group id) whose work is counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its name when the run started (`/proc/PID/comm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// `--cgroup`: the cgroup v2 directory as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Its cgroup id (the directory's inode number), what the kernel compares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_id: Option<u64>,
}

impl TaskFilter {
    /// Whose work is counted: `process 1234 (qemu)`, `cgroup /sys/fs/cgroup/vm`, or both.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(pid) = self.pid {
            match &self.comm {
                Some(comm) => parts.push(format!("process {pid} ({comm})")),
                None => parts.push(format!("process {pid}")),
            }
        }
        if let Some(cgroup) = &self.cgroup {
            parts.push(format!("cgroup {cgroup}"));
        }
        parts.join(" in ")
    }

    /// What the numbers of a filtered run leave out, said once in the report's warnings, the
    /// summary, the live view and `diagnose`.
    pub fn note(&self) -> String {
        format!(
            "only the work {} did in task context is counted (--pid/--cgroup): interrupt-context \
             work, which belongs to no task (I/O completions, unmaps and IOTLB flushes run from \
             interrupts, deferred flush-queue work), is not, so completions, per-I/O figures and \
             unmap counts are not the devices' whole",
            self.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_names_the_process_and_the_cgroup() {
        let pid = TaskFilter {
            pid: Some(1234),
            comm: Some("qemu".into()),
            ..TaskFilter::default()
        };
        assert_eq!(pid.describe(), "process 1234 (qemu)");
        let both = TaskFilter {
            cgroup: Some("/sys/fs/cgroup/vm".into()),
            cgroup_id: Some(77),
            ..pid.clone()
        };
        assert_eq!(
            both.describe(),
            "process 1234 (qemu) in cgroup /sys/fs/cgroup/vm"
        );
        assert!(
            pid.note().contains("interrupt-context work"),
            "{}",
            pid.note()
        );
    }

    #[test]
    fn absent_parts_are_left_out_of_the_json() {
        let filter = TaskFilter {
            cgroup: Some("/sys/fs/cgroup/vm".into()),
            cgroup_id: Some(77),
            ..TaskFilter::default()
        };
        assert_eq!(
            serde_json::to_value(&filter).expect("serializes"),
            serde_json::json!({"cgroup": "/sys/fs/cgroup/vm", "cgroup_id": 77})
        );
    }
}
