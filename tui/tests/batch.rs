//! `top --batch`'s text table on the fixtures the live view is tested with.

mod fixtures;

use iommutop_model::sample::Op;
use iommutop_tui::batch::render_interval;
use iommutop_tui::Column;

#[test]
fn busy_devices_come_first_in_aligned_columns() {
    let snapshot = fixtures::busy_nic_pair(3).pop().expect("a snapshot");
    let text = render_interval(
        "2026-11-23T08:00:03Z",
        &snapshot,
        Column::MapsPerS,
        "",
        None,
        None,
        None,
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("time 2026-11-23T08:00:03Z  interval 1.0 s"),
        "{text}"
    );
    let header = lines[1];
    let maps = header.find("MAPS/s").expect("MAPS/s column");
    let rows: Vec<&str> = lines[2..]
        .iter()
        .copied()
        .filter(|l| !l.is_empty())
        .collect();
    assert!(rows.len() >= 2, "{text}");
    assert!(rows[0].starts_with("0000:00:0"), "the NICs first: {text}");
    // Numbers are right-aligned under their header's end.
    let header_end = maps + "MAPS/s".len();
    for row in &rows {
        let cell_end = row[..header_end].trim_end().len();
        assert_eq!(cell_end, header_end, "misaligned: {row}\n{text}");
    }
}

/// `top --batch --filter` keeps the rows the live view's `/` would keep, in `--sort`'s order.
#[test]
fn the_filter_and_sort_given_at_start_up_shape_every_block() {
    let snapshot = fixtures::busy_nic_pair(3).pop().expect("a snapshot");
    let filter = "0000:00:0";
    let expected: Vec<String> = {
        let mut keys: Vec<String> = snapshot
            .devices
            .iter()
            .filter(|d| d.key.to_string().contains(filter))
            .map(|d| d.key.to_string())
            .collect();
        keys.sort();
        keys
    };
    assert!(
        expected.len() < snapshot.devices.len(),
        "the filter must drop a row"
    );
    let text = render_interval(
        "2026-11-23T08:00:03Z",
        &snapshot,
        Column::Device,
        filter,
        None,
        None,
        None,
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with(&format!(
            "{} devices  sort DEVICE  filter \"{filter}\"",
            expected.len()
        )),
        "{text}"
    );
    let keys: Vec<&str> = lines[2..]
        .iter()
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let (last, rows) = keys.split_last().expect("rows");
    assert_eq!(rows, expected, "{text}");
    assert_eq!(
        *last, "total",
        "the shown rows' totals close the block: {text}"
    );
}

/// Waiting inside translation: a device whose DMA calls waited 5% of their time or more gets a line
/// under the table; its CPU% and NS/IO cells are on-CPU time, as without waiting.
#[test]
fn waiting_inside_translation_gets_a_line_under_the_table() {
    let waiting = fixtures::waiting_nvme(3).pop().expect("a snapshot");
    let plain = fixtures::busy_nvme(3).pop().expect("a snapshot");
    let block = |snapshot| {
        render_interval(
            "2026-11-23T08:00:03Z",
            snapshot,
            Column::MapsPerS,
            "",
            None,
            None,
            None,
        )
    };
    let (text, before) = (block(&waiting), block(&plain));
    let nvme = waiting
        .devices
        .iter()
        .find(|d| d.key == "0000:00:04.0")
        .expect("the NVMe");
    let waited = [Op::DmaMap, Op::DmaUnmap]
        .iter()
        .filter_map(|&op| nvme.op(op).latency)
        .map(|l| l.timed / 10)
        .sum::<u64>();
    let line = format!(
        "waiting: 0000:00:04.0 75.0% of DMA time switched out ({waited} calls), not in CPU% or NS/IO"
    );
    assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    assert_eq!(
        text.replace(&format!("{line}\n"), ""),
        before,
        "nothing else changes"
    );
    assert!(!before.contains("waiting:"), "{before}");
}

/// The server machine's thirteen rows fitted to 80 and to 200 columns: no line longer than the
/// terminal, every cell whole (columns that do not fit are left out, the least important
/// first), the rows sorted and their totals last.
#[test]
fn a_server_s_rows_fit_80_and_200_columns_whole() {
    let snapshot = fixtures::busy_server(12).pop().expect("a snapshot");
    let full = render_interval(
        "2026-11-29T08:00:12Z",
        &snapshot,
        Column::MapsPerS,
        "",
        None,
        None,
        None,
    );
    let full_rows: Vec<&str> = full.lines().skip(2).filter(|l| !l.is_empty()).collect();
    assert_eq!(full_rows.len(), snapshot.devices.len() + 1, "{full}");
    for width in [80, 200] {
        let text = render_interval(
            "2026-11-29T08:00:12Z",
            &snapshot,
            Column::MapsPerS,
            "",
            None,
            None,
            Some(width),
        );
        let lines: Vec<&str> = text.lines().collect();
        for line in &lines[1..] {
            assert!(line.chars().count() <= width, "{width}: {line:?}");
        }
        let header: Vec<&str> = lines[1].split_whitespace().collect();
        for kept in ["DEVICE", "MAPS/s", "NS/IO", "CPU%"] {
            assert!(header.contains(&kept), "{width}: no {kept} in {header:?}");
        }
        // Each row is the full table's row with whole cells left out, never cut: its cells, in
        // order, are among the full row's cells.
        let rows: Vec<&str> = lines[2..]
            .iter()
            .copied()
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(rows.len(), full_rows.len(), "{width}:\n{text}");
        for (row, full_row) in rows.iter().zip(&full_rows) {
            let mut whole = full_row.split_whitespace();
            for cell in row.split_whitespace() {
                assert!(
                    whole.any(|c| c == cell),
                    "{width}: `{cell}` of {row:?} is not a whole cell of {full_row:?}"
                );
            }
        }
        assert!(
            rows.last().is_some_and(|l| l.starts_with("total")),
            "{text}"
        );
    }
    let wide = render_interval(
        "2026-11-29T08:00:12Z",
        &snapshot,
        Column::MapsPerS,
        "",
        None,
        None,
        Some(200),
    );
    assert_eq!(wide, full, "200 columns hold every column");
}
