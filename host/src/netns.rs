//! NICs moved into network namespaces, and back: each namespace and each NIC's state (up or
//! down, global addresses) is recorded before it is created or moved, and put back by
//! [`Namespaces::restore`], on drop, or by the sweep if the process was killed.
//!
//! Uses iproute2's `ip` (`ip netns`, `ip -n`, `ip -j`); busybox's `ip` has no netns support.

use crate::change::{NamespaceChange, NicState};
use crate::command::run_quiet;
use crate::error::HostError;
use crate::journal::Journal;
use crate::nic::{nic_state, parse_operstate};
use crate::record::Change;
use crate::root::HostRoot;
use std::time::{Duration, Instant};

/// Where one NIC goes and the address it gets there (`10.77.0.1/24`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub nic: String,
    pub namespace: String,
    pub address: String,
}

/// Network namespaces this process created, with the NICs it moved into them.
#[derive(Debug)]
pub struct Namespaces {
    journal: Journal,
}

impl Namespaces {
    /// Creates the namespaces and moves each NIC into its own with its address, up; waits up to
    /// `link_timeout` for each link to come up. Each step is recorded before it is taken; on
    /// error, what was done is undone before returning.
    pub fn set_up(
        root: &HostRoot,
        placements: &[Placement],
        link_timeout: Duration,
    ) -> Result<Namespaces, HostError> {
        let mut before = Vec::new();
        for p in placements {
            let state = nic_state(&p.nic)?;
            before.push(NicState {
                name: p.nic.clone(),
                up: state.up,
                addresses: state.addresses,
                namespace: p.namespace.clone(),
            });
        }
        let mut journal = Journal::new(root, "network namespaces");
        if let Err(e) = move_all(&mut journal, placements, before, link_timeout) {
            return Err(match journal.undo() {
                Ok(()) => e,
                Err(undo) => HostError::Several(vec![e.to_string(), format!("restoring: {undo}")]),
            });
        }
        Ok(Namespaces { journal })
    }

    /// Moves the NICs back, puts their state back, deletes the namespaces; returns what could
    /// not be restored (empty when all was). Idempotent.
    pub fn restore(&mut self) -> Vec<String> {
        match self.journal.undo() {
            Ok(()) => Vec::new(),
            Err(HostError::Several(problems)) => problems,
            Err(e) => vec![e.to_string()],
        }
    }
}

fn move_all(
    journal: &mut Journal,
    placements: &[Placement],
    before: Vec<NicState>,
    link_timeout: Duration,
) -> Result<(), HostError> {
    let mut created: Vec<String> = Vec::new();
    for (p, state) in placements.iter().zip(before) {
        if !created.contains(&p.namespace) {
            journal.record(Change::Namespace(NamespaceChange {
                name: p.namespace.clone(),
            }))?;
            created.push(p.namespace.clone());
            run_quiet(&["ip", "netns", "add", &p.namespace])?;
            run_quiet(&["ip", "-n", &p.namespace, "link", "set", "dev", "lo", "up"])?;
        }
        journal.record(Change::NicMove(state))?;
        run_quiet(&["ip", "link", "set", "dev", &p.nic, "netns", &p.namespace])?;
        run_quiet(&[
            "ip",
            "-n",
            &p.namespace,
            "addr",
            "add",
            &p.address,
            "dev",
            &p.nic,
        ])?;
        run_quiet(&["ip", "-n", &p.namespace, "link", "set", "dev", &p.nic, "up"])?;
    }
    for p in placements {
        wait_link_up(&p.namespace, &p.nic, link_timeout)?;
    }
    Ok(())
}

fn wait_link_up(namespace: &str, nic: &str, timeout: Duration) -> Result<(), HostError> {
    let deadline = Instant::now() + timeout;
    loop {
        let state = run_quiet(&["ip", "-n", namespace, "-j", "link", "show", "dev", nic])
            .ok()
            .and_then(|json| parse_operstate(&json));
        // Virtual links without carrier reporting say UNKNOWN once up.
        if matches!(state.as_deref(), Some("UP" | "UNKNOWN")) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(HostError::LinkDown {
                nic: nic.to_string(),
                namespace: namespace.to_string(),
                seconds: timeout.as_secs(),
                state: state.unwrap_or_else(|| "unknown".into()),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
