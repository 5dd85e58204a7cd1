//! Compiles the BPF programs under `ebpf/` into the objects the loader embeds, and generates
//! the Rust view of the kernel↔user ABI header with bindgen.
//!
//! Each probe family (`ebpf/progs/*.bpf.c`) is compiled on its own with clang, then the objects are
//! linked into one (`bpftool gen object`) so that they share the per-CPU attribution maps; twice,
//! once per way of keeping a task's calls in flight (ebpf/lib/stacks.bpf.h).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let ebpf = manifest.join("../ebpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_else(|_| fail("OUT_DIR is not set")));

    rerun_if_changed(&ebpf);
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=BPFTOOL");
    println!("cargo:rerun-if-env-changed=IOMMUTOP_VMLINUX_H");
    println!("cargo:rerun-if-env-changed=IOMMUTOP_BPF_DEFINES");
    // More -D flags for the probe objects: benches build variants with them
    // (bench/probe-cost --against-per-cpu).
    let extra_defines = env::var("IOMMUTOP_BPF_DEFINES").unwrap_or_default();
    let extra_defines: Vec<&str> = extra_defines.split_whitespace().collect();

    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let bpftool = env::var("BPFTOOL").unwrap_or_else(|_| "bpftool".into());
    require_tool(
        &clang,
        "clang (apt-get install clang, or run scripts/install-deps)",
    );
    require_tool(
        &bpftool,
        "bpftool (apt-get install bpftool, or run scripts/install-deps)",
    );
    if !Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        fail("libbpf headers not found (/usr/include/bpf/bpf_helpers.h): apt-get install libbpf-dev, or run scripts/install-deps");
    }

    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let arch_define = bpf_target_arch_define(&target_arch);
    let vmlinux_dir = out.join("vmlinux");
    fs::create_dir_all(&vmlinux_dir)
        .unwrap_or_else(|e| fail(&format!("mkdir {vmlinux_dir:?}: {e}")));
    write_vmlinux_h(&bpftool, &target_arch, &vmlinux_dir.join("vmlinux.h"));

    let compile = |source: &Path, object: &Path, defines: &[&str]| {
        run(
            Command::new(&clang)
                .args(defines)
                .args([
                    "-target",
                    "bpf",
                    "-O2",
                    "-g",
                    "-Wall",
                    "-Werror",
                    arch_define,
                    // v3: 32-bit atomics with fetch (the in-flight stack takes slots atomically)
                    "-mcpu=v3",
                ])
                .arg("-I")
                .arg(ebpf.join("include"))
                .arg("-I")
                .arg(ebpf.join("lib"))
                .arg("-I")
                .arg(&vmlinux_dir)
                .arg("-c")
                .arg(source)
                .arg("-o")
                .arg(object),
            &format!("compiling {}", source.display()),
        );
    };
    // The probe object, twice: with each task's calls in flight in the slot of its thread id,
    // and for kernels whose kprobes have no BTF task pointers (5.10), in a hash keyed by thread
    // id. The loader picks one (src/object/load.rs).
    for (linked, directory, defines) in [
        ("iommutop.bpf.o", "task-slots", &[][..]),
        (
            "iommutop-hashed.bpf.o",
            "task-hash",
            &["-DIOMMUTOP_TASK_STACKS_HASHED"][..],
        ),
    ] {
        let objects_dir = out.join(directory);
        fs::create_dir_all(&objects_dir)
            .unwrap_or_else(|e| fail(&format!("creating {}: {e}", objects_dir.display())));
        let mut objects = Vec::new();
        for source in sources(&ebpf.join("progs"), ".bpf.c") {
            let name = source
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("prog");
            let object = objects_dir.join(name.replace(".bpf.c", ".bpf.o"));
            compile(&source, &object, &[defines, &extra_defines[..]].concat());
            objects.push(object);
        }
        run(
            Command::new(&bpftool)
                .args(["gen", "object"])
                .arg(out.join(linked))
                .args(&objects),
            "linking the BPF objects with bpftool gen object",
        );
        export_fingerprint(&out.join(linked));
    }
    // Test programs, never attached (`iommutop selftest`): an object of their own, so that the
    // probe object holds only what the probe table attaches.
    compile(
        &ebpf.join("selftest/hist.bpf.c"),
        &out.join("selftest.bpf.o"),
        &[],
    );
    // The tracker driven step by step by BPF_PROG_TEST_RUN (src/tracker_test/).
    compile(
        &ebpf.join("selftest/tracker.bpf.c"),
        &out.join("tracker.bpf.o"),
        &["-DIOMMUTOP_SELFTEST"],
    );
    // The probes' dispatch calibration: attached to a test function, never to real work.
    compile(
        &ebpf.join("selftest/dispatch.bpf.c"),
        &out.join("dispatch.bpf.o"),
        &[],
    );
    generate_abi_bindings(&ebpf.join("include/iommutop/abi.h"), &out.join("abi.rs"));
}

