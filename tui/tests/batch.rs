//! `top --batch`'s text table on the fixtures the live view is tested with.

mod fixtures;

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
            .filter(|d| d.key.contains(filter))
            .map(|d| d.key.clone())
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
    assert_eq!(keys, expected, "{text}");
}
