//! What the running kernel has, read from /proc/kallsyms (its functions, its preempt count, its
//! stack size; kept for the rest of the boot) and from its IOMMU units (which vendors' drivers run).

pub(crate) mod kallsyms;
pub(crate) mod kallsyms_cache;
pub(crate) mod vendors;
