//! `top --batch`'s text table on the fixtures the live view is tested with.

mod fixtures;

use iommutop_tui::batch::render_interval;
use iommutop_tui::Column;

#[test]
fn busy_devices_come_first_in_aligned_columns() {
    let snapshot = fixtures::busy_nic_pair(3).pop().expect("a snapshot");
    let text = render_interval("2026-11-23T08:00:03Z", &snapshot, Column::MapsPerS);
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
