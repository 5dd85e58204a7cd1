//! Generates the Rust view of the kernel↔user ABI header (`ebpf/include/iommutop/abi.h`) with
//! bindgen: never a hand-copied twin.

use std::env;
use std::path::{Path, PathBuf};
use std::process::exit;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_else(|_| fail("OUT_DIR is not set")));
    let header = manifest.join("../ebpf/include/iommutop/abi.h");
    println!("cargo:rerun-if-changed={}", header.display());
    generate_abi_bindings(&header, &out.join("abi.rs"));
}

fn generate_abi_bindings(header: &Path, target: &Path) {
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_type("iommutop_.*")
        .allowlist_var("IOMMUTOP_.*")
        .constified_enum_module("iommutop_.*")
        .derive_default(false)
        .layout_tests(true)
        .use_core()
        .generate()
        .unwrap_or_else(|e| {
            fail(&format!(
                "bindgen on {}: {e} (bindgen needs libclang: apt-get install libclang1-14)",
                header.display()
            ))
        });
    bindings
        .write_to_file(target)
        .unwrap_or_else(|e| fail(&format!("write {target:?}: {e}")));
}

fn fail(message: &str) -> ! {
    eprintln!("iommutop-abi build: {message}");
    exit(1)
}
