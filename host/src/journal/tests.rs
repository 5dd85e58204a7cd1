//! The journal on a fake machine: recorded before each change, undone on request, on drop and
//! by the sweep after a kill; a record of a live process left alone.

use super::*;
use crate::fake::{Fake, FakeKernel, NVME};
use crate::hugepages::Pool;

/// pid_max is at most 2^22: a record of this pid is a killed process's.
const DEAD: u32 = 4_999_999;

fn count(fake: &Fake) -> String {
    fake.read("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
}

fn record_of(fake: &Fake, name: &str) -> Record {
    let text = std::fs::read_to_string(fake.path("run/iommutop").join(name)).expect("record");
    serde_json::from_str(&text).expect("json")
}

#[test]
fn a_rebind_is_recorded_before_it_is_made_and_undone() {
    let fake = Fake::new();
    let _kernel = FakeKernel::start(&fake, NVME, "nvme");
    let mut journal = Journal::new(&fake.root(), "test");
    let change = crate::pci::rebind(&mut journal, NVME.parse().expect("address"), "vfio-pci")
        .expect("rebound");
    assert_eq!(change.from.as_deref(), Some("nvme"));
    assert_eq!(change.disks, ["nvme0n1"]);
    assert_eq!(fake.driver(NVME).as_deref(), Some("vfio-pci"));
    let records = fake.records();
    assert_eq!(records.len(), 1);
    let record = record_of(&fake, &records[0]);
    assert_eq!(record.pid, std::process::id());
    assert_eq!(record.changes[0].change, Change::Driver(change));
    journal.undo().expect("undone");
    assert_eq!(fake.driver(NVME).as_deref(), Some("nvme"));
    assert_eq!(
        fake.read(&format!("sys/devices/pci0000:00/{NVME}/driver_override")),
        "",
        "driver_override cleared"
    );
    assert!(fake.records().is_empty(), "the record goes once undone");
    journal.undo().expect("a second undo does nothing");
}

#[test]
fn a_dropped_journal_undoes_its_changes() {
    let fake = Fake::new();
    let _kernel = FakeKernel::start(&fake, NVME, "nvme");
    {
        let mut journal = Journal::new(&fake.root(), "test");
        crate::pci::rebind(&mut journal, NVME.parse().expect("address"), "vfio-pci")
            .expect("rebound");
        let pool = Pool::of_size(&fake.root(), 2048).expect("pool");
        pool.raise(&mut journal, 8).expect("raised");
        assert_eq!(count(&fake), "8");
    }
    assert_eq!(count(&fake), "2");
    assert_eq!(fake.driver(NVME).as_deref(), Some("nvme"));
    assert!(fake.records().is_empty());
}

#[test]
fn a_huge_page_pool_is_raised_and_lowered_back() {
    let fake = Fake::new();
    let root = fake.root();
    let pool = Pool::of_size(&root, 2048).expect("pool");
    assert_eq!(pool.counts().expect("counts").total, 2);
    let mut journal = Journal::new(&root, "test");
    let reserved = pool.raise(&mut journal, 6).expect("raised");
    assert_eq!((reserved.change.from, reserved.change.to), (2, 6));
    assert_eq!(
        reserved.granted, 6,
        "the fake file reads back what was written"
    );
    journal.undo().expect("undone");
    assert_eq!(count(&fake), "2");
    let missing = Pool::of_size(&root, 1_048_576).unwrap_err().to_string();
    assert!(
        missing.starts_with("this kernel has no 1048576 kB huge pages"),
        "{missing}"
    );
}

#[test]
fn nothing_is_written_when_the_record_cannot_be() {
    let fake = Fake::new();
    fake.write("run/iommutop", "a file where the directory should be");
    let mut journal = Journal::new(&fake.root(), "test");
    let pool = Pool::of_size(&fake.root(), 2048).expect("pool");
    assert!(pool.raise(&mut journal, 8).is_err());
    assert_eq!(count(&fake), "2", "no change without its record");
    assert!(journal.entries().is_empty());
}

#[test]
fn the_sweep_undoes_what_a_killed_process_left_and_spares_the_living() {
    let fake = Fake::new();
    let _kernel = FakeKernel::start(&fake, NVME, "nvme");
    let root = fake.root();
    // A killed run: the device on vfio-pci and the pool raised, both recorded.
    let mut journal = Journal::new(&root, "vfio-nvme 0000:00:04.0");
    crate::pci::rebind(&mut journal, NVME.parse().expect("address"), "vfio-pci").expect("rebound");
    Pool::of_size(&root, 2048)
        .expect("pool")
        .raise(&mut journal, 8)
        .expect("raised");
    let mut record = record_of(&fake, &fake.records()[0]);
    std::mem::forget(journal);
    record.pid = DEAD;
    std::fs::write(
        fake.path(&format!("run/iommutop/{DEAD}-0.json")),
        serde_json::to_string(&record).expect("json"),
    )
    .expect("write");
    // A live one (pid 1 always runs) and ours: left alone.
    let mut live = record.clone();
    live.pid = 1;
    std::fs::write(
        fake.path("run/iommutop/1-0.json"),
        serde_json::to_string(&live).expect("json"),
    )
    .expect("write");
    let claimed = claimed_by_other(
        &root,
        |c| matches!(c, Change::Driver(d) if d.pci_address.to_string() == NVME),
    );
    assert_eq!(claimed, Some(1));
    let lines = sweep(&root);
    assert_eq!(
        lines,
        [format!(
            "restored what a killed run (pid {DEAD}) left: 2048 kB huge pages back to 2 (were raised to 8); {NVME} back on nvme"
        )]
    );
    assert_eq!(count(&fake), "2");
    assert_eq!(fake.driver(NVME).as_deref(), Some("nvme"));
    let mut left = fake.records();
    left.sort();
    assert_eq!(left.len(), 2, "ours and the live one: {left:?}");
    assert!(!left.contains(&format!("{DEAD}-0.json")));
}

#[test]
fn an_unreadable_record_is_named_and_kept() {
    let fake = Fake::new();
    fake.write(&format!("run/iommutop/{DEAD}-0.json"), "{not json");
    let lines = sweep(&fake.root());
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains("is unreadable"), "{}", lines[0]);
    assert_eq!(fake.records().len(), 1);
}
