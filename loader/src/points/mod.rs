//! The probe points: the table of kernel functions and tracepoints that implement each (data, not
//! `if`s), which points a run selects, and what each one got and why a hook did not attach.

pub(crate) mod hook_error;
pub(crate) mod selection;
pub(crate) mod status;
pub(crate) mod table;
