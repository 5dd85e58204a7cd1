//! A network namespace created and a NIC moved into one, as recorded, and putting them back.

use crate::command::run_quiet;
use crate::error::HostError;
use crate::root::HostRoot;
use serde::{Deserialize, Serialize};

/// A NIC as it was before it moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicState {
    pub name: String,
    pub up: bool,
    /// Global and site addresses with their prefix (`192.0.2.7/24`, `fd00::7/64`).
    pub addresses: Vec<String>,
    /// The namespace it was moved to.
    pub namespace: String,
}

/// A network namespace created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceChange {
    pub name: String,
}

impl NamespaceChange {
    pub fn summary(&self) -> String {
        format!("network namespace {} deleted", self.name)
    }

    /// Stops what still runs in the namespace (a killed run's netserver) and deletes it.
    pub fn undo(&self, root: &HostRoot) -> Result<(), HostError> {
        if !root.manage_network || !root.run("netns").join(&self.name).exists() {
            return Ok(());
        }
        if let Ok(pids) = run_quiet(&["ip", "netns", "pids", &self.name]) {
            for pid in pids
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: kill() only sends a signal; these processes run in a namespace this
                // tool created for its own tools (named iommutop-PID-…).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        run_quiet(&["ip", "netns", "delete", &self.name]).map(|_| ())
    }
}

impl NicState {
    pub fn summary(&self) -> String {
        format!("{} moved back from {}", self.name, self.namespace)
    }

    /// Moves the NIC back into this process's namespace with its addresses and up/down state.
    pub fn undo(&self, root: &HostRoot) -> Result<(), HostError> {
        if !root.manage_network {
            return Ok(());
        }
        let here = std::process::id().to_string();
        let in_namespace = run_quiet(&[
            "ip",
            "-n",
            &self.namespace,
            "link",
            "show",
            "dev",
            &self.name,
        ])
        .is_ok();
        if in_namespace {
            run_quiet(&[
                "ip",
                "-n",
                &self.namespace,
                "link",
                "set",
                "dev",
                &self.name,
                "netns",
                &here,
            ])?;
        }
        if !root.sys("class/net").join(&self.name).exists() {
            return Err(HostError::NicMissing {
                nic: self.name.clone(),
                namespace: self.namespace.clone(),
            });
        }
        let _ = run_quiet(&["ip", "addr", "flush", "dev", &self.name, "scope", "global"]);
        let mut problems = Vec::new();
        for address in &self.addresses {
            if let Err(e) = run_quiet(&["ip", "addr", "add", address, "dev", &self.name]) {
                problems.push(format!("restoring {address} on {}: {e}", self.name));
            }
        }
        let updown = if self.up { "up" } else { "down" };
        if let Err(e) = run_quiet(&["ip", "link", "set", "dev", &self.name, updown]) {
            problems.push(format!("setting {} {updown}: {e}", self.name));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(HostError::Several(problems))
        }
    }
}
