//! The object's maps: typed handles taken at load, how many keys they are made with, what they
//! take in kernel memory, and reading them (rows, counters, the programs' own counts) into samples.

pub(crate) mod capacity;
pub(crate) mod convert;
pub(crate) mod fdinfo;
pub(crate) mod map_memory;
pub(crate) mod probe_maps;
pub(crate) mod rows;
