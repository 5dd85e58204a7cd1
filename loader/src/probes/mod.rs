//! The loaded probes ([`loader::Probes`]): every selected point attached on the cheapest tier that
//! works, every program verified on request, the kernel's own trace events counted beside them, and
//! the links detached behind the process.

pub(crate) mod attach;
pub(crate) mod cross_check;
pub(crate) mod detach;
pub(crate) mod loader;
pub(crate) mod verify;
