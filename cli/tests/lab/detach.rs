//! Detaching in the lab: `record` returns once its report is written and its probes detach
//! behind it, in a process of their own (`Probes::detach_behind`). On 7.3, by default,
//! multi-function links serve most functions and per-function links the rest
//! (loader/src/links/multi.rs): both kinds detach behind. Two recordings of dd's 2000 direct reads
//! of the NVMe on two vCPUs, the second started the moment the first returned,
//! while the first's programs were still detaching (the second waits for them before attaching):
//! both count exactly what the block layer counts, and none of our programs is left once the
//! detach is over (60 s at most here; the 10 s target is `bench/attach`'s, measured with nothing
//! else running). The guest side is
//! `cli/tests/lab/detach.sh`; the time to the prompt is printed here and measured by
//! `bench/attach`.

use crate::support::exact::{count, device, NVME};
use crate::support::*;

#[test]
fn record_returns_before_the_detach_and_a_second_record_at_once_counts_exactly() {
    if lab_skipped("lab_detach") {
        return;
    }
    let out = run_guest_script(
        "detach",
        &["--kernel", "7.3", "--iommu", "intel", "--smp", "2"],
        "detach.sh",
        &[],
    );
    for name in ["first", "second"] {
        let err = read(&out.join(format!("{name}.err")));
        assert!(
            err.contains("functions on multi-function links"),
            "{name}: 7.3 has multi-function links, the default there, and -v says which functions they serve:\n{err}"
        );
        let report = read_guest_report(&out, name);
        let reads: u64 = read(&out.join(format!("{name}.reads")))
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}.reads: {e}"));
        assert_eq!(reads, 2000, "{name}: the block layer saw dd's 2000 reads");
        let nvme = device(&report, NVME);
        for op in ["dma_map", "dma_unmap", "completion"] {
            assert_eq!(
                count(nvme, op),
                reads,
                "{name}: the NVMe's {op} against the block layer's reads"
            );
        }
    }
    eprintln!(
        "detach: the shell had the first record back {} s after its report's last write",
        read(&out.join("first.prompt_s")).trim()
    );
    let second_err = read(&out.join("second.err"));
    let waited = second_err
        .lines()
        .find(|l| l.contains("an earlier run's probes"))
        .unwrap_or("the first's probes had detached before the second attached");
    eprintln!("detach: second record: {waited}");
    assert_eq!(
        read(&out.join("bpftool.rc")).trim(),
        "0",
        "bpftool prog show failed, so what is left attached is unknown: {}",
        read(&out.join("bpftool.err"))
    );
    let gone_after = read(&out.join("progs-gone-after_s"));
    assert_ne!(
        gone_after.trim(),
        "never",
        "programs still loaded 60 s after the second record returned:\n{}",
        read(&out.join("progs-left.txt"))
    );
    eprintln!(
        "detach: none of our programs left {} s after the second record returned",
        gone_after.trim()
    );
}
