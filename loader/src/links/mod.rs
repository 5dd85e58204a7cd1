//! Hooking kernel functions: fentry and fexit programs verified and attached on many threads,
//! and multi-function links (one program for a family's functions, each told apart by its cookie),
//! with the entry groups their skipped runs are read in.

pub(crate) mod entry_groups;
pub(crate) mod fentry_jobs;
pub(crate) mod multi;
pub(crate) mod multi_cast;
pub(crate) mod multi_shapes;
