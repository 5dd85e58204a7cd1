//! `iommutop man DIR`: the manual pages, generated from the same clap definition as the parser,
//! so they cannot drift from it (a test checks that docs/man/ is what `iommutop man` writes).
//! The completion scripts come from it too, in `completions`.

use crate::cli::Cli;
use crate::exit::{Failure, Outcome};
use anyhow::{anyhow, Context};
use clap::CommandFactory;
use std::path::Path;
use std::process::ExitCode;

/// Writes `iommutop.1` and one `iommutop-COMMAND.1` per command into `dir`.
pub fn man_pages(dir: &Path) -> Outcome<ExitCode> {
    if !dir.is_dir() {
        return Err(Failure::usage(anyhow!(
            "{}: not a directory (give the directory to write the manual pages into)",
            dir.display()
        )));
    }
    for (name, page) in render_man_pages().context("rendering the manual pages")? {
        let path = dir.join(name);
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// File name and roff of every page: `iommutop(1)` and `iommutop-COMMAND(1)`.
pub fn render_man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    // The package version alone: a page naming the commit would change with every commit.
    let command = Cli::command().version(env!("CARGO_PKG_VERSION"));
    let mut pages = Vec::new();
    let mut top = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut top)?;
    top.extend_from_slice(EXIT_STATUS.as_bytes());
    top.extend_from_slice(SECTIONS.as_bytes());
    pages.push(("iommutop.1".to_string(), top));
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("iommutop-{}", sub.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub.clone().name(name.clone())).render(&mut page)?;
        page.extend_from_slice(EXIT_STATUS.as_bytes());
        pages.push((format!("{name}.1"), page));
    }
    Ok(pages)
}

/// EXIT STATUS of every page (README's table of exit codes; `crate::exit::Code`).
const EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
success.
.TP
\fB1\fR
a runtime failure: the kernel refused, a file could not be written.
.TP
\fB2\fR
bad input: arguments, files, an unknown \-\-device or profile, a format a command has no form for.
.TP
\fB3\fR
the system lacks what is needed: root (CAP_BPF and CAP_PERFMON), BTF, a kernel feature.
.TP
\fB4\fR
a threshold given with \-\-fail\-if was crossed (compare, run).
.TP
\fB5\fR
what iommutop must own is taken: serve's listening port.
.TP
\fIother\fR
the command run under the probes failed: its own status.
"#;

/// ENVIRONMENT and EXAMPLES of `iommutop(1)`, after its EXIT STATUS: every `IOMMUTOP_*` setting the
/// binary reads (a test checks that the code reads no other).
const SECTIONS: &str = concat!(
    r#".SH ENVIRONMENT
.TP
\fBCOLUMNS\fR
the width text output is fitted to (else the terminal's; files and pipes are not fitted).
.TP
\fBRUST_LOG\fR
what is logged to stderr, overriding \-v (e.g. iommutop=debug).
.TP
\fBIOMMUTOP_PROFILES\fR
a directory of profiles searched before the built\-in ones.
.TP
\fBIOMMUTOP_STATS_ROWS\fR
rows of per\-device statistics the probes keep (default: sized for this machine); each takes
17 KiB of kernel memory per possible CPU: \fBiommutop probes\fR says what the maps take here and
with 256 CPUs, and how many rows keep them within 64 MiB there.
.TP
\fBIOMMUTOP_TASK_SLOTS\fR
thread\-id slots for calls in flight before the hash by thread id (a power of two; for tests).
.TP
\fBIOMMUTOP_ROW_HINTS\fR
hints of which statistics row is a key's (for tests: 1 makes nearly every lookup slow).
.TP
\fBIOMMUTOP_STACK_INTERVAL_MS\fR
how often a call path is sampled, in milliseconds.
.TP
\fBIOMMUTOP_LINKS\fR
multi (the default: one program for many functions where the kernel links it so, 7.x, and
each function its own programs elsewhere; faster to attach) or per\-function (each hooked
function its own programs everywhere).
.TP
\fBIOMMUTOP_UNDERSTUDIES\fR
auto (the default: where the kernel preempts tasks inside BPF programs, PREEMPT_RT, full or lazy
preemption, each timed program gets an understudy, a copy that acts where the kernel skipped the
program's run), on or off.
.TP
\fBIOMMUTOP_KERNEL_BTF\fR
where the kernel's BTF is read from (default /sys/kernel/btf/vmlinux; tests point it elsewhere).
.TP
\fBIOMMUTOP_DEBUG_VERIFIER\fR
set to print the verifier's log of every program loaded.
.TP
\fBIOMMUTOP_TOP_TEST_PANIC\fR
for tests only: makes top panic, to check that the terminal is restored.
"#,
    r#".SH EXAMPLES
Without root, on the reports in examples/:
.PP
.nf
iommutop report examples/load\-7.3\-intel.json \-\-hist
iommutop compare examples/load\-5.10\-intel.json examples/load\-7.3\-intel.json
iommutop report examples/load\-7.3\-intel.json \-\-html r.html
.fi
.PP
As root:
.PP
.nf
iommutop probes
iommutop record \-\-json r.json \-\- dd if=/dev/nvme0n1 of=/dev/null bs=4k count=100000
iommutop run fio\-randread\-4k\-qd32x4 \-\-set filename=/dev/nvme0n1 \-\-json r.json
iommutop diagnose \-\-ab \-\-device eth0
iommutop top \-\-batch \-n 5
.fi
"#
);
