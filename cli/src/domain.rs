//! An IOMMU group's domain type switched for a recording or an A/B run, through the host layer
//! ([`iommutop_host::domain`]), which records the switch before making it and puts it back on
//! restore, on drop and, after a kill, in the sweep.
//!
//! What this module adds is the process's side: while a switch is alive SIGINT, SIGTERM, SIGHUP
//! and SIGQUIT only set a flag, so neither a second Ctrl-C nor a closed terminal can end the
//! process before the restore.

use iommutop_host::domain::DomainSwitch as HostSwitch;
use iommutop_host::HostRoot;
use signal_hook::SigId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use iommutop_host::domain::TYPES;
pub use iommutop_host::DomainError;

/// While alive, SIGINT, SIGTERM, SIGHUP and SIGQUIT set a flag instead of ending the process.
/// signal-hook cannot put the default action back when the last flag goes: a SIGHUP or SIGQUIT
/// after the restore is ignored (the commands that switch end right after; SIGINT and SIGTERM
/// keep their stop flag).
struct SignalShield {
    ids: Vec<SigId>,
    raised: Arc<AtomicBool>,
}

impl SignalShield {
    fn raise() -> SignalShield {
        let raised = Arc::new(AtomicBool::new(false));
        let ids = [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
            signal_hook::consts::SIGQUIT,
        ]
        .into_iter()
        .filter_map(|signal| signal_hook::flag::register(signal, Arc::clone(&raised)).ok())
        .collect();
        SignalShield { ids, raised }
    }
}

impl Drop for SignalShield {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// An IOMMU group in another domain type until restored or dropped, with signals held off.
pub struct DomainSwitch {
    switch: HostSwitch,
    // Dropped after the restore in `Drop::drop`.
    shield: SignalShield,
}

impl DomainSwitch {
    /// Puts the group of the PCI device `address` in `new_type`.
    pub fn apply(address: &str, new_type: &str) -> Result<DomainSwitch, DomainError> {
        let shield = SignalShield::raise();
        let switch = HostSwitch::apply(&HostRoot::system(), address, new_type)?;
        Ok(DomainSwitch { switch, shield })
    }

    pub fn original_type(&self) -> &str {
        self.switch.original_type()
    }

    pub fn group(&self) -> &str {
        self.switch.group()
    }

    /// Whether a signal arrived while the switch was in place (the caller's stop flag sees it too).
    pub fn interrupted(&self) -> bool {
        self.shield.raised.load(Ordering::Relaxed)
    }

    /// Puts the original type and bindings back; also done on drop. Safe to call twice.
    pub fn restore(&mut self) -> Result<(), DomainError> {
        self.switch.restore()
    }
}

impl Drop for DomainSwitch {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("iommutop: {e}");
        }
    }
}
