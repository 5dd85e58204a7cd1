//! iommutop workloads.
