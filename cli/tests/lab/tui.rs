//! The live view in the lab (1 boot): `iommutop top` in a tmux pane in the guest while dd reads the
//! NVMe with O_DIRECT. The NVMe's row shows up with non-zero rates, `q` quits with status 0, the
//! terminal is back in cooked mode on the main screen, and the --json report is valid. The guest
//! side is cli/tests/lab/top-tmux.sh.

use crate::support::*;

/// The cells of the row whose first cell is `key`, by the header's column titles.
fn row_cells(pane: &str, key: &str) -> Option<Vec<(String, String)>> {
    let cells = |line: &str| -> Vec<String> {
        line.trim_matches(|c: char| c == '│' || c.is_whitespace())
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let header = pane
        .lines()
        .find(|l| l.contains("DEVICE") && l.contains("MAPS/s"))?;
    let row = pane
        .lines()
        .find(|l| l.trim_start_matches('│').starts_with(&format!("{key} ")))?;
    Some(cells(header).into_iter().zip(cells(row)).collect())
}

fn cell<'a>(cells: &'a [(String, String)], title: &str) -> &'a str {
    cells
        .iter()
        .find(|(t, _)| t == title)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no column {title} in {cells:?}"))
}

/// `3.07k` → 3070, `12.6` → 12.6, `0` → 0.
pub(crate) fn rate(text: &str) -> f64 {
    let (number, scale) = match text.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match text.strip_suffix('M') {
            Some(n) => (n, 1e6),
            None => (text, 1.0),
        },
    };
    number.parse::<f64>().map(|n| n * scale).unwrap_or(0.0)
}

#[test]
fn lab_top_shows_the_nvme_under_dd_and_quits_cleanly() {
    if lab_skipped("lab top") {
        return;
    }
    let out = lab_out_dir("top");
    let script = project_root().join("cli/tests/lab/top-tmux.sh");
    let bin = lab_iommutop_bin();
    let output = lab_run(
        &["--kernel", "6.12", "--iommu", "intel"],
        &[
            "sh",
            script.to_str().expect("utf-8 path"),
            &bin,
            out.to_str().expect("utf-8 path"),
        ],
    );
    let file = |name: &str| out.join(name);
    let top_err = std::fs::read_to_string(file("top.err")).unwrap_or_default();
    assert!(
        output.status.success(),
        "the guest script failed: {}\n{top_err}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pane = read(&file("pane.txt"));
    let nvme = read(&file("nvme-pci")).trim().to_string();

    // The view: host line, the NVMe's row with non-zero rates, the footer.
    assert!(pane.contains("intel IOMMU"), "{pane}");
    assert!(pane.contains("6.12"), "{pane}");
    let cells = row_cells(&pane, &nvme)
        .unwrap_or_else(|| panic!("no row for the NVMe {nvme}:\n{pane}\n{top_err}"));
    assert_eq!(cell(&cells, "DRIVER"), "nvme", "{pane}");
    assert_eq!(cell(&cells, "NAMES"), "nvme0n1", "{pane}");
    assert!(rate(cell(&cells, "MAPS/s")) > 0.0, "no map rate:\n{pane}");
    assert!(rate(cell(&cells, "MB/s")) > 0.0, "no MB/s:\n{pane}");
    // fentry attaches in the lab's kernels: latency is measured, so the CPU share is too.
    assert_ne!(cell(&cells, "MAP50"), "-", "{pane}");
    assert_ne!(cell(&cells, "CPU%"), "-", "{pane}");
    assert!(
        pane.contains(&format!(" {nvme} nvme")),
        "no detail pane:\n{pane}"
    );
    assert!(pane.contains("dma_map fentry"), "{pane}");
    assert!(pane.contains("BPF "), "{pane}");

    // q: status 0, terminal restored, report written.
    assert_eq!(read(&file("rc")).trim(), "0", "{top_err}");
    let stty = read(&file("stty"));
    let modes: Vec<&str> = stty.split_whitespace().collect();
    assert!(
        modes.contains(&"icanon") && modes.contains(&"echo"),
        "{stty}"
    );
    assert_eq!(
        read(&file("alternate")).trim(),
        "0",
        "still on the alternate screen"
    );
    let report = read_json(&file("top.json"));
    assert_valid_report(&report);
    let device = report["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["key"] == nvme.as_str()))
        .unwrap_or_else(|| panic!("no {nvme} in the report"));
    assert!(op_count(device, "dma_map") > 0);
    assert!(top_err.contains("report written to"), "{top_err}");
    // q gave the terminal back first; the report and the probes' detach finished behind it.
    assert!(
        top_err.contains("iommutop: stopping: writing the report and detaching the probes"),
        "{top_err}"
    );
    eprintln!(
        "q gave the terminal back in {} ms",
        read(&file("quit-ms")).trim()
    );
}

#[test]
fn row_cells_follow_the_header() {
    let pane = "\
│DEVICE       DRIVER  NAMES    MAPS/s   MB/s  MAP50  MAP99 IOVA50  NS/IO   CPU%│
│0000:00:04.0 nvme    nvme0n1   3.07k   12.6 1.75us 14.7us  416ns 5.50us  1.69%│
┌ 0000:00:04.0 nvme · nvme0n1 ─┐";
    let cells = row_cells(pane, "0000:00:04.0").expect("row");
    assert_eq!(cell(&cells, "MAPS/s"), "3.07k");
    assert_eq!(rate("3.07k"), 3070.0);
    assert_eq!(cell(&cells, "CPU%"), "1.69%");
    assert!(row_cells(pane, "0000:00:05.0").is_none());
}
