//! What a probe program cannot time from inside: the kernel's dispatch around it (calibrated,
//! and kept for the boot), and a task preempted inside it (understudies, the role each copy plays).

pub(crate) mod dispatch;
pub(crate) mod dispatch_cache;
pub(crate) mod preemption;
pub(crate) mod role;
pub(crate) mod understudy;
