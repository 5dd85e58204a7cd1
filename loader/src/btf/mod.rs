//! What the loader needs of the kernel's BTF without aya's parse of all of it: one walk of its
//! records, the index of the names the programs hook, the cut the object's CO-RE relocations
//! read, and both kept for the rest of the boot.

pub(crate) mod btf_index;
pub(crate) mod btf_walk;
pub(crate) mod core_target;
pub(crate) mod kernel_btf_cache;
