//! NVMe from the specification: data structures, PRPs, queue arithmetic, the controller.

pub mod controller;
pub mod prp;
pub mod queue;
pub mod spec;
