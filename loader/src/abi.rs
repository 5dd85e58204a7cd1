//! The Rust view of `ebpf/include/iommutop/abi.h` ([`iommutop_abi::bindings`]).

pub use iommutop_abi::bindings::*;