fn fail(message: &str) -> ! {
    eprintln!("iommutop-loader build: {message}");
    exit(1)
}

fn require_tool(tool: &str, install_hint: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        fail(&format!("`{tool}` not found: install {install_hint}"));
    }
}

fn run(command: &mut Command, what: &str) {
    match command.output() {
        Ok(output) if output.status.success() => {}
        Ok(output) => fail(&format!(
            "{what} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )),
        Err(e) => fail(&format!("{what}: {e}")),
    }
}

/// libbpf's `__TARGET_ARCH_*` for the architecture the binary is built for: `bpf_tracing.h`
/// reads a kprobe's arguments and stack pointer from that architecture's `pt_regs`.
fn bpf_target_arch_define(target_arch: &str) -> &'static str {
    match target_arch {
        "x86_64" => "-D__TARGET_ARCH_x86",
        "aarch64" => "-D__TARGET_ARCH_arm64",
        other => fail(&format!(
            "no BPF target architecture for `{other}`: iommutop builds for x86_64 and aarch64"
        )),
    }
}

/// vmlinux.h from the build machine's kernel BTF (CO-RE relocates it to the running kernel), or
/// the one IOMMUTOP_VMLINUX_H names: needed when building for another architecture, whose
/// kernel types (pt_regs) the build machine's BTF does not have.
fn write_vmlinux_h(bpftool: &str, target_arch: &str, target: &Path) {
    if let Ok(given) = env::var("IOMMUTOP_VMLINUX_H") {
        println!("cargo:rerun-if-changed={given}");
        fs::copy(&given, target)
            .unwrap_or_else(|e| fail(&format!("IOMMUTOP_VMLINUX_H={given}: {e}")));
        return;
    }
    if target_arch != env::consts::ARCH {
        fail(&format!(
            "building for {target_arch} on {}: set IOMMUTOP_VMLINUX_H to a vmlinux.h of a {target_arch} kernel (bpftool btf dump file /sys/kernel/btf/vmlinux format c, on such a kernel)",
            env::consts::ARCH
        ));
    }
    let btf = "/sys/kernel/btf/vmlinux";
    if !Path::new(btf).exists() {
        fail("no kernel BTF at /sys/kernel/btf/vmlinux to generate vmlinux.h from: build on a kernel with CONFIG_DEBUG_INFO_BTF, or set IOMMUTOP_VMLINUX_H to a vmlinux.h");
    }
    let output = Command::new(bpftool)
        .args(["btf", "dump", "file", btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| fail(&format!("bpftool btf dump: {e}")));
    if !output.status.success() {
        fail(&format!(
            "bpftool btf dump failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    fs::write(target, output.stdout).unwrap_or_else(|e| fail(&format!("write {target:?}: {e}")));
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

fn sources(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| fail(&format!("read {}: {e}", dir.display())))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

fn rerun_if_changed(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                rerun_if_changed(&path);
            } else {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}

/// `IOMMUTOP_FINGERPRINT_<OBJECT>` (`iommutop.bpf.o`: `IOMMUTOP_FINGERPRINT_IOMMUTOP_BPF_O`), the
/// FNV-1a of the object's bytes in hex: what the loader keeps per boot of what it derived from an
/// object (src/btf/core_target.rs) names the object it came from, at no cost per run.
fn export_fingerprint(object: &Path) {
    let bytes =
        fs::read(object).unwrap_or_else(|e| fail(&format!("reading {}: {e}", object.display())));
    let fingerprint = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let name: String = object
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("object")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    println!("cargo:rustc-env=IOMMUTOP_FINGERPRINT_{name}={fingerprint:016x}");
}
