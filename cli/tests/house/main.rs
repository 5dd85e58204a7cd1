//! The house rules a test can check, over the whole workspace: no Rust module circle in any
//! crate (`layers`), the BPF library in floors with no circle of includes or calls
//! (`bpf_layers`), no file and no function past what one reader follows (`file_sizes`,
//! `fn_lengths`). Run them: `cargo test -p iommutop --test house`.

mod bpf_layers;
mod circles;
mod file_sizes;
mod fn_lengths;
mod layers;
